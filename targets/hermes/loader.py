"""Put exactly one release on sys.path, in a process that has loaded none, and prove it is the one imported.

Every release has the same top-level modules, so a process that imported one release's `run_agent` cannot
load another's: `load` refuses then instead of mixing them. The release's folders go first on sys.path,
and the interpreter's site-packages leave it: they hold other versions of the same dependencies
(`requests` here) and packages no lock names that a release imports when it finds them (httpcore imports
`trio` if it can, which runs `ldconfig`), so a release sees its lock, the standard library and this
project, as after a clean install. A harness module that needs a site-packages package imports it before
`load`. After the import every hermes module and every pinned dependency that was imported must come from the
release's folders. A module the interpreter imported before `load` (a `.pth` file may import `certifi` at
startup) cannot be replaced without breaking whoever holds it; it is listed in `preloaded`, not hidden.
`HERMES_HOME` must be set before `hermes_state` is imported (it reads it at import
time), so `load` takes the home folder.

A caller runs code against a release in a fresh interpreter that calls `load` first
(`python -m targets.hermes check VERSION` is one).
"""

from __future__ import annotations

import atexit
import importlib
import importlib.metadata
import os
import shutil
import site
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from targets.hermes.store import Release, release

# What a compaction needs imported; hermes_state first (it reads HERMES_HOME at import).
ENTRY_MODULES = ("hermes_state", "run_agent", "agent.context_compressor")
# Where a home goes if the machine has a memory filesystem (else the temporary folder): see make_home.
MEMORY_FS = Path("/dev/shm")


class LoadError(Exception):
    """The release could not be loaded as itself: another one is loaded, or an import came from elsewhere."""


@dataclass(frozen=True)
class LoadedRelease:
    """A release imported in this process: its version (as its metadata says) and its entry modules."""

    release: Release
    version: str
    modules: dict[str, ModuleType]
    preloaded: tuple[str, ...]

    @property
    def home(self) -> Path:
        return Path(os.environ["HERMES_HOME"])


def make_home(prefix: str) -> Path:
    """A fresh HERMES_HOME, removed when this process exits. On a memory filesystem where the machine has one:
    hermes syncs its SQLite file at every commit (WAL, synchronous FULL) and its log handler stats and writes its
    files at every record, which on a disk cost a run more than everything else it does; on memory the same calls
    do the same thing at no wait. What hermes does, and in which order, is the same on either."""
    memory = MEMORY_FS.is_dir() and os.access(MEMORY_FS, os.W_OK)
    home = Path(tempfile.mkdtemp(prefix=prefix, dir=str(MEMORY_FS) if memory else None))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


def load(version: str, home: Path) -> LoadedRelease:
    """Import release `version` with HERMES_HOME=`home`; ReleaseMissing if it is not installed."""
    target = release(version).require()
    top_level = _top_level_names(target.paths[0])
    already = sorted(name for name in top_level if name in sys.modules)
    if already:
        raise LoadError(f"cannot load {target.name}: this process already imported {already[0]!r} "
                        f"from {getattr(sys.modules[already[0]], '__file__', '?')}; one release per process")
    before = set(sys.modules)
    sys.path[:] = [str(path) for path in target.paths] + [entry for entry in sys.path if not _is_site(entry)]
    os.environ["HERMES_HOME"] = str(home)
    home.mkdir(parents=True, exist_ok=True)
    modules = {name: importlib.import_module(name) for name in ENTRY_MODULES}
    pinned = {name for path in target.paths for name in _top_level_names(path)}
    preloaded = tuple(sorted(name for name in before if name.split(".")[0] in pinned))
    loaded = LoadedRelease(target, importlib.metadata.version("hermes-agent"), modules, preloaded)
    _check_origin(loaded, set(sys.modules) - before, pinned)
    return loaded


def _is_site(entry: str) -> bool:
    """Whether a sys.path entry is one of the interpreter's (or the user's) site-packages."""
    sites = {*site.getsitepackages(), site.getusersitepackages()}
    return entry in sites or Path(entry).name in ("site-packages", "dist-packages")


def _top_level_names(folder: Path) -> set[str]:
    """The importable names a release folder defines (`agent`, `run_agent`, ...)."""
    names = {p.stem for p in folder.glob("*.py")}
    names |= {p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    return names


def _check_origin(loaded: LoadedRelease, imported: set[str], pinned: set[str]) -> None:
    """The metadata's version is the one asked for, and every module the load imported of a pinned name
    (the release's own or a locked dependency's) came from the release's folders."""
    target = loaded.release
    if loaded.version != target.version:
        raise LoadError(f"asked for {target.name}, imported hermes-agent {loaded.version}")
    roots = tuple(str(path) + os.sep for path in target.paths)
    for name in sorted(imported):
        origin = getattr(sys.modules[name], "__file__", None)
        if name.split(".")[0] in pinned and origin and not origin.startswith(roots):
            raise LoadError(f"{target.name}: module {name!r} came from {origin}, outside the release's folders")
