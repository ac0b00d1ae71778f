"""Repro files carry their mutant, a scenario path relative to the repository root and the scenario's hash:
they replay from any directory, after the repository moved, and a changed scenario is named with a diff; a
seed, invariant or decision list edited by hand is named as such."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import run_cli

ROOT = Path(__file__).resolve().parent.parent
R1 = ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml"
R1_MUTANT = "hard-cancel-through-fence"
COPY = "r1_copy.toml"


def sim(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository of one scenario (pyproject.toml marks its root), with a repro made in it under R1's mutant."""
    root = tmp_path / "project"
    (root / "scenarios").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = \"elsewhere\"\n")
    # Not a catalogue name, so only this repository holds it.
    (root / "scenarios" / COPY).write_text(R1.read_text().replace(f'name = "{R1.stem}"', 'name = "r1_copy"'))
    done = sim("run", f"scenarios/{COPY}", "--runs", "5", "--mutant", R1_MUTANT, "--no-shrink", cwd=root)
    assert done.returncode == 1, done.stdout + done.stderr
    return root


def repro_of(root: Path) -> Path:
    return next((root / "out").glob("*.repro.json"))


def test_a_repro_names_its_mutant_its_scenario_from_the_root_and_its_hash(repo):
    document = json.loads(repro_of(repo).read_text())
    assert document["mutant"] == R1_MUTANT
    assert document["scenario"] == f"scenarios/{COPY}"
    assert len(document["scenario_sha256"]) == 64
    assert document["scenario_text"] == (repo / "scenarios" / COPY).read_text()


def test_a_moved_repository_replays_from_any_directory_under_the_recorded_mutant(repo, tmp_path):
    moved = tmp_path / "moved"
    shutil.move(str(repo), moved)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = sim("replay", str(repro_of(moved)), cwd=elsewhere)
    assert done.returncode == 1, done.stderr
    assert "identical to the recording" in done.stdout
    assert f"under mutant {R1_MUTANT}, as the repro records" in done.stderr


def test_a_repro_moved_away_from_its_repository_finds_the_scenario_from_the_current_one(repo, tmp_path):
    loose = tmp_path / "loose.repro.json"
    shutil.move(str(repro_of(repo)), loose)
    done = sim("replay", str(loose), cwd=repo / "scenarios")
    assert done.returncode == 1, done.stderr
    assert "identical to the recording" in done.stdout


def test_a_scenario_changed_since_the_recording_is_refused_with_what_differs(repo):
    scenario = repo / "scenarios" / COPY
    scenario.write_text(scenario.read_text().replace('duration = "10m"', 'duration = "20m"'))
    done = sim("replay", str(repro_of(repo)), cwd=repo)
    assert done.returncode == 2
    assert f"scenario {scenario} has changed since the repro was recorded" in done.stderr
    assert '-duration = "10m"' in done.stderr and '+duration = "20m"' in done.stderr


def test_a_missing_scenario_says_where_it_was_looked_for(repo):
    (repo / "scenarios" / COPY).unlink()
    done = sim("replay", str(repro_of(repo)), cwd=repo)
    assert done.returncode == 2
    assert f"scenario scenarios/{COPY}: not found" in done.stderr


def test_replaying_under_another_mutant_says_which_differs(repo):
    done = sim("replay", str(repro_of(repo)), "--mutant", "publish-atomic", cwd=repo)
    assert done.returncode == 2
    assert f"recorded under mutant {R1_MUTANT}, replayed under mutant publish-atomic" in done.stderr


@pytest.mark.parametrize(("key", "edit", "said"), [
    ("seed", lambda document: document["seed"] + 1, "seed: {} is not the seed this run was recorded with"),
    ("invariant", lambda document: "single_live_head", "invariant: 'single_live_head' is not the invariant this run was recorded with"),
    ("decisions", lambda document: document["decisions"][:-1], "decisions: this list is not the decision list this run was recorded with"),
])
def test_a_hand_edited_repro_is_named_as_edited(repo, key, edit, said):
    repro = repro_of(repo)
    document = json.loads(repro.read_text())
    document[key] = edit(document)
    repro.write_text(json.dumps(document))
    for command in ("replay", "shrink"):
        done = sim(command, str(repro), cwd=repo)
        assert done.returncode == 2, done.stdout + done.stderr
        assert said.format(document.get("seed")) in done.stderr and "the file was edited since it was written" in done.stderr
        assert "no longer fits the code" not in done.stderr and "Exception ignored" not in done.stderr

