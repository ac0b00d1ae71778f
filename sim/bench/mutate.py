"""`python -m sim bench mutate`: the curated check with its coverage map against the whole matrix, in one run.

First the coverage map is built from nothing (its cost is part of a cold check), then every mutant runs as
`mutate` runs it (the scenarios that reach its lines, claimers first, until the first kill), then as
`mutate --full` runs it (every scenario). The ratio of the two times is the speed-up; the comparison is what
makes it honest: the same mutants killed, each selected kill (scenario and invariant) one the full matrix
also saw, no mutant called unreached that the full matrix kills, and no kill in the full matrix by a
scenario that the map says does not reach the mutant (which would make the selection unsound).
"""

from __future__ import annotations

import os
import resource
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sim.bench.figures import render_figures
from sim.mutation.coverage_map import CoverageMap, obtain
from sim.mutation.kill_matrix import MutantResult, kill_matrix
from sim.mutation.mutants import StaleMutant, load_mutants


def bench_mutate(scenarios: Sequence[Any], mutants: Sequence[str], *, jobs: int, out: Path,
                 on_done: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Both matrices over `mutants`, timed in this one run, and how their verdicts compare."""
    def heard(mode: str) -> Callable[[MutantResult], None]:
        def tell(result: MutantResult) -> None:
            if on_done is not None:
                on_done(f"{mode} {result.name}: {result.verdict}, {result.seconds:.1f}s")
        return tell

    shutil.rmtree(out, ignore_errors=True)
    load_before = os.getloadavg()
    started = _clocks()
    coverage = obtain(scenarios, out / "coverage-map.json", jobs).map
    built = _clocks()
    selected = kill_matrix(scenarios, mutants, jobs, out / "selected", coverage=coverage, on_done=heard("selected"))
    chosen = _clocks()
    load_between = os.getloadavg()
    full = kill_matrix(scenarios, mutants, jobs, out / "full", on_done=heard("full"))
    finished = _clocks()
    (map_s, map_cpu), (selected_s, selected_cpu), (full_s, full_cpu) = (
        (end[0] - start[0], end[1] - start[1]) for start, end in ((started, built), (built, chosen), (chosen, finished)))
    return {
        "benchmark": "mutate", "mutants": len(mutants), "scenarios": len(scenarios), "jobs": jobs,
        "load_average_before": _rounded(load_before), "load_average_between": _rounded(load_between),
        "load_average_after": _rounded(os.getloadavg()),
        "map_build_s": round(map_s, 1), "selected_s": round(selected_s, 1), "full_s": round(full_s, 1),
        "speedup_map_reused": round(full_s / selected_s, 1), "speedup_map_built": round(full_s / (map_s + selected_s), 1),
        "map_build_cpu_s": round(map_cpu, 1), "selected_cpu_s": round(selected_cpu, 1), "full_cpu_s": round(full_cpu, 1),
        "cpu_ratio_map_reused": round(full_cpu / selected_cpu, 1),
        "cpu_ratio_map_built": round(full_cpu / (map_cpu + selected_cpu), 1),
        "pairs_selected": _pairs(selected), "pairs_full": _pairs(full),
        **compare(selected, full, reaching_sets(scenarios, mutants, coverage)),
    }


def reaching_sets(scenarios: Sequence[Any], mutants: Sequence[str], coverage: CoverageMap) -> dict[str, set[str]]:
    """Mutant -> the names of the scenarios that reach its lines (a stale mutant reaches none)."""
    catalogue = load_mutants()
    sets = {}
    for name in mutants:
        try:
            sets[name] = {scenario.name for scenario in coverage.reaching(scenarios, catalogue[name].reach())}
        except StaleMutant:
            sets[name] = set()
    return sets


def compare(selected: Sequence[MutantResult], full: Sequence[MutantResult], reaching: dict[str, set[str]]) -> dict[str, Any]:
    """Where the selected matrix and the full one disagree; every list empty means the selection lost nothing."""
    by_name = {result.name: result for result in full}
    killed_selected = {r.name for r in selected if r.killed}
    killed_full = {r.name for r in full if r.killed}
    return {
        "killed_selected": len(killed_selected), "killed_full": len(killed_full),
        "killed_only_in_full": sorted(killed_full - killed_selected),
        "killed_only_selected": sorted(killed_selected - killed_full),
        "verdicts_differ": sorted(f"{r.name}: {r.verdict} (full: {by_name[r.name].verdict})"
                                  for r in selected if _outcome(r) != _outcome(by_name[r.name])),
        "unreached_but_killed_in_full": sorted(r.name for r in selected if r.unreached and r.name in killed_full),
        "selected_kills_not_in_full": sorted(
            f"{r.name} by {scenario} ({invariant})" for r in selected for scenario, invariant in r.invariants.items()
            if by_name[r.name].invariants.get(scenario) != invariant),
        "full_kills_outside_reach": sorted(
            f"{r.name} by {scenario}" for r in full for scenario in r.killed_by if scenario not in reaching[r.name]),
    }


def _clocks() -> tuple[float, float]:
    """Wall time, and the CPU time of this process and every child process it has waited for (the CPU a phase
    spent is what a busy machine does not change much)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.monotonic(), own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _rounded(loads: Sequence[float]) -> list[float]:
    """A load average (1, 5 and 15 minutes): the machine is shared, so a time is read beside it."""
    return [round(load, 2) for load in loads]


def _outcome(result: MutantResult) -> str:
    """The verdict, with a gap counted as the survivor the full matrix calls it (the label only says why)."""
    return "SURVIVED" if result.verdict == "UNREACHED" else result.verdict


def _pairs(results: Sequence[MutantResult]) -> int:
    """Mutant-scenario pairs run."""
    return sum(len(r.killed_by) + len(r.survived) for r in results)


def render(result: dict[str, Any]) -> str:
    lost = [key for key in COMPARISONS if result[key]]
    verdict = "the selection lost nothing" if not lost else f"the selection DIFFERS from the full matrix: {', '.join(lost)}"
    return render_figures(result) + f"\n\n{verdict}"


COMPARISONS = ("killed_only_in_full", "killed_only_selected", "verdicts_differ", "unreached_but_killed_in_full",
               "selected_kills_not_in_full", "full_kills_outside_reach")
