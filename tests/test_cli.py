"""The command line as a user meets it: verdicts, exit codes, repro files, replays, bad input."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import checkout_env, run_cli

ROOT = Path(__file__).resolve().parent.parent
R1 = ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml"
R1_MUTANT = "hard-cancel-through-fence"


def sim(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


@pytest.fixture
def scenario_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    shutil.copy(R1, folder / R1.name)
    return folder


def test_run_prints_a_verdict_table_and_exits_0_when_all_hold(scenario_dir, tmp_path):
    done = sim("run", str(scenario_dir), "--runs", "5", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    header, rule, row = done.stdout.splitlines()[:3]
    assert header.split() == ["scenario", "runs", "steps", "invariants", "violations", "time", "verdict"]
    assert row.split()[0] == "ctrl_c_during_summary_blocks_next_turn" and row.split()[-1] == "pass"
    assert done.stdout.splitlines()[-1] == "1 passed, 0 failed"


def test_run_json_is_one_document_on_stdout(scenario_dir, tmp_path):
    done = sim("run", str(scenario_dir), "--runs", "3", "--json", cwd=tmp_path)
    document = json.loads(done.stdout)
    assert document["passed"] is True
    assert document["scenarios"][0]["runs"] == 3
    assert document["scenarios"][0]["faults_fired"] == [3, 3]


def test_a_scenario_whose_fault_never_fires_fails_as_vacuous(scenario_dir, tmp_path):
    text = (scenario_dir / R1.name).read_text()
    (scenario_dir / R1.name).write_text(text.replace('point = "provider.summary"', 'point = "db.publish_child"'))
    done = sim("run", str(scenario_dir), "--runs", "3", cwd=tmp_path)
    assert done.returncode == 1
    assert "fault[0] (stall) never fired in 3 runs" in done.stdout


def test_bad_scenario_file_is_exit_2_naming_file_and_key(scenario_dir, tmp_path):
    (scenario_dir / "broken.toml").write_text('name = "broken"\n[explore]\nruns = "many"\n')
    done = sim("run", str(scenario_dir), cwd=tmp_path)
    assert done.returncode == 2
    assert "broken.toml: explore.runs: expected an integer" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_mutant_is_caught_with_a_repro_that_replays_byte_for_byte(scenario_dir, tmp_path):
    out = tmp_path / "repros"
    done = sim("run", str(scenario_dir), "--runs", "5", "--mutant", R1_MUTANT, "--out", str(out), cwd=tmp_path)
    assert done.returncode == 1
    assert "FAIL ctrl_c_during_summary_blocks_next_turn: hard_cancel_frees_lease" in done.stdout
    repro = next(path for path in out.glob("*.repro.json") if "_shrunk" not in path.name)
    assert f"python -m sim replay {repro}" in done.stdout
    again = sim("replay", str(repro), "--mutant", R1_MUTANT, cwd=tmp_path)
    assert again.returncode == 1
    assert "identical to the recording" in again.stdout
    assert "hard_cancel_frees_lease" in again.stdout
    recorded = sim("replay", str(repro), cwd=tmp_path)
    assert recorded.returncode == 1, recorded.stderr
    assert "identical to the recording" in recorded.stdout
    assert f"under mutant {R1_MUTANT}, as the repro records" in recorded.stderr
    other = sim("replay", str(repro), "--mutant", "publish-atomic", cwd=tmp_path)
    assert other.returncode == 2
    assert f"recorded under mutant {R1_MUTANT}, replayed under mutant publish-atomic" in other.stderr


def test_replay_a_seed_of_a_scenario(tmp_path):
    done = sim("replay", str(R1), "--seed", "3", cwd=tmp_path)
    assert done.returncode == 0
    assert "all invariants hold" in done.stdout
    assert "fence.cancel_won" in done.stdout


@pytest.mark.parametrize("bad", [["replay", "missing.repro.json"], ["run", "nowhere/"], ["run", str(R1), "--mutant", "no-such-fix"]])
def test_bad_input_is_exit_2_with_one_line(bad, tmp_path):
    (tmp_path / "not-json.repro.json").write_text("{")
    done = sim(*bad, cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.strip()


def test_a_repro_file_missing_its_decisions_is_exit_2(tmp_path):
    repro = tmp_path / "x.repro.json"
    repro.write_text(json.dumps({"scenario": str(R1), "seed": 0}))
    done = sim("replay", str(repro), cwd=tmp_path)
    assert done.returncode == 2
    assert "decisions: expected list" in done.stderr


@pytest.mark.parametrize("what", ["scenarios", "faults", "invariants"])
def test_list(what):
    done = sim("list", what, cwd=ROOT)
    assert done.returncode == 0 and len(done.stdout.splitlines()) >= 1


def test_check_determinism_compares_two_processes(scenario_dir, tmp_path):
    done = sim("check-determinism", str(scenario_dir), "--seeds", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("3 runs in two processes: 0 differences")


def test_bench_scenarios_reports_rates(scenario_dir, tmp_path):
    done = sim("bench", "scenarios", str(scenario_dir), "--runs", "3", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert report["median_runs_per_s"] > 0 and report["virtual_s_per_wall_s"] > 0
    assert report["median_run_cost_raw_steps"] > 0 and set(report["run_cost_raw_steps"]) == set(report["runs_per_s"])


def test_help_lists_only_the_commands_a_user_runs(tmp_path):
    shown = sim("--help", cwd=tmp_path).stdout
    commands = {line.split()[0] for line in shown.split("commands:")[1].splitlines() if line.startswith("    ") and not line.startswith("     ")}
    assert commands == {"run", "replay", "shrink", "explore", "mutate", "list", "check-determinism", "bench", "stress", "swarm",
                        "merge", "releases"}
    assert "SUPPRESS" not in shown
    wrong = sim("lst", cwd=tmp_path)
    assert wrong.returncode == 2
    assert "invalid choice: 'lst'" in wrong.stderr and "digests" not in wrong.stderr and "'detect'" not in wrong.stderr


def test_explore_counts_shards_from_1(tmp_path):
    done = sim("explore", str(R1), "--runs", "2", "--shard", "2/2", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["shard"] == "2/2" and document["first_seed"] == 1 and document["seed_step"] == 2


@pytest.mark.parametrize("whole_group", [False, True], ids=["parent", "process-group"])
def test_sigterm_to_mutate_leaves_no_overlay_behind(tmp_path, whole_group):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = checkout_env({"TMPDIR": str(temp)})
    mutate = subprocess.Popen(
        [sys.executable, "-m", "sim", "mutate", "--mutant", R1_MUTANT, "--scenarios", str(R1), "--jobs", "1", "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env, start_new_session=True,
    )
    assert mutate.stderr is not None
    for line in mutate.stderr:
        if "sanity pass: ok" in line:
            break
    deadline = time.monotonic() + 120
    while not list(temp.glob("mutant-*")):  # a real process: wait for its overlay folder to exist
        assert time.monotonic() < deadline and mutate.poll() is None, "no overlay appeared"
        time.sleep(0.02)
    if whole_group:
        os.killpg(mutate.pid, signal.SIGTERM)
    else:
        mutate.send_signal(signal.SIGTERM)
    mutate.communicate(timeout=120)
    assert mutate.returncode == 130  # interrupted (sim.core.stopping), SIGTERM as Ctrl+C
    assert not list(temp.glob("mutant-*")), "an overlay folder was left behind"
