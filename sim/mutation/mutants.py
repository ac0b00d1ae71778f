"""Curated mutants: each reverts one named fix of the reference, to prove a scenario catches its race.

A mutant is a small TOML file in `mutants/` named after the fix it reverts:

    fix = "hard-cancel-through-fence"
    file = "reference/agent.py"
    find = "        return fence is not None and await self._cancel_hard(fence)"
    replace = "        return False"

`find` must occur exactly once, within the few lines under the fix's `# FIX <name>` marker; otherwise the
mutant is stale (the code moved on) and says so by name, never silently skipped. A mutant is applied to a
copy of the reference in a temporary overlay folder; the working tree is never modified. `equivalent.toml`
in the same folder is not a mutant: it lists the operator mutants known to be equivalent (sim/mutation/operators.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.core import children, stopping
from sim.mutation.reach import Reach, edit_reach
from sim.scenario.catalogue import MUTANTS_DIR, ROOT

EQUIVALENTS_FILE = "equivalent.toml"
# What a parent process tells the `python -m sim` it runs over an overlay; read only at the CLI's entry.
OVERLAY_ENV = "COMPACTION_SIM_MUTANT_OVERLAY"
NAME_ENV = "COMPACTION_SIM_MUTANT"
MARKER_REACH = 12  # lines under a FIX marker that its mutant may edit
LIST_HINT = "python -m sim list mutants"


class StaleMutant(Exception):
    """The mutant no longer applies to the code: its marker or its text is gone, or is ambiguous."""


class CatalogueError(Exception):
    """The curated mutants cannot be had: the catalogue is missing, or a name is not in it (bad input)."""


@dataclass(frozen=True)
class Mutant:
    fix: str
    file: str
    find: str
    replace: str
    path: Path

    @property
    def name(self) -> str:
        return self.fix

    def mutated_source(self, root: Path = ROOT) -> str:
        """The target file's text with the fix reverted; StaleMutant if it cannot be applied."""
        source = (root / self.file).read_text(encoding="utf-8")
        lines = source.splitlines(keepends=True)
        marker = [i for i, line in enumerate(lines) if f"# FIX {self.fix} (" in line]
        if len(marker) != 1:
            raise StaleMutant(f"mutant {self.fix}: expected one '# FIX {self.fix}' marker in {self.file}, found {len(marker)}")
        start = sum(len(line) for line in lines[: marker[0] + 1])
        under_marker = "".join(lines[marker[0] + 1 : marker[0] + 1 + MARKER_REACH])
        if under_marker.count(self.find) != 1:
            raise StaleMutant(f"mutant {self.fix}: its text does not occur exactly once under the marker in {self.file}")
        offset = start + under_marker.index(self.find)
        return source[:offset] + self.replace + source[offset + len(self.find):]

    def reach(self, root: Path = ROOT) -> Reach:
        """The lines of the unmutated file a run must execute for this mutant to change it (sim/mutation/reach.py)."""
        return edit_reach(self.file, (root / self.file).read_text(encoding="utf-8"), self.mutated_source(root))


def load_mutant(path: Path) -> Mutant:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return Mutant(fix=data["fix"], file=data["file"], find=data["find"], replace=data["replace"], path=path)


def load_mutants(folder: Path = MUTANTS_DIR) -> dict[str, Mutant]:
    """The curated mutants by name; CatalogueError if there are none, since a check over none proves nothing."""
    paths = sorted(path for path in folder.glob("*.toml") if path.name != EQUIVALENTS_FILE)
    if not paths:
        raise CatalogueError(f"{folder}: no curated mutants there; they ship with the package and come with a "
                             f"source checkout, so reinstall it or run from a checkout")
    return {mutant.fix: mutant for mutant in map(load_mutant, paths)}


def require(names: Sequence[str], known: Collection[str]) -> None:
    """CatalogueError naming every unknown mutant, and where to see the known ones."""
    unknown = [name for name in names if name not in known]
    if unknown:
        raise CatalogueError(f"no such mutant: {', '.join(unknown)} ({len(known)} known: {LIST_HINT})")


@contextmanager
def overlay(mutant: Mutant) -> Iterator[Path]:
    """A temporary folder holding a mutated copy of `reference/`; put it first on PYTHONPATH to use it."""
    with overlay_with(mutant.file, mutant.mutated_source(), label=mutant.fix) as folder:
        yield folder


@contextmanager
def overlay_with(file: str, source: str, *, label: str = "edit") -> Iterator[Path]:
    """A temporary copy of `reference/` whose `file` (a path like "reference/lease.py") reads `source`."""
    with stopping.held():  # a SIGTERM between making the folder and owning it would leave it behind
        folder = tempfile.TemporaryDirectory(prefix=f"mutant-{label}-")
    try:
        target = Path(folder.name)
        shutil.copytree(ROOT / "reference", target / "reference", ignore=shutil.ignore_patterns("__pycache__"))
        if not (target / file).is_file():
            raise ValueError(f"{file}: not a file of the reference")
        (target / file).write_text(source, encoding="utf-8")
        yield target
    finally:
        with stopping.held():
            folder.cleanup()


def mutant_process(folder: Path, name: str, argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """`overlay_process` for a curated mutant's overlay: the child also hears the mutant's name, which its repro
    files record so that a replay applies the mutant again."""
    command, env = overlay_process(folder, argv)
    return command, {**env, NAME_ENV: name}


def overlay_process(folder: Path, argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run `python -m sim ARGV` against the overlay's `reference`.

    -P keeps the current directory off sys.path, so the overlay's `reference` shadows this checkout's; the
    subprocess checks that it does (OVERLAY_ENV), or a survivor would be meaningless. This checkout comes
    right after the overlay, so `sim`, `faults` and `contract` are this checkout's too, not an installed copy's.
    """
    path = os.pathsep.join(filter(None, [str(folder), str(ROOT), os.environ.get("PYTHONPATH")]))
    return [sys.executable, "-P", "-m", "sim", *argv], {**os.environ, OVERLAY_ENV: str(folder), "PYTHONPATH": path}


def sim_json(args: Sequence[str], *, folder: Path | None = None, mutant: str | None = None,
             ) -> tuple[int, dict[str, Any] | None, str]:
    """`python -m sim ARGS --json` in a child process (over the reference in the overlay `folder`, under `mutant`,
    when given): its exit status, its document (None if it printed none), its stderr."""
    argv = [*args, "--json"]
    command, env = [sys.executable, "-m", "sim", *argv], None
    if folder is not None and mutant is not None:
        command, env = mutant_process(folder, mutant, argv)
    done = children.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        return done.returncode, json.loads(done.stdout), done.stderr
    except json.JSONDecodeError:
        return done.returncode, None, done.stderr


def sim_document(args: Sequence[str]) -> dict[str, Any]:
    """A child command's JSON document, or {"error": its last stderr line} when it printed none (a benchmark
    records the failure beside the other measurements instead of stopping)."""
    code, document, errors = sim_json(args)
    if document is None:
        return {"error": errors.strip().splitlines()[-1] if errors.strip() else f"exit {code}"}
    return document
