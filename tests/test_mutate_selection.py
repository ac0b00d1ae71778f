"""Which scenarios `mutate` runs a curated mutant against (sim/mutation/kill_matrix.py): with a coverage map, its claimers that
execute its lines, then the others that do until the first kill; a mutant no scenario reaches is a gap."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import run_cli

from sim.mutation import kill_matrix
from sim.mutation.coverage_map import CoverageMap, ScenarioLines, scenario_hash
from sim.mutation.kill_matrix import MutantResult, claim_problems, full_plan, run_mutant, selected_plan
from sim.mutation.mutants import Mutant, load_mutants

ROOT = Path(__file__).resolve().parent.parent
MUTANT = load_mutants()["hard-cancel-through-fence"]
R1 = ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml"
OTHER = ROOT / "scenarios" / "turn_right_after_restart_keeps_user_message.toml"


def scenario(folder: Path, name: str, *, claims: tuple[str, ...] = ()) -> Any:
    path = folder / f"{name}.toml"
    path.write_text(f'name = "{name}"\n')
    return SimpleNamespace(name=name, path=str(path), expect=SimpleNamespace(must_fail_under=claims))


def catalogue(folder: Path, reaching: dict[str, int]) -> tuple[list[Any], CoverageMap]:
    """Scenarios a..e (a and e claim the mutant) and a map where those named in `reaching` (with their steps)
    execute the mutant's lines and the rest execute other lines of its file."""
    claimer = (MUTANT.name,)
    scenarios = [scenario(folder, name, claims=claimer if name in "ae" else ()) for name in "abcde"]
    needed = MUTANT.reach()
    elsewhere = frozenset({max(needed.lines) + 500})
    entries = {scenario_hash(s.path): ScenarioLines(s.name, {needed.file: needed.lines if s.name in reaching else elsewhere},
                                                    reaching.get(s.name, 1)) for s in scenarios}
    return scenarios, CoverageMap("code", {}, entries)


def names(scenarios: list[Any]) -> list[str]:
    return [s.name for s in scenarios]


def test_a_plan_runs_every_reaching_claimer_then_the_other_reaching_scenarios_cheapest_first(tmp_path):
    scenarios, coverage = catalogue(tmp_path, {"a": 50, "b": 40, "c": 20})
    plan = selected_plan(MUTANT, scenarios, coverage)
    assert names(plan.claimers) == ["a", "e"] and plan.unreached_claimers == ["e"]
    assert names(plan.others) == ["c", "b"] and plan.reaching == 3 and plan.first_kill
    assert names(selected_plan(MUTANT, scenarios, coverage, claims_only=True).others) == []


def test_the_full_plan_is_the_whole_matrix(tmp_path):
    scenarios, _ = catalogue(tmp_path, {})
    plan = full_plan(MUTANT.name, scenarios)
    assert names(plan.claimers) == ["a", "e"] and names(plan.others) == ["b", "c", "d"]
    assert plan.reaching is None and not plan.first_kill


def test_a_stale_mutant_is_reported_stale_and_never_run(tmp_path, monkeypatch):
    scenarios, coverage = catalogue(tmp_path, {"a": 1})
    stale = Mutant(MUTANT.fix, MUTANT.file, "text that is not there", "x", MUTANT.path)
    plan = selected_plan(stale, scenarios, coverage)
    monkeypatch.setattr(kill_matrix, "sim_json", lambda argv, **_: pytest.fail("a stale mutant was run"))
    assert run_mutant(stale, plan, tmp_path).verdict == "STALE"


class Child:
    """Stands in for `python -m sim run ... --json` over a mutant's overlay: the scenarios named in `kills` report a
    violation."""

    def __init__(self, kills: set[str]) -> None:
        self.kills = kills
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], *, folder: Path, mutant: str) -> tuple[int, dict[str, Any], str]:
        assert mutant == MUTANT.name and (folder / MUTANT.file).read_text() == MUTANT.mutated_source()
        self.calls.append(argv)
        ran = []
        for path in (arg for arg in argv if arg.endswith(".toml")):
            name = Path(path).stem
            violation = {"invariant": "hard_cancel_frees_lease"} if name in self.kills else None
            ran.append({"scenario": name, "violation": violation, "replay": f"replay {name}" if violation else None})
            if violation and kill_matrix.STOP_AT_VIOLATION in argv:
                break
        return 1 if any(v["violation"] for v in ran) else 0, {"scenarios": ran}, ""

    def scenarios_run(self) -> list[list[str]]:
        return [[Path(arg).stem for arg in argv if arg.endswith(".toml")] for argv in self.calls]


def test_once_a_claimer_kills_no_other_scenario_runs(tmp_path, monkeypatch):
    scenarios, coverage = catalogue(tmp_path, {"a": 1, "e": 1, "b": 1})
    child = Child({"a", "e", "b"})
    monkeypatch.setattr(kill_matrix, "sim_json", child)
    result = run_mutant(MUTANT, selected_plan(MUTANT, scenarios, coverage), tmp_path)
    assert child.scenarios_run() == [["a", "e"]] and kill_matrix.STOP_AT_VIOLATION not in child.calls[0]
    assert result.verdict == "killed" and result.invariants == {"a": "hard_cancel_frees_lease", "e": "hard_cancel_frees_lease"}


def test_when_the_claimers_miss_the_others_run_until_the_first_violation(tmp_path, monkeypatch):
    scenarios, coverage = catalogue(tmp_path, {"a": 1, "b": 3, "c": 2, "d": 4})
    child = Child({"b", "d"})
    monkeypatch.setattr(kill_matrix, "sim_json", child)
    result = run_mutant(MUTANT, selected_plan(MUTANT, scenarios, coverage), tmp_path)
    assert child.scenarios_run() == [["a"], ["c", "b", "d"]] and kill_matrix.STOP_AT_VIOLATION in child.calls[1]
    assert list(result.killed_by) == ["b"] and result.survived == ["a", "c"]
    assert result.verdict == "MISSED"
    assert result.problem() == "expected killers did not kill: a, e (never executes its lines)"


def test_the_full_matrix_runs_every_scenario(tmp_path, monkeypatch):
    scenarios, _ = catalogue(tmp_path, {})
    child = Child({"a", "e", "b"})
    monkeypatch.setattr(kill_matrix, "sim_json", child)
    result = run_mutant(MUTANT, full_plan(MUTANT.name, scenarios), tmp_path)
    assert child.scenarios_run() == [["a", "e"], ["b", "c", "d"]] and not any(kill_matrix.STOP_AT_VIOLATION in c for c in child.calls)
    assert sorted(result.killed_by) == ["a", "b", "e"] and result.verdict == "killed" and result.reaching is None


def test_a_mutant_no_scenario_reaches_is_a_gap_not_a_survivor(tmp_path, monkeypatch):
    scenarios, coverage = catalogue(tmp_path, {})
    monkeypatch.setattr(kill_matrix, "sim_json", lambda argv, **_: pytest.fail("an unreached mutant was run"))
    result = run_mutant(MUTANT, selected_plan(MUTANT, scenarios, coverage), tmp_path)
    assert result.verdict == "UNREACHED" and result.unreached
    assert result.problem() == "a gap: no scenario executes the lines it edits"
    assert kill_matrix.result_json(result)["unreached"] is True
    assert claim_problems([result]) == {
        name: [f"must_fail_under: mutant {MUTANT.name} never executes in it (the scenario's runs do not execute the lines it edits)"]
        for name in ("a", "e")}


def test_a_survivor_of_the_whole_matrix_is_still_a_survivor():
    survivor = MutantResult("m", [], survived=["a"], reaching=None)
    assert survivor.verdict == "SURVIVED" and survivor.problem() == "survived every scenario" and not survivor.unreached


def test_run_stops_at_the_first_scenario_that_reports_a_violation(tmp_path):
    done = run_cli("run", str(R1), str(OTHER), "--runs", "1", "--no-shrink", "--force-fail", "--json", "--stop-at-violation",
                   cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert [verdict["scenario"] for verdict in json.loads(done.stdout)["scenarios"]] == [R1.stem]


def test_mutate_stops_at_the_claimers_kill_and_full_runs_the_whole_matrix(tmp_path):
    arguments = ("mutate", "--mutant", MUTANT.name, "--scenarios", str(R1), str(OTHER), "--jobs", "1", "--json")
    selected = json.loads(run_cli(*arguments, cwd=tmp_path).stdout)
    assert selected["passed"] and not selected["full"] and selected["coverage_map"]["traced"] == 2
    [mutant] = selected["mutants"]
    assert list(mutant["killed_by"]) == [R1.stem] and mutant["survived_in"] == [] and mutant["reaching"] >= 1
    assert mutant["invariants"] == {R1.stem: "hard_cancel_frees_lease"}

    full = json.loads(run_cli(*arguments, "--full", cwd=tmp_path).stdout)
    [mutant] = full["mutants"]
    assert full["full"] and full["coverage_map"] is None and mutant["reaching"] is None
    assert sorted([*mutant["killed_by"], *mutant["survived_in"]]) == sorted([R1.stem, OTHER.stem])


def test_full_is_for_the_matrix_not_for_a_revert_check(tmp_path):
    done = run_cli("mutate", "--full", "--revert", "HEAD", "--", "tests/x.py", cwd=tmp_path)
    assert done.returncode == 2 and "--full: only for the curated matrix and --operators" in done.stderr
