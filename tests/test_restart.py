"""A restarted process is announced only once its agents are open, and a turn around a restart keeps its user
message (a false violation on the unmodified reference, now a scripted regression in scenarios/)."""

from __future__ import annotations

from pathlib import Path

from sim.scenario.loader import load_scenario
from sim.scenario.names import registry
from sim.scenario.runner import check, run_once

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "scenarios" / "turn_right_after_restart_keeps_user_message.toml"


def test_a_turn_driven_on_process_restarted_keeps_its_user_message():
    scenario = load_scenario(REGRESSION, registry())
    verdict = check(scenario, runs=50, seed=0)
    assert verdict.passed, verdict.problems()
    assert verdict.runs == 50


def test_a_turn_racing_the_restart_either_dies_with_the_old_process_or_runs_on_the_new_one(tmp_path):
    path = tmp_path / "racing.toml"
    text = REGRESSION.read_text(encoding="utf-8")
    path.write_text(text.replace('after_event = "process.restarted"', 'at = "0s"')
                    .replace('name = "turn_right_after_restart_keeps_user_message"', 'name = "racing"'))
    verdict = check(load_scenario(path, registry()), runs=200, seed=0, stop_at_first=False)
    assert verdict.violating_runs == 0, verdict.problems()
    assert "turn.persisted" in verdict.coverage


ONE_AGENT = '''
name = "restarts"
[world]
sessions = [{ id = "s1", messages = 4 }]
agents = [{ name = "a1", process = "p1", session = "s1", frontend = "cli" }]
[explore]
runs = 1
'''


def event_kinds(tmp_path: Path, drives_and_faults: str) -> list[str]:
    """The event kinds of one run of a one-agent world with these drives and faults."""
    path = tmp_path / "restarts.toml"
    path.write_text(ONE_AGENT + drives_and_faults, encoding="utf-8")
    return [record.kind for record in run_once(load_scenario(path, registry()), 0).result.history]


def test_a_crash_of_a_dead_process_neither_fires_nor_restarts_it_twice(tmp_path):
    """The second crash lands while the first one's restart is pending: a dead process cannot die again, so only
    one incarnation comes back (two would run the same agents beside each other)."""
    kinds = event_kinds(tmp_path, '''
[[drive]]
at = "30s"
agent = "a1"
turn = "after the restart"
[[fault]]
kind = "crash"
at = "1s"
process = "p1"
restart_after = "10s"
[[fault]]
kind = "crash"
at = "5s"
process = "p1"
restart_after = "20s"
''')
    assert kinds.count("process.crashed") == 1
    assert kinds.count("process.restarted") == 1


def test_a_crash_restart_skips_a_process_the_user_restarted_meanwhile(tmp_path):
    """A user's restart brings the crashed process back before the crash's own restart is due: that one then
    finds it running and starts no second incarnation."""
    kinds = event_kinds(tmp_path, '''
[[drive]]
at = "5s"
agent = "a1"
command = "restart"
[[fault]]
kind = "crash"
at = "1s"
process = "p1"
restart_after = "20s"
''')
    assert kinds.count("process.restarted") == 1
