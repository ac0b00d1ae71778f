"""The pytest plugin: scenario files are test items, under xdist too, and a failure says how to replay it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from support import checkout_env

from sim.mutation.mutants import OVERLAY_ENV, load_mutants, overlay

ROOT = Path(__file__).resolve().parent.parent
R1 = ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml"


def pytest_run(*args: str, cwd: Path, env: dict[str, str] | None = None, safe_path: bool = False) -> subprocess.CompletedProcess[str]:
    """pytest in a subprocess, with this checkout on the path (after anything `env` puts first)."""
    python = [sys.executable, "-P"] if safe_path else [sys.executable]
    return subprocess.run([*python, "-m", "pytest", "-p", "no:cacheprovider", *args], capture_output=True, text=True,
                          cwd=cwd, env=checkout_env(env))


def scenario_copy(tmp_path: Path, *, opt_in: bool = True) -> Path:
    """A project with one scenario in scenarios/, which its pytest.ini asks the plugin to collect."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    shutil.copy(R1, folder / R1.name)
    if opt_in:
        (tmp_path / "pytest.ini").write_text("[pytest]\nsim_scenarios = scenarios\n", encoding="utf-8")
    return folder


def test_scenario_files_are_collected_only_where_the_project_asks_or_the_command_line_names_them(tmp_path):
    folder = scenario_copy(tmp_path, opt_in=False)
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    unasked = pytest_run(str(tmp_path), "--collect-only", "-q", cwd=tmp_path)
    assert "no tests collected" in unasked.stdout, unasked.stdout  # an unrelated project's scenarios/*.toml
    named = pytest_run(str(folder / R1.name), "--collect-only", "-q", cwd=tmp_path)
    assert f"scenarios/{R1.name}::{R1.stem}" in named.stdout, named.stdout


def test_scenario_files_are_items_and_pass_under_xdist(tmp_path):
    folder = scenario_copy(tmp_path)
    done = pytest_run(str(folder), "-n", "2", "--sim-runs", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_failing_scenario_shows_the_violation_and_the_replay_command(tmp_path):
    folder = scenario_copy(tmp_path)
    with overlay(load_mutants()["hard-cancel-through-fence"]) as mutated:
        env = {OVERLAY_ENV: str(mutated), "PYTHONPATH": str(mutated)}  # this checkout comes right after the overlay
        done = pytest_run(str(folder), "--sim-runs", "3", "--sim-seed", "5", cwd=tmp_path, env=env, safe_path=True)
    assert done.returncode == 1
    assert "hard_cancel_frees_lease" in done.stdout
    assert "python -m sim replay" in done.stdout and "seed5" in done.stdout
