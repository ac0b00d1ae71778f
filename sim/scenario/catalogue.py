"""Where the project's data lives, and how a repro file names a scenario so that it replays from anywhere.

A source checkout and an installed wheel have the same layout: the wheel ships `scenarios/` (the catalogue)
and `mutants/` (the curated mutants) as package data beside `sim/`, `reference/` and `faults/`, so one
root serves both and nothing needs a checkout.

A repro file names its scenario relative to the root of the repository that holds it (the nearest folder
above it with `.git` or `pyproject.toml`, or this installation's root), plus a content hash. Replay looks
for that relative path under the root above the repro file, the root above the current directory and this
installation's root (in that order; the first file found is the one), so a repro moved with its
repository, or replayed from another directory, still finds its scenario; the hash says whether it is
still the same file.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS_DIR = ROOT / "scenarios"
MUTANTS_DIR = ROOT / "mutants"
ROOT_MARKERS = (".git", "pyproject.toml")


def repository_root(path: Path) -> Path | None:
    """The nearest folder at or above `path` that is a repository's root or this installation's root."""
    start = path.resolve()
    for folder in (start, *start.parents):
        if folder == ROOT or any((folder / marker).exists() for marker in ROOT_MARKERS):
            return folder
    return None


def scenario_reference(path: Path) -> str:
    """How a repro names a scenario: relative to its repository's root (POSIX slashes), else absolute."""
    resolved = path.resolve()
    root = repository_root(resolved.parent)
    return resolved.relative_to(root).as_posix() if root is not None else resolved.as_posix()


def content_hash(path: Path) -> str:
    """SHA-256 of the file's bytes: whether a scenario is still the one a repro was recorded from."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def find_scenario(reference: str, repro: Path) -> Path | None:
    """Where a repro's scenario is: the first of its places that holds a file, most specific first.

    The first found is the one: a file that changed since is reported as changed, never passed over for
    another copy elsewhere.
    """
    recorded = Path(reference)
    if recorded.is_absolute():
        places = [recorded]
    else:
        roots = [repository_root(repro.parent), repository_root(Path.cwd()), ROOT]
        places = [root / recorded for root in roots if root is not None] + [Path.cwd() / recorded]
    return next((place.resolve() for place in places if place.is_file()), None)
