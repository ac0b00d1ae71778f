"""The race catalogue proves itself: every mutant a scenario claims to kill, it kills with a violation.

Each curated mutant is run (in an overlay, as `python -m sim run --mutant`) against the scenarios that name
it in `must_fail_under`; the run must fail with an invariant violation, not merely be vacuous. The
unmutated catalogue is checked by the scenario files themselves (the pytest plugin collects them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.mutation.mutants import load_mutants
from sim.scenario.loader import load_paths
from sim.scenario.names import registry

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = load_paths([ROOT / "scenarios"], registry())
KILLERS: dict[str, list[Path]] = {}
for _scenario in SCENARIOS:
    for _mutant in _scenario.expect.must_fail_under:
        KILLERS.setdefault(_mutant, []).append(_scenario.path)


def test_every_claimed_killer_names_a_curated_mutant():
    assert set(KILLERS) <= set(load_mutants()), "must_fail_under names a mutant with no file in mutants/"


def test_every_curated_mutant_is_claimed_by_a_scenario():
    unclaimed = sorted(set(load_mutants()) - set(KILLERS))
    assert not unclaimed, f"no scenario names these mutants in must_fail_under: {unclaimed}"


@pytest.mark.parametrize("mutant", sorted(KILLERS))
def test_each_killer_fails_under_its_mutant_with_a_violation(mutant, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "sim", "run", *map(str, KILLERS[mutant]), "--mutant", mutant, "--json", "--no-shrink", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert done.returncode == 1, f"{mutant} survived:\n{done.stdout}\n{done.stderr}"
    verdicts = json.loads(done.stdout)["scenarios"]
    for verdict in verdicts:
        assert verdict["violation"] is not None, f"{verdict['scenario']} did not catch {mutant} with a violation: {verdict['problems']}"
