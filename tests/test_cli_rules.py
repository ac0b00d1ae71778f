"""Passes that prove nothing are refused: empty or driverless scenarios, zero runs or seeds, a missing mutant
catalogue, and must_fail_under claims, which `run --must-fail-under` and the pytest plugin check on demand."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from support import checkout_env

from sim.mutation.mutants import load_mutants

ROOT = Path(__file__).resolve().parent.parent
R1 = ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml"
R1_MUTANT = "hard-cancel-through-fence"
NOT_R1S_MUTANT = "publish-atomic"  # reverts a rotation fix; R1's in-place compaction never meets it


def sim(*args: str, cwd: Path, python: Sequence[str] = (sys.executable,), path: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """`python -m sim ARGS` from `cwd`, importing `sim` from the checkout at `path` (first on PYTHONPATH)."""
    return subprocess.run([*python, "-m", "sim", *args], capture_output=True, text=True, cwd=cwd,
                          env=checkout_env({"PYTHONPATH": str(path)}))


@pytest.mark.parametrize("text", ["", 'name = "quiet"\n[world]\nsessions = [{ id = "s1", messages = 4 }]\n'])
def test_an_empty_or_driverless_scenario_is_bad_input(tmp_path, text):
    (tmp_path / "quiet.toml").write_text(text)
    done = sim("run", "quiet.toml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert "quiet.toml: drive: expected at least one [[drive]]" in done.stderr
    assert "passed" not in done.stdout


@pytest.mark.parametrize("arguments", [
    ["run", str(R1), "--runs", "0"],
    ["run", str(R1), "--runs", "-3"],
    ["run", str(R1), "--seed", "-1"],
    ["check-determinism", str(R1), "--seeds", "0"],
    ["explore", str(R1), "--runs", "0"],
    ["bench", "detection", str(R1), "--seeds", "0"],
    ["bench", "scenarios", str(R1), "--runs", "0"],
])
def test_zero_or_negative_runs_and_seeds_are_usage_errors(tmp_path, arguments):
    done = sim(*arguments, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "expected a positive integer" in done.stderr or "expected an integer of at least 0" in done.stderr
    assert done.stdout == ""


@pytest.fixture
def checkout_without_mutants(tmp_path: Path) -> Path:
    """A copy of the packages and the catalogue, but no mutants/: what a wheel without them would be."""
    copy = tmp_path / "copy"
    for folder in ("sim", "reference", "faults", "scenarios"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.parametrize("arguments", [
    ["mutate"],
    ["bench", "detection"],
    ["run", str(R1), "--mutant", R1_MUTANT],
    ["run", str(R1), "--must-fail-under"],
])
def test_a_missing_mutant_catalogue_is_exit_2(checkout_without_mutants, tmp_path, arguments):
    done = sim(*arguments, cwd=tmp_path, python=(sys.executable, "-P"), path=checkout_without_mutants)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{checkout_without_mutants / 'mutants'}: no curated mutants there" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_mutant_is_refused_alike_by_every_command(tmp_path):
    messages = {sim(*arguments, cwd=tmp_path).stderr.split(": ", 1)[1]
                for arguments in (["run", str(R1), "--mutant", "nope"], ["mutate", "--mutant", "nope"])}
    assert messages == {f"no such mutant: nope ({len(load_mutants())} known: python -m sim list mutants)\n"}


def test_bench_detection_with_no_claimed_mutant_is_a_usage_error(tmp_path):
    scenario = tmp_path / "unclaimed.toml"
    scenario.write_text(R1.read_text().replace(f'must_fail_under = ["{R1_MUTANT}"]', "must_fail_under = []"))
    done = sim("bench", "detection", str(scenario), cwd=tmp_path)
    assert done.returncode == 2
    assert "nothing to detect" in done.stderr


def claiming(tmp_path: Path, *mutants: str) -> Path:
    folder = tmp_path / "scenarios"
    folder.mkdir(exist_ok=True)
    scenario = folder / R1.name
    claims = ", ".join(f'"{name}"' for name in mutants)
    (tmp_path / "pytest.ini").write_text("[pytest]\nsim_scenarios = scenarios\n", encoding="utf-8")  # collected by request
    text = R1.read_text()
    assert f'must_fail_under = ["{R1_MUTANT}"]' in text
    scenario.write_text(text.replace(f'must_fail_under = ["{R1_MUTANT}"]', f"must_fail_under = [{claims}]"))
    return scenario


def test_run_checks_must_fail_under_on_demand(tmp_path):
    scenario = claiming(tmp_path, R1_MUTANT, NOT_R1S_MUTANT)
    plain = sim("run", str(scenario), "--runs", "3", cwd=tmp_path)
    assert plain.returncode == 0, "without the flag the claims are not run"
    done = sim("run", str(scenario), "--runs", "3", "--must-fail-under", "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    verdict = json.loads(done.stdout)["scenarios"][0]
    assert verdict["problems"] == [f"must_fail_under: mutant {NOT_R1S_MUTANT} did not make it fail"]
    assert verdict["passed"] is False


def test_a_claim_failed_only_by_an_unreached_mark_says_so_and_names_the_invariants_that_fire(tmp_path):
    """Under its mutant the scenario FAILs (a coverage mark is never reached), yet the invariant it names holds: the
    claim does not hold, and the message says why instead of that the mutant "did not make it fail"."""
    source = ROOT / "scenarios" / "failed_lease_release_retried_at_worker_exit.toml"
    scenario = tmp_path / source.name
    scenario.write_text(source.read_text().replace('invariants = "all"', 'invariants = ["no_commit_after_cancel"]'))
    done = sim("run", str(scenario), "--must-fail-under", "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    (problem,) = json.loads(done.stdout)["scenarios"][0]["problems"]
    assert problem.startswith("must_fail_under: mutant failed-release-retried made it fail only by what it did not "
                              "reach (coverage mark compaction.committed never reached)"), problem
    assert problem.endswith('with invariants = "all" it reports failed_release_retried: name it there (or "all")')


def test_run_must_fail_under_passes_when_every_claim_holds(tmp_path):
    done = sim("run", str(claiming(tmp_path, R1_MUTANT)), "--runs", "3", "--must-fail-under", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "1 passed, 0 failed"


def test_the_pytest_plugin_checks_must_fail_under_on_demand(tmp_path):
    claiming(tmp_path, NOT_R1S_MUTANT)
    env = checkout_env()
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "scenarios", "--sim-runs", "3"]
    plain = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert plain.returncode == 0, plain.stdout
    checked = subprocess.run([*command, "--sim-must-fail-under"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert checked.returncode == 1
    assert f"must_fail_under: mutant {NOT_R1S_MUTANT} did not make it fail" in checked.stdout
