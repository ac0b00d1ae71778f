"""The catalogue's coverage map: for each scenario, the lines of `reference/` its runs execute.

`mutate` runs a mutant only against the scenarios that reach the lines it edits (`sim/mutation/reach.py`). The map is
built once, by child processes that run each scenario as `run` does (its own seeds, runs and strategy) under
the line tracer (`sim/mutation/line_trace.py`), and kept in one file under `out/`. What can change which lines a run
executes is the code (`contract/`, `faults/`, `reference/`, `sim/`), the interpreter, and the scenario file:
the map is kept for one digest of the code and the interpreter, and each scenario's entry under the hash of
its file, so a changed or new scenario is traced alone and a changed line of code traces the catalogue again.

What a process executes outside any scenario's runs (importing, loading the scenario files) is kept apart as
`common`: every process that runs a scenario executes it, so a mutant there is reached by every scenario.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.core.words import counted
from sim.mutation.line_trace import LineTrace, forget_caches
from sim.mutation.mutants import sim_json
from sim.mutation.reach import Reach
from sim.scenario.catalogue import ROOT, content_hash

CODE_PACKAGES = ("contract", "faults", "reference", "sim")
TRACED = "reference"  # the package whose lines are mapped
FORMAT = 1

Lines = dict[str, frozenset[int]]  # repository-relative file -> line numbers


@dataclass(frozen=True)
class ScenarioLines:
    """One scenario's runs: the lines they execute, and their simulated steps (what they cost, deterministically)."""

    name: str
    lines: Lines
    steps: int


@dataclass
class CoverageMap:
    code: str  # code_digest() of the code and interpreter the map was traced with
    common: Lines = field(default_factory=dict)
    scenarios: dict[str, ScenarioLines] = field(default_factory=dict)  # by the hash of the scenario's file
    _hashes: dict[str, str] = field(default_factory=dict, repr=False)  # each file read once

    def entry(self, scenario: Any) -> ScenarioLines:
        if scenario.path not in self._hashes:
            self._hashes[scenario.path] = scenario_hash(scenario.path)
        return self.scenarios[self._hashes[scenario.path]]

    def reaches(self, scenario: Any, reach: Reach) -> bool:
        """Whether the scenario's runs (or every process's common part) execute a line the edit needs."""
        if reach.everywhere or reach.lines & self.common.get(reach.file, frozenset()):
            return True
        return bool(reach.lines & self.entry(scenario).lines.get(reach.file, frozenset()))

    def reaching(self, scenarios: Iterable[Any], reach: Reach) -> list[Any]:
        """The scenarios that reach the edit, cheapest first (by their simulated steps), so that a mutation check
        which stops at its first kill spends as little as it can before it."""
        return sorted((s for s in scenarios if self.reaches(s, reach)), key=lambda s: self.entry(s).steps)


@dataclass(frozen=True)
class Obtained:
    """The map a command uses, and whether it was built for it: how many scenarios were traced, in how long."""

    map: CoverageMap
    path: Path
    traced: int
    seconds: float

    def summary(self) -> str:
        if not self.traced:
            return f"coverage map: reused {self.path} ({counted(len(self.map.scenarios), 'scenario')} traced before)"
        return f"coverage map: built {self.path}: traced {counted(self.traced, 'scenario')} in {self.seconds:.1f}s"


def code_digest(root: Path = ROOT) -> str:
    """SHA-256 of every `.py` file of the code packages (path and bytes) and of the interpreter's version."""
    hasher = hashlib.sha256(f"{sys.implementation.name} {sys.version}\n".encode())
    for package in CODE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            hasher.update(f"{path.relative_to(root).as_posix()}\n".encode())
            hasher.update(path.read_bytes())
    return hasher.hexdigest()


def scenario_hash(path: str | Path) -> str:
    """What a scenario's entry is kept under: the hash of its file, so an edited file is traced again."""
    return content_hash(Path(path))


def load(path: Path, code: str) -> CoverageMap:
    """The map kept at `path` if it was traced with this code; an empty one otherwise (missing, unreadable, stale)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return CoverageMap(code)
    if not isinstance(document, dict) or document.get("format") != FORMAT or document.get("code") != code:
        return CoverageMap(code)
    scenarios = {digest: ScenarioLines(entry["name"], _lines(entry["lines"]), entry["steps"])
                 for digest, entry in document["scenarios"].items()}
    return CoverageMap(code, _lines(document["common"]), scenarios)


def save(path: Path, coverage: CoverageMap) -> None:
    """Write the map whole or not at all (a reader never sees half a file)."""
    document = {
        "format": FORMAT, "code": coverage.code, "common": _plain(coverage.common),
        "scenarios": {digest: {"name": entry.name, "steps": entry.steps, "lines": _plain(entry.lines)}
                      for digest, entry in sorted(coverage.scenarios.items())},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(document, sort_keys=True), encoding="utf-8")
    os.replace(partial, path)


def _lines(plain: dict[str, list[int]]) -> Lines:
    return {file: frozenset(lines) for file, lines in plain.items()}


def _plain(lines: Lines) -> dict[str, list[int]]:
    return {file: sorted(numbers) for file, numbers in sorted(lines.items())}


TraceShards = Callable[[Sequence[Sequence[str]], int], list[dict[str, Any]]]


def obtain(scenarios: Sequence[Any], path: Path, jobs: int, *, code: str | None = None,
           trace: TraceShards | None = None) -> Obtained:
    """The map for `scenarios`: the kept one, with every scenario it lacks traced and added (and kept)."""
    coverage = load(path, code or code_digest())
    missing = [s for s in scenarios if scenario_hash(s.path) not in coverage.scenarios]
    if not missing:
        return Obtained(coverage, path, 0, 0.0)
    started = time.monotonic()
    shards = [[str(s.path) for s in missing[index::jobs]] for index in range(min(jobs, len(missing)))]
    for document in (trace or trace_in_children)(shards, jobs):
        merge(coverage, document)
    save(path, coverage)
    return Obtained(coverage, path, len(missing), time.monotonic() - started)


def merge(coverage: CoverageMap, document: dict[str, Any]) -> None:
    """Add one tracing process's document (`trace_document`) to the map."""
    for file, lines in _lines(document["common"]).items():
        coverage.common[file] = coverage.common.get(file, frozenset()) | lines
    for traced in document["scenarios"]:
        coverage.scenarios[scenario_hash(traced["path"])] = ScenarioLines(traced["name"], _lines(traced["lines"]), traced["steps"])


def trace_in_children(shards: Sequence[Sequence[str]], jobs: int) -> list[dict[str, Any]]:
    """Each shard of scenario paths traced by its own `python -m sim trace-lines`, `jobs` at a time."""
    def one(paths: Sequence[str]) -> dict[str, Any]:
        code, document, errors = sim_json(["trace-lines", *paths])
        if code != 0 or document is None:
            last = errors.strip().splitlines()[-1] if errors.strip() else f"exit {code}"
            raise RuntimeError(f"tracing scenarios for the coverage map failed: {last}")
        return document

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, shards))


def trace_document(paths: Sequence[Path], root: Path = ROOT) -> dict[str, Any]:
    """What one tracing process reports: the lines its loading executes (`common`), then each scenario's."""
    tracer = LineTrace(root, TRACED)
    common: dict[str, set[int]] = {}
    traced = []
    tracer.start()
    try:
        with tracer.into(common):
            from sim.scenario.loader import load_paths
            from sim.scenario.names import registry
            from sim.scenario.runner import check

            scenarios = load_paths(list(paths), registry())
        for scenario in scenarios:
            forget_caches(CODE_PACKAGES)
            with tracer.into({}) as lines:
                verdict = check(scenario)
            traced.append({"path": str(scenario.path), "name": scenario.name, "steps": verdict.steps,
                           "lines": {file: sorted(numbers) for file, numbers in lines.items()}})
    finally:
        tracer.stop()
    return {"common": {file: sorted(numbers) for file, numbers in common.items()}, "scenarios": traced}
