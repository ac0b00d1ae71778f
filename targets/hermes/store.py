"""Where releases live on disk: one shared folder per distribution version, a release is a list of them.

The releases share module names (`agent`, `gateway`, `tools`, `run_agent`, `hermes_state`), so one process
loads one release; but they share most dependency versions too (0.18.2 and 0.19.0 differ only in
hermes-agent itself). So the store holds each distribution version once, in its own `pip --target`
folder (`<store>/dists/openai-2.24.0/`), and a release is its lock's folders in order, hermes-agent's
first. Two releases that pin the same version of a dependency share its folder; one that pins another
version gets its own. Nothing is shared that a lock does not name exactly.

The store is `$COMPACTION_SIM_CACHE/hermes` (default `~/.cache/compaction-sim/hermes`). An install runs
one `pip install --no-deps --target` of the missing pins into a staging folder, splits it into one folder
per distribution by each one's RECORD, and renames each into place: a folder in `dists/` is complete or
absent, never half-written.
"""

from __future__ import annotations

import csv
import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from targets.hermes.locks import DISTRIBUTION, Pin, canonical, read_lock

CACHE_ENV = "COMPACTION_SIM_CACHE"
# pip's last words are enough to say why an install failed (no network, a yanked version).
_PIP_TAIL_LINES = 3


class ReleaseMissing(Exception):
    """A release that is not in the store; the message names it and the command that installs it."""


class ReleaseUnavailable(ReleaseMissing):
    """A release that is not in the store and could not be installed (no network, say): names it and why."""


def store_root() -> Path:
    """The store's folder: under $COMPACTION_SIM_CACHE when set, else under the user's cache."""
    base = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "compaction-sim"
    return Path(base) / "hermes"


@dataclass(frozen=True)
class Release:
    """One pinned release in a store: its pins and the folders that carry them."""

    version: str
    pins: tuple[Pin, ...]
    store: Path

    @property
    def name(self) -> str:
        return f"{DISTRIBUTION}=={self.version}"

    def folder(self, pin: Pin) -> Path:
        return self.store / "dists" / pin.key

    @property
    def paths(self) -> tuple[Path, ...]:
        """What goes on sys.path, in order: hermes-agent's folder first, then its dependencies'."""
        return tuple(self.folder(pin) for pin in self.pins)

    def missing(self) -> tuple[Pin, ...]:
        return tuple(pin for pin in self.pins if not self.folder(pin).is_dir())

    def require(self) -> Release:
        """This release, or ReleaseMissing naming it, what is missing and how to install it."""
        missing = self.missing()
        if missing:
            raise ReleaseMissing(
                f"{self.name} is not installed in {self.store} ({len(missing)} of {len(self.pins)} "
                f"distributions missing, first {missing[0].requirement()}); install it with "
                f"`python -m targets.hermes install {self.version}`")
        return self


def release(version: str, store: Path | None = None) -> Release:
    """The release `version` as its lock pins it, in `store` (default: the store root)."""
    return Release(version, read_lock(version), store or store_root())


@dataclass(frozen=True)
class InstallReport:
    """What one install did: how many distributions it added, how long it took, what the release weighs."""

    release: Release
    installed: tuple[Pin, ...]
    seconds: float

    def size_bytes(self) -> int:
        return sum(folder_size(path) for path in self.release.paths)


def install(version: str, store: Path | None = None) -> InstallReport:
    """Install whatever `version` lacks in the store; ReleaseUnavailable naming it if pip cannot."""
    target = release(version, store)
    started = time.monotonic()
    target.store.mkdir(parents=True, exist_ok=True)
    with _store_lock(target.store):
        missing = target.missing()
        if missing:
            _install_pins(target, missing)
    return InstallReport(target, missing, time.monotonic() - started)


def folder_size(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file() and not entry.is_symlink())


@contextmanager
def _store_lock(store: Path) -> Iterator[None]:
    """One installer at a time per store: parallel test files may ask for the same release."""
    with open(store / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _install_pins(target: Release, pins: tuple[Pin, ...]) -> None:
    staging = target.store / f".staging-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _pip_install(target, pins, staging)
        for pin, folder in _split_by_record(staging, pins).items():
            destination = target.folder(pin)
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.rename(folder, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _pip_install(target: Release, pins: tuple[Pin, ...], staging: Path) -> None:
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--disable-pip-version-check",
               "--target", str(staging / "site"), *(pin.requirement() for pin in pins)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
        why = " | ".join(lines[-_PIP_TAIL_LINES:]) or f"pip exited {done.returncode}"
        raise ReleaseUnavailable(f"{target.name} is not installed in {target.store} and could not be "
                                 f"installed ({len(pins)} distributions missing): {why}")


def _split_by_record(staging: Path, pins: tuple[Pin, ...]) -> dict[Pin, Path]:
    """Move each distribution's files (as its RECORD lists them) into a folder of its own under staging.

    A RECORD path is relative to the site folder; `../../x` is a data file or script pip put beside it
    (`--target` lands those in the site folder too: hermes-agent ships `locales/` that way). A file that
    two distributions claim, or that none does, is an error: the split must account for every byte.
    """
    site = staging / "site"
    by_key = {f"{canonical(pin.name)}-{pin.version}": pin for pin in pins}
    folders: dict[Pin, Path] = {}
    for record in sorted(site.glob("*.dist-info/RECORD")):
        pin = by_key[_dist_info_key(record.parent)]
        folder = staging / "split" / pin.key
        for relative in _record_paths(record):
            source = site / relative
            if not source.exists() and not source.is_symlink():
                continue  # pip lists a .pyc it did not write for a module it could not compile
            moved = folder / relative
            moved.parent.mkdir(parents=True, exist_ok=True)
            os.rename(source, moved)
        folders[pin] = folder
    leftover = [p for p in site.rglob("*") if p.is_file()]
    if leftover or set(folders) != set(pins):
        raise RuntimeError(f"splitting {site} by RECORD left {len(leftover)} files unclaimed "
                           f"(first {leftover[:1]}) or found {len(folders)} of {len(pins)} distributions")
    return folders


def _dist_info_key(dist_info: Path) -> str:
    name, version = dist_info.name.removesuffix(".dist-info").rsplit("-", 1)
    return f"{canonical(name)}-{version}"


def _record_paths(record: Path) -> list[str]:
    with record.open(newline="") as handle:
        rows = [row[0] for row in csv.reader(handle) if row]
    return [row[len("../../"):] if row.startswith("../../") else row for row in rows]
