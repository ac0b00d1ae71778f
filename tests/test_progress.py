"""Long work is not silent: one progress line on stderr per finished unit, also when stderr is not a terminal
(these tests read it through a pipe), and none under --json unless --progress asks for it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from support import run_cli

ROOT = Path(__file__).resolve().parent.parent
R1 = ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml"
R1_MUTANT = "hard-cancel-through-fence"
OTHER = ROOT / "scenarios" / "turn_right_after_restart_keeps_user_message.toml"


def sim(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


def lines_of(stderr: str, command: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"python -m sim {command}")]


def test_run_prints_a_line_per_scenario_through_a_pipe(tmp_path):
    done = sim("run", str(R1), str(OTHER), "--runs", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = lines_of(done.stderr, "run")
    assert [re.sub(r", [0-9.]+s$", "", line) for line in lines] == [
        "python -m sim run: [1/2] ctrl_c_during_summary_blocks_next_turn: pass, 3 runs",
        "python -m sim run: [2/2] turn_right_after_restart_keeps_user_message: pass, 3 runs",
    ]


def test_json_is_quiet_unless_progress_is_asked_for(tmp_path):
    quiet = sim("run", str(R1), "--runs", "2", "--json", cwd=tmp_path)
    assert quiet.stderr == "" and json.loads(quiet.stdout)["passed"]
    asked = sim("run", str(R1), "--runs", "2", "--json", "--progress", cwd=tmp_path)
    assert len(lines_of(asked.stderr, "run")) == 1 and json.loads(asked.stdout)["passed"]


def test_mutate_says_what_it_does_and_reports_each_mutant(tmp_path):
    done = sim("mutate", "--mutant", R1_MUTANT, "--scenarios", str(R1), "--jobs", "1", "--out", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = lines_of(done.stderr, "mutate")
    assert lines[0].endswith("must be reported as failing") and "sanity pass: ok" in lines[1]
    assert re.fullmatch(r"python -m sim mutate: coverage map: built out/coverage-map.json: traced 1 scenario in [0-9.]+s", lines[3])
    assert re.fullmatch(rf"python -m sim mutate: \[1/1\] {R1_MUTANT}: killed, [0-9.]+s, ran 1 of the 1 scenarios that reach it", lines[5])
    again = lines_of(sim("mutate", "--mutant", R1_MUTANT, "--scenarios", str(R1), "--jobs", "1", "--out", str(tmp_path), cwd=tmp_path).stderr, "mutate")
    assert again[3] == "python -m sim mutate: coverage map: reused out/coverage-map.json (1 scenario traced before)"
    assert re.search(r"^1 mutant in [0-9.]+s .*: 1 killed as expected, 0 not$", done.stdout, re.M), done.stdout


def test_bench_detection_reports_each_mutant_and_each_coverage_pass(tmp_path):
    done = sim("bench", "detection", str(R1), "--seeds", "1", "--max-runs", "5", "--runs", "1", "--jobs", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = lines_of(done.stderr, "bench")
    assert lines[0] == f"python -m sim bench: [1/4] {R1_MUTANT}: 1 killer scenario measured"
    assert [line.split("]")[0][-3:] for line in lines[1:]] == ["2/4", "3/4", "4/4"]


def test_check_determinism_reports_each_scenario_of_each_process(tmp_path):
    done = sim("check-determinism", str(R1), str(OTHER), "--seeds", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = lines_of(done.stderr, "check-determinism")
    assert len(lines) == 4
    assert lines[0] == "python -m sim check-determinism (PYTHONHASHSEED=1): [1/2] ctrl_c_during_summary_blocks_next_turn: 2 seeds"
    assert lines[3].startswith("python -m sim check-determinism (PYTHONHASHSEED=2): [2/2]")


def test_explore_reports_its_runs_every_few_seconds(tmp_path):
    done = sim("explore", str(R1), "--time-budget", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = lines_of(done.stderr, "explore")
    assert lines and all(re.fullmatch(r"python -m sim explore: \d+ runs, latest seed \d+", line) for line in lines)


def test_shrink_reports_each_pass(tmp_path):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    shutil.copy(R1, scenarios)
    found = sim("run", str(scenarios), "--runs", "5", "--mutant", R1_MUTANT, "--no-shrink", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert found.returncode == 1
    repro = next((tmp_path / "out").glob("*.repro.json"))
    done = sim("shrink", str(repro), "--time-limit", "10", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert lines_of(done.stderr, "shrink")[0] == f"python -m sim shrink: under mutant {R1_MUTANT}, as the repro records"
    lines = [line for line in lines_of(done.stderr, "shrink") if "] " in line]
    assert lines[0].startswith("python -m sim shrink: [1] drop plan entries: ")
    assert all(re.search(r"\d+ faults, \d+ drives, \d+ decisions, \d+ steps$", line) for line in lines)


def test_bench_scenarios_reports_each_scenario(tmp_path):
    done = sim("bench", "scenarios", str(R1), str(OTHER), "--runs", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = lines_of(done.stderr, "bench")
    assert [line.split(": ", 1)[1].split(":")[0] for line in lines] == [
        "[1/2] ctrl_c_during_summary_blocks_next_turn", "[2/2] turn_right_after_restart_keeps_user_message"]


def test_a_throttled_line_comes_once_per_interval_of_its_clock(capsys):
    from sim.cli.progress import Throttled

    now = [0.0]
    lines = Throttled("python -m sim explore", enabled=True, every_s=2.0, clock=lambda: now[0])
    for moment in (0.5, 1.9, 2.0, 3.0, 4.5):
        now[0] = moment
        lines.done(f"at {moment}")
    assert capsys.readouterr().err.splitlines() == ["python -m sim explore: at 2.0", "python -m sim explore: at 4.5"]
    assert lines.count == 5


def test_a_swarm_in_worker_processes_under_a_time_budget_is_not_silent(tmp_path):
    """Its runs spend the workers' CPU, not this process's: the lines are timed by a clock that moves meanwhile."""
    done = sim("swarm", "--time-budget", "3", "-j", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = lines_of(done.stderr, "swarm")
    assert any(re.fullmatch(r"python -m sim swarm: run \d+ \(\w+, [\w-]+\): ok, \d+ steps, \d+s virtual", line) for line in lines), done.stderr
