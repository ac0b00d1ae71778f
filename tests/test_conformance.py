"""The conformance suite: each program observes the same thing on the simulator and on trio."""

from __future__ import annotations

import pytest
from conformance_programs import PROGRAMS

from contract.trio_runtime import TrioRuntime
from sim import World

SEEDS = range(8)


def _on_trio(program):
    log, rt = TrioRuntime.run(program, mock_clock=True)
    return log, [(round(e.time, 6), e.kind) for e in rt.events]


def _on_sim(program, seed):
    result = World(seed).run(program)
    assert result.outcome == "ok", result.error
    isolated = [(round(e.time, 6), e.kind) for e in result.history if e.kind.startswith("isolated.")]
    return result.value, isolated


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_observations_on_both_runtimes(name):
    program = PROGRAMS[name]
    expected_log, expected_events = _on_trio(program)
    assert expected_log, "a conformance program must observe something"
    for seed in SEEDS:
        assert _on_sim(program, seed) == (expected_log, expected_events), f"seed {seed}"


def test_programs_observe_what_trio_semantics_promise():
    """Pin a few facts so a shared bug in both runtimes' adapters cannot pass as conformance."""
    log, _ = _on_trio(PROGRAMS["abandoned_isolated_call"])
    assert (1.0, "owner unwound at once, caught=True") in log
    assert (5.0, "late worker finished") in log
    log, _ = _on_trio(PROGRAMS["nested_cancel_scopes"])
    assert (0.0, "both: inner=False outer=True") in log
    log, _ = _on_trio(PROGRAMS["locks"])
    assert all("inside=1" in what for _, what in log if "holds" in what)
    log, _ = _on_trio(PROGRAMS["barriers"])
    assert [time for time, what in log if "passed" in what] == [3.0] * 3 + [6.0] * 3
    log, _ = _on_trio(PROGRAMS["conditions"])
    assert (1.0, "impatient gave up caught=True, locked=False") in log and (2.0, "a took 1") in log
    log, _ = _on_trio(PROGRAMS["resettable_events"])
    assert log == [(1.0, "first passed"), (2.0, "cleared, is_set=False"), (4.0, "second passed"), (5.0, "third passed")]
