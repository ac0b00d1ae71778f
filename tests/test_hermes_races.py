"""Which race a failing hermes run shows (`targets/hermes/races.py`): the violated invariant's races, narrowed by the
mechanism in the run's events. The rules are checked on made-up histories (no release needed), then on the
scripted scenarios of a release, whose `race` key each must be classified as.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from support import ROOT

from contract.events import (
    AppendFailed,
    AppendOk,
    CommitArchived,
    CommitPublished,
    CompactionFinished,
    CompactionInput,
    FrontendTurnAbandoned,
    FrontendTurnSubmitted,
    LeaseAcquired,
    LeaseReleased,
    ProcessCrashed,
    SessionAutoReset,
    TurnContextOverflow,
    TurnPersisted,
)
from contract.history import HistoryEvent
from contract.ids import AttemptId, HolderId, SessionId
from sim.invariants import Violation
from targets.hermes.races import races_of
from targets.hermes.store import ReleaseMissing, release

S = SessionId("s1")
A1, A2 = AttemptId("p1.1"), AttemptId("p2.1")
H1 = HolderId("pid=1:tid=1:agent=a1:nonce=x:proc=p1:attempt=1")
H2 = HolderId("pid=1:tid=2:agent=a2:nonce=y:proc=p2:attempt=1")


def report(events: list[tuple[str, Any]], *violations: tuple[str, tuple[int, ...]]) -> Any:
    """A failing run: (task, event) in order, and (invariant, witness seqs) for each violation."""
    history = [HistoryEvent(seq, float(seq), task, event) for seq, (task, event) in enumerate(events)]
    return SimpleNamespace(violations=[Violation(name, "", witnesses, 0.0) for name, witnesses in violations],
                           result=SimpleNamespace(history=history))


def two_rotations(second_acquires_after_release: bool) -> list[tuple[str, Any]]:
    first = [("t1", LeaseAcquired(session=S, holder=H1)), ("t1", CommitPublished(parent=S, child=SessionId("c1"), attempt=A1)),
             ("t1", LeaseReleased(session=S, holder=H1, held=True))]
    second = [("t2", LeaseAcquired(session=S, holder=H2))]
    events = first + second if second_acquires_after_release else first[:1] + second + first[1:]
    return events + [("t2", CommitPublished(parent=S, child=SessionId("c2"), attempt=A2))]


def test_two_rotations_of_one_parent_are_r19_when_the_second_waited_for_the_release():
    assert races_of(report(two_rotations(True), ("one_continuation_per_parent", (4,)))) == ("R19",)


def test_two_rotations_of_one_parent_are_r25_when_the_second_took_a_lease_still_held():
    """one_continuation_per_parent judges R19 alone: the overlap shows as R25 through an invariant of R25's."""
    overlapping = two_rotations(False)
    assert races_of(report(overlapping, ("one_continuation_per_parent", (4,)))) == ()
    assert races_of(report(overlapping, ("one_continuation_per_parent", (4,)), ("lease_mutual_exclusion", (1,)))) == ("R25",)


def appends(session_appended_during: bool, input_rows: tuple[int, ...] = (1, 2)) -> list[tuple[str, Any]]:
    append = [("t2", AppendOk(session=S, ids=[9])),
              ("t2", TurnPersisted(session=S, caller_session=S, turn=1, role="user", row=9))]
    compaction = [("t1", CompactionInput(session=S, attempt=A1, rows=list(input_rows))),
                  ("t1", CommitArchived(session=S, attempt=A1, rows=2))]
    return compaction[:1] + append + compaction[1:] if session_appended_during else append + compaction


def test_a_lost_append_is_r14_if_a_later_commit_there_did_not_hold_it():
    """Made while the summary ran, or before it by a process whose agent never loaded it: either way the commit
    retired a row it did not summarize. A row the commit's input held was summarized: its loss is no sweep."""
    assert races_of(report(appends(True), ("acknowledged_appends_survive", (2,)))) == ("R14",)
    assert races_of(report(appends(False), ("acknowledged_appends_survive", (1,)))) == ("R14",)
    assert races_of(report(appends(False, (1, 2, 9)), ("acknowledged_appends_survive", (1,)))) == ()
    committed_before = appends(False)[2:] + appends(False)[:2]
    assert races_of(report(committed_before, ("acknowledged_appends_survive", (3,)))) == ()


def test_an_abandoned_turn_is_r1_if_its_compaction_held_the_lease_and_h1_otherwise():
    holding = [("t1", LeaseAcquired(session=S, holder=H1)), ("cli", FrontendTurnAbandoned(agent="a1", text="q"))]
    released = [("t1", LeaseAcquired(session=S, holder=H1)), ("t1", LeaseReleased(session=S, holder=H1, held=True)),
                ("cli", FrontendTurnAbandoned(agent="a1", text="q"))]
    assert races_of(report(holding, ("abandoned_turn_stays_silent", (1,)))) == ("R1",)
    assert races_of(report(released, ("abandoned_turn_stays_silent", (2,)))) == ("H1",)


def test_an_abandoned_turn_no_compaction_of_its_agent_held_a_lease_for_is_h1():
    """hermes's own finding: stalled elsewhere (a store write), the abandoned turn still writes after its grace; a
    lease another agent holds is not its agent's."""
    stalled = [("t2", LeaseAcquired(session=S, holder=H2)), ("cli", FrontendTurnAbandoned(agent="a1", text="q"))]
    assert races_of(report(stalled, ("abandoned_turn_stays_silent", (1,)))) == ("H1",)


def test_a_turn_whose_own_append_failed_before_its_reply_persisted_is_h2():
    """hermes's flush logs a failed append and the turn goes on to persist its reply."""
    def turn(failing_task: str) -> list[tuple[str, Any]]:
        return [("t1", FrontendTurnSubmitted(agent="a1", text="q")), (failing_task, AppendFailed(session=S, error="OperationalError")),
                ("t1", AppendOk(session=S, ids=[3])), ("t1", TurnPersisted(session=S, caller_session=S, turn=1, role="assistant", row=3))]
    assert races_of(report(turn("t1"), ("completed_turn_persists_user_message", (0, 3)))) == ("H2",)
    asked = turn("t2")[:2] + [("t1", TurnPersisted(session=S, caller_session=S, turn=1, role="user", row=2))] + turn("t2")[2:]
    assert races_of(report(asked, ("completed_turn_persists_user_message", (0, 4)))) == ()  # another task's failure


def test_a_turn_that_wrote_no_question_and_saw_no_failure_is_h3():
    """hermes merged its question into an unanswered one already written: the flush skips that message."""
    merged = [("t1", FrontendTurnSubmitted(agent="a1", text="q")), ("t1", AppendOk(session=S, ids=[3])),
              ("t1", TurnPersisted(session=S, caller_session=S, turn=1, role="assistant", row=3))]
    assert races_of(report(merged, ("completed_turn_persists_user_message", (0, 2)))) == ("H3",)
    asked = merged[:1] + [("t1", TurnPersisted(session=S, caller_session=S, turn=1, role="user", row=2))] + merged[1:]
    assert races_of(report(asked, ("completed_turn_persists_user_message", (0, 3)))) == ()


def test_a_dead_holder_is_r24_only_if_the_process_died_holding_the_lease():
    died_holding = [("t1", LeaseAcquired(session=S, holder=H1)), ("fault", ProcessCrashed(process="p1", pid=1))]
    died_after = [("t1", LeaseAcquired(session=S, holder=H1)), ("t1", LeaseReleased(session=S, holder=H1, held=True)),
                  ("fault", ProcessCrashed(process="p1", pid=1))]
    assert races_of(report(died_holding, ("dead_holder_reclaimable", (1,)))) == ("R24",)
    assert races_of(report(died_after, ("dead_holder_reclaimable", (2,)))) == ()


def overflow_recovered_by(reason: str, task: str = "turn") -> list[tuple[str, Any]]:
    return [("turn", TurnContextOverflow(session=S, tokens=900)),
            (task, CompactionFinished(session=S, attempt=A1, status="unchanged", reason=reason)),
            ("gateway", SessionAutoReset(from_session=S, to_session=SessionId("s2"), reason="compression_exhausted"))]


def test_a_false_reset_is_r23_only_if_the_overflow_recovery_was_a_transient_no_op():
    for transient in ("cooldown", "summary_failed", "lock_contended"):
        assert races_of(report(overflow_recovered_by(transient), ("no_false_auto_reset", (2,)))) == ("R23",)
    assert races_of(report(overflow_recovered_by("no_progress"), ("no_false_auto_reset", (2,)))) == ()
    assert races_of(report(overflow_recovered_by("cooldown", task="other"), ("no_false_auto_reset", (2,)))) == ()


def test_a_rotation_whose_child_no_append_reached_before_a_crash_is_r20():
    """0.16.0-0.18.2 write the handoff at the next flush: a crash before it leaves the live child empty."""
    published = [("t1", CommitPublished(parent=S, child=SessionId("c1"), attempt=A1))]
    crashed = published + [("fault", ProcessCrashed(process="p1", pid=1))]
    flushed = published + [("t1", AppendOk(session=SessionId("c1"), ids=[5])), ("fault", ProcessCrashed(process="p1", pid=1))]
    assert races_of(report(crashed, ("commit_keeps_a_user_turn", (0,)))) == ("R20",)
    assert races_of(report(flushed, ("commit_keeps_a_user_turn", (0,)))) == ()
    assert races_of(report(published, ("commit_keeps_a_user_turn", (0,)))) == ()


def test_a_run_that_held_or_broke_no_race_invariant_shows_no_race():
    assert races_of(report([])) == ()
    assert races_of(report([("t1", AppendOk(session=S, ids=[1]))], ("run_completes", ()))) == ()


CLASSIFY = """
import dataclasses, json, sys
from pathlib import Path
from sim.scenario import targeting, targets
from sim.scenario.names import registry
from sim.scenario.scenario_error import ScenarioError
from sim.scenario.loader import load_scenario
from sim.scenario.runner import run_once
from targets.hermes.races import races_of
targets.enter_loaded()
found = {}
for path in sorted(Path("scenarios/hermes").glob("*.toml")):
    scenario = dataclasses.replace(load_scenario(path, registry()), target=targets.loaded())
    try:
        targeting.check(scenario)
    except ScenarioError:
        continue
    with targets.batch(scenario):
        run = run_once(scenario, 0)
    found[path.stem] = [scenario.race, run.failed, list(races_of(run))]
print(json.dumps(found))
"""


@pytest.mark.parametrize("version", ["0.16.0", "0.19.0"])
def test_each_scripted_race_that_fails_on_a_release_is_classified_as_its_race(version):
    try:
        release(version).require()
    except ReleaseMissing as missing:
        pytest.skip(str(missing))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COMPACTION_SIM_TARGET": f"hermes=={version}"}
    done = subprocess.run([sys.executable, "-P", "-c", CLASSIFY], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    failing = {name: (race, races) for name, (race, failed, races) in found.items() if failed}
    assert failing and all(race in races for race, races in failing.values()), failing
    assert all(races == [] for _, failed, races in found.values() if not failed)


def test_only_a_duplicate_written_by_the_rotating_turn_is_r10():
    rotation = [("t1", CompactionInput(session=S, attempt=A1, rows=[1])),
                ("t1", CommitPublished(parent=S, child=SessionId("c1"), attempt=A1)),
                ("t1", AppendOk(session=SessionId("c1"), ids=[5]))]
    assert races_of(report(rotation, ("no_duplicate_persisted_turn", (2,)))) == ("R10",)
    assert races_of(report(rotation, ("told_messages_kept_once_in_order", (2,)))) == ()  # a loss, not a duplicate
    other_task = rotation[:2] + [("t2", AppendOk(session=SessionId("c1"), ids=[5]))]
    assert races_of(report(other_task, ("no_duplicate_persisted_turn", (2,)))) == ()


def test_a_duplicate_the_compacting_turn_flushed_into_its_session_while_the_attempt_ran_is_r10_even_if_it_failed():
    """0.19.0 flushes a resumed history into the parent before it rotates; a rotation whose child cannot be made
    reopens that parent, duplicates and all."""
    failed = [("t1", CompactionInput(session=S, attempt=A1, rows=[1])), ("t1", AppendOk(session=S, ids=[5])),
              ("t1", CompactionFinished(session=S, attempt=A1, status="unchanged", reason=""))]
    assert races_of(report(failed, ("no_duplicate_persisted_turn", (1,)))) == ("R10",)
    after = failed[:1] + failed[2:] + failed[1:2]
    assert races_of(report(after, ("no_duplicate_persisted_turn", (2,)))) == ()
