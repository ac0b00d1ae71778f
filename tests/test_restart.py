"""A restarted process is announced only once its agents are open, and a turn around a restart keeps its user
message (a false violation on the unmodified reference, now a scripted regression in scenarios/)."""

from __future__ import annotations

from pathlib import Path

from sim.registry import registry
from sim.scenario.loader import load_scenario
from sim.scenario.runner import check

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
    path.write_text(text.replace('after_event = "process.restarted"', 'at = "0s"').replace('name = "turn_right_after_restart_keeps_user_message"', 'name = "racing"'))
    verdict = check(load_scenario(path, registry()), runs=200, seed=0, stop_at_first=False)
    assert verdict.violating_runs == 0, verdict.problems()
    assert "turn.persisted" in verdict.coverage
