"""`python -m sim swarm` and `merge` as CI meets them: exit codes, the results file, shards folded into one verdict."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from support import checkout_env, run_cli

from sim.mutation.mutants import load_mutants, overlay

ROOT = Path(__file__).resolve().parent.parent
SINGLE = ROOT / "scenarios" / "swarm" / "single_agent.toml"
CAUGHT = ("--mutant", "expired-or-dead-reclaim")  # a curated mutant the single-agent workload catches within a few runs
QUIET = """\
name = "quiet_turns"
[swarm]
active = "1m"
[swarm.actions]
turn = { per_minute = 1.0, probability = 1.0 }
"""


def sim(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


def test_a_campaign_that_holds_exits_0_with_one_progress_line_per_run(tmp_path):
    (tmp_path / "quiet.toml").write_text(QUIET)
    done = sim("swarm", "quiet.toml", "--runs", "3", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("pass")
    assert [line for line in done.stderr.splitlines() if "] run " in line][-1].startswith("python -m sim swarm: [3/3] run 2")
    results = json.loads((tmp_path / "out" / "swarm-seed0-shard1of1.json").read_text())
    assert results["runs"] == 3 and results["passed"] and results["failures"] == []
    assert all(run["steps"] > 0 and run["events"] > 0 and run["virtual_s"] > 0 for run in results["per_run"])
    assert "frontend.turn_submitted" in results["coverage"]


def test_a_failing_campaign_exits_1_with_each_failure_class_exported_and_replayable(tmp_path):
    done = sim("swarm", str(SINGLE), "--runs", "12", *CAUGHT, "--json", "--out", "out", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    results = json.loads(done.stdout)
    assert results["failures"] and not results["passed"]
    failure = results["failures"][0]
    assert {"invariant", "witnesses", "runs", "first_run", "scenario", "repro", "replay"} <= set(failure)
    python, *command = failure["replay"].split()
    assert python == "python"
    replayed = subprocess.run([sys.executable, *command], capture_output=True, text=True, cwd=tmp_path, env=checkout_env())
    assert replayed.returncode == 1 and "identical to the recording" in replayed.stdout, replayed.stderr
    assert f"python -m sim run {failure['scenario']} --mutant expired-or-dead-reclaim" in (tmp_path / failure["scenario"]).read_text()
    rerun = sim("run", failure["scenario"], *CAUGHT, "--no-shrink", "--json", cwd=tmp_path)
    assert json.loads(rerun.stdout)["scenarios"][0]["violation"]["invariant"] == failure["invariant"]


def test_shards_merge_into_the_verdict_of_one_campaign(tmp_path):
    whole = sim("swarm", str(SINGLE), "--runs", "12", *CAUGHT, "--json", "--out", "whole", cwd=tmp_path)
    for shard in ("1/2", "2/2"):
        sim("swarm", str(SINGLE), "--runs", "6", *CAUGHT, "--shard", shard, "--out", "shards", cwd=tmp_path)
    merged = sim("merge", *(f"shards/swarm-seed0-shard{i}of2.json" for i in (1, 2)), "--json", cwd=tmp_path)
    assert merged.returncode == whole.returncode == 1
    a, b = json.loads(whole.stdout), json.loads(merged.stdout)
    assert a["per_run"] == b["per_run"] and a["coverage"] == b["coverage"]
    assert [(f["invariant"], f["witnesses"], f["runs"], f["first_run"]) for f in a["failures"]] == \
           [(f["invariant"], f["witnesses"], f["runs"], f["first_run"]) for f in b["failures"]]


def test_bad_input_exits_2_naming_what_was_expected(tmp_path):
    (tmp_path / "bad.toml").write_text('[swarm]\nactive = "soon"\n')
    bad = sim("swarm", "bad.toml", cwd=tmp_path)
    assert bad.returncode == 2 and "bad.toml: swarm.active: expected a duration" in bad.stderr
    assert sim("swarm", "missing.toml", cwd=tmp_path).returncode == 2
    assert sim("swarm", str(SINGLE), "--shard", "3/2", cwd=tmp_path).returncode == 2
    (tmp_path / "junk.json").write_text("{}")
    junk = sim("merge", "junk.json", cwd=tmp_path)
    assert junk.returncode == 2 and "expected a swarm results file" in junk.stderr


def test_run_over_the_catalogue_leaves_the_swarm_folder_to_swarm(tmp_path):
    folder = tmp_path / "scenarios"
    shutil.copytree(ROOT / "scenarios" / "swarm", folder / "swarm")
    shutil.copy(ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml", folder)
    done = sim("run", str(folder), "--runs", "2", "--no-shrink", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    refused = sim("run", str(folder / "swarm" / "single_agent.toml"), cwd=tmp_path)
    assert refused.returncode == 2 and "python -m sim swarm" in refused.stderr


def pytest_run(*args: str, cwd: Path, first_on_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    """pytest on this checkout, in a project that asks for its scenarios/ to be collected; `first_on_path` (a
    mutant's overlay) shadows its `reference`."""
    (cwd / "pytest.ini").write_text("[pytest]\nsim_scenarios = scenarios\n", encoding="utf-8")
    extra = {"PYTHONPATH": str(first_on_path)} if first_on_path else None
    return subprocess.run([sys.executable, "-P", "-m", "pytest", "-p", "no:cacheprovider", *args], capture_output=True,
                          text=True, cwd=cwd, env=checkout_env(extra))


def test_the_pytest_plugin_runs_a_workload_as_batches_of_runs(tmp_path):
    folder = tmp_path / "scenarios" / "swarm"
    folder.mkdir(parents=True)
    (folder / "quiet.toml").write_text(QUIET)
    done = pytest_run(str(tmp_path / "scenarios"), "--sim-swarm-runs", "15", "-v", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "quiet.toml::runs0-9 PASSED" in done.stdout and "quiet.toml::runs10-14 PASSED" in done.stdout


def test_a_failing_batch_names_each_failure_class_with_its_scenario_and_replay(tmp_path):
    folder = tmp_path / "scenarios" / "swarm"
    folder.mkdir(parents=True)
    shutil.copy(SINGLE, folder)
    with overlay(load_mutants()[CAUGHT[1]]) as mutated:
        done = pytest_run(str(tmp_path / "scenarios"), "--sim-swarm-runs", "10", cwd=tmp_path, first_on_path=mutated)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "generated runs failed" in done.stdout and "python -m sim replay" in done.stdout
    assert (tmp_path / "out" / "swarm").is_dir()


def test_failure_classes_of_a_baseline_are_known_and_only_new_ones_fail(tmp_path):
    first = sim("swarm", str(SINGLE), "--runs", "12", *CAUGHT, "--out", "base", cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    again = sim("swarm", str(SINGLE), "--runs", "12", *CAUGHT, "--baseline", "base/swarm-seed0-shard1of1.json", "--json", "--out", "again",
                cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    results = json.loads(again.stdout)
    assert results["failures"] and all(failure["known"] for failure in results["failures"]) and results["new_failures"] == 0
    wider = sim("swarm", str(SINGLE), "--runs", "40", *CAUGHT, "--baseline", "base/swarm-seed0-shard1of1.json", "--json", "--out", "wider",
                cwd=tmp_path)
    found = json.loads(wider.stdout)
    assert wider.returncode == (1 if found["new_failures"] else 0)


def test_a_generated_scenario_is_the_same_under_any_hash_seed(tmp_path):
    program = ("import json, sys; from sim.scenario.names import registry; from sim.swarm import load_workloads; "
               "from sim.swarm.generate import scenario_document; "
               f"ws = load_workloads([{str(SINGLE.parent)!r}], registry()); "
               "print(json.dumps([scenario_document(w, 3, i) for w in ws for i in range(3)], sort_keys=True))")
    outputs = {subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path,
                              env=checkout_env({"PYTHONHASHSEED": seed}), check=True).stdout for seed in ("1", "2")}
    assert len(outputs) == 1


def test_the_pytest_plugin_leaves_workloads_alone_unless_asked(tmp_path):
    folder = tmp_path / "scenarios" / "swarm"
    folder.mkdir(parents=True)
    (folder / "quiet.toml").write_text(QUIET)
    shutil.copy(ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml", tmp_path / "scenarios")
    done = pytest_run(str(tmp_path / "scenarios"), "--sim-runs", "2", "-v", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "quiet.toml" not in done.stdout


def test_exitfirst_stops_at_the_first_failing_run(tmp_path):
    """The runs before the first failure all held, and none after it ran: the same stop under any shard size."""
    whole = sim("swarm", str(SINGLE), "--runs", "40", *CAUGHT, "--json", "--out", "all", cwd=tmp_path)
    failing = [run["run"] for run in json.loads(whole.stdout)["per_run"] if run["failure"] is not None]
    assert failing, "the mutant must be caught within 40 runs for this test to mean anything"
    done = sim("swarm", str(SINGLE), "--runs", "40", *CAUGHT, "--exitfirst", "--json", "--out", "first", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert [run["run"] for run in result["per_run"]] == list(range(failing[0] + 1))
    assert result["per_run"][-1]["failure"] is not None and not result["passed"]


def test_exitfirst_refuses_workers_and_feedback(tmp_path):
    for extra in (("-j", "2"), ("--feedback",)):
        done = sim("swarm", str(SINGLE), "--runs", "5", "--exitfirst", *extra, cwd=tmp_path)
        assert done.returncode == 2 and "--exitfirst" in done.stderr and "Traceback" not in done.stderr, done.stderr
