"""`python -m sim mutate`: the curated kill matrix.

First a forced-fail sanity pass: one scenario is run with every run made to fail, and the command must
report it, which proves that a failure travels from a subprocess to the verdict (a harness that cannot
fail would make every mutant look killed). Then each curated mutant, in a subprocess over an overlay copy
of the reference (the working tree is never touched), runs the scenarios that name it in `must_fail_under`
first, then the rest of the catalogue. Mutants run in parallel, one process each. A stop request (Ctrl+C:
`sim.core.stopping`) starts no further mutant, and leaves unjudged those in progress: their children stopped
part-way, and a verdict needs every run.

With a coverage map (`sim/mutation/coverage_map.py`) a mutant runs only where it can be killed: against the scenarios
whose runs execute the lines it edits (`sim/mutation/reach.py`; any other runs as on the unmutated reference, and
passes). Every reaching claimer runs, since each claim is checked; the other reaching scenarios run only if no
claimer killed it, cheapest first, and stop at the first that reports a violation. A mutant that no scenario
reaches is a gap in the catalogue (UNREACHED), and a claimer that does not reach its mutant cannot kill it.
Without a map (`--full`) every mutant runs the whole catalogue, as the matrix always did.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.core import stopping
from sim.mutation.mutants import Mutant, StaleMutant, load_mutants, overlay, sim_json

if TYPE_CHECKING:
    from sim.mutation.coverage_map import CoverageMap

STOP_AT_VIOLATION = "--stop-at-violation"  # `run`'s hidden option: no scenario after the first that reports a violation


@dataclass(frozen=True)
class MutantPlan:
    """The scenarios one mutant runs: its claimers (each claim is checked, but for those that never execute its
    lines, which cannot kill it), then the others in order.

    `reaching` counts the scenarios whose runs execute its lines (None: no selection, the whole catalogue);
    `first_kill` stops the others at the first violation and skips them once a claimer killed.
    """

    claimers: list[Any]
    others: list[Any]
    unreached_claimers: list[str] = field(default_factory=list)
    reaching: int | None = None
    first_kill: bool = False
    stale: str | None = None


@dataclass
class MutantResult:
    name: str
    expected: list[str]
    killed_by: dict[str, str] = field(default_factory=dict)  # scenario -> replay command
    invariants: dict[str, str] = field(default_factory=dict)  # scenario -> the invariant its violation names
    survived: list[str] = field(default_factory=list)
    vacuous: dict[str, tuple[list[str], str]] = field(default_factory=dict)  # survivor that FAILed, with no violation -> why, its path
    stale: str | None = None
    seconds: float = 0.0
    reaching: int | None = None  # scenarios that execute its lines; None: not selected (--full)
    unreached_claimers: list[str] = field(default_factory=list)  # claimers that never execute its lines

    @property
    def killed(self) -> bool:
        return bool(self.killed_by)

    @property
    def unreached(self) -> bool:
        return self.reaching == 0

    def missed_expected(self) -> list[str]:
        return [scenario for scenario in self.expected if scenario not in self.killed_by]

    @property
    def verdict(self) -> str:
        """killed (by its expected killers), or what went wrong: STALE, UNREACHED (no scenario runs its lines),
        SURVIVED, MISSED (killed, not by them)."""
        if self.stale:
            return "STALE"
        if self.unreached:
            return "UNREACHED"
        if not self.killed:
            return "SURVIVED"
        return "MISSED" if self.missed_expected() else "killed"

    def problem(self) -> str:
        """Why the mutant fails the check, in a line ("" when it does not)."""
        if self.stale:
            return self.stale
        if self.unreached:
            return "a gap: no scenario executes the lines it edits"
        if not self.killed:
            return "survived every scenario"
        missed = [f"{name} (never executes its lines)" if name in self.unreached_claimers else name for name in self.missed_expected()]
        return f"expected killers did not kill: {', '.join(missed)}" if missed else ""


def sanity_pass(scenario: Path) -> str | None:
    """None if a forced failure is reported as a failure; otherwise what went wrong."""
    code, document, errors = sim_json(["run", str(scenario), "--runs", "1", "--no-shrink", "--force-fail"])
    if code == 1 and document and not document["passed"]:
        return None
    return f"a forced failure was not reported (exit {code}): {errors.strip()[:200]}"


def full_plan(name: str, scenarios: Sequence[Any], *, claims_only: bool = False) -> MutantPlan:
    """Today's matrix: the claimers, then (unless `claims_only`) every other scenario, all of them run."""
    claimers = [s for s in scenarios if name in s.expect.must_fail_under]
    return MutantPlan(claimers, [] if claims_only else [s for s in scenarios if s not in claimers])


def selected_plan(mutant: Mutant, scenarios: Sequence[Any], coverage: CoverageMap, *, claims_only: bool = False) -> MutantPlan:
    """Only the scenarios that reach the mutant's lines: its reaching claimers, then the other reaching ones,
    cheapest first, until the first kill."""
    claimers = [s for s in scenarios if mutant.name in s.expect.must_fail_under]
    try:
        reach = mutant.reach()
    except StaleMutant as stale:
        return MutantPlan(claimers, [], stale=str(stale))
    reaching = coverage.reaching(scenarios, reach)
    others = [] if claims_only else [s for s in reaching if s not in claimers]
    return MutantPlan(claimers, others, [s.name for s in claimers if s not in reaching], reaching=len(reaching), first_kill=True)


def run_mutant(mutant: Mutant, plan: MutantPlan, out: Path) -> MutantResult:
    """One mutant: its plan's claimers, then its others, each group in one subprocess over one overlay."""
    result = MutantResult(mutant.name, [s.name for s in plan.claimers], stale=plan.stale, reaching=plan.reaching,
                          unreached_claimers=plan.unreached_claimers)
    claimers = [s for s in plan.claimers if s.name not in plan.unreached_claimers]
    groups = [(group, stop) for group, stop in ((claimers, False), (plan.others, plan.first_kill)) if group]
    started = time.monotonic()
    if groups and not result.stale:
        try:
            with overlay(mutant) as folder:
                _run_groups(result, groups, folder, out, first_kill=plan.first_kill)
        except StaleMutant as stale:
            result.stale = str(stale)
    result.seconds = time.monotonic() - started
    return result


def _run_groups(result: MutantResult, groups: Sequence[tuple[Sequence[Any], bool]], folder: Path, out: Path, *,
                first_kill: bool) -> None:
    """Each group in one `run` over the overlay (`stop`: until its first violation), into `result`."""
    for group, stop in groups:
        if first_kill and result.killed:
            return
        argv = ["run", *(str(s.path) for s in group), "--out", str(out / result.name), "--no-shrink", *([STOP_AT_VIOLATION] if stop else [])]
        code, document, errors = sim_json(argv, folder=folder, mutant=result.name)
        if document is None:
            result.stale = errors.strip().splitlines()[-1] if errors.strip() else f"exit {code}"
            return
        for verdict in document["scenarios"]:
            if verdict["violation"] is not None:
                result.killed_by[verdict["scenario"]] = verdict["replay"]
                result.invariants[verdict["scenario"]] = verdict["violation"]["invariant"]
            else:
                result.survived.append(verdict["scenario"])
                if verdict.get("problems"):
                    result.vacuous[verdict["scenario"]] = (verdict["problems"], verdict["path"])


def kill_matrix(scenarios: Sequence[Any], mutants: Sequence[str], jobs: int, out: Path, *, claims_only: bool = False,
                coverage: CoverageMap | None = None, on_done: Callable[[MutantResult], None] | None = None) -> list[MutantResult]:
    """Each mutant against the scenarios that claim it, then (unless `claims_only`) the rest, `jobs` mutants at a
    time; with a coverage map, only the scenarios that reach it (`selected_plan`). `on_done` hears of each finished
    mutant. After a stop request, only the mutants judged before it."""
    catalogue = load_mutants()

    def one(name: str) -> MutantResult | None:
        if stopping.requested():
            return None
        plan = (full_plan(name, scenarios, claims_only=claims_only) if coverage is None
                else selected_plan(catalogue[name], scenarios, coverage, claims_only=claims_only))
        result = run_mutant(catalogue[name], plan, out)
        if stopping.requested():
            return None
        if on_done is not None:
            on_done(result)
        return result

    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        return [result for result in pool.map(one, mutants) if result is not None]
    finally:  # on a SIGTERM, no mutant not yet started makes its overlay only to remove it
        pool.shutdown(cancel_futures=True)


def render_matrix(results: Sequence[MutantResult], scenario_names: Sequence[str]) -> str:
    """Mutants down, scenarios across (by column number); X killed, . survived, - not run (it does not reach the
    mutant's lines, or came after its first kill)."""
    width = max((len(r.name) for r in results), default=6)
    lines = ["scenarios: " + ", ".join(f"{i + 1}={name}" for i, name in enumerate(scenario_names)), ""]
    lines.append(" " * width + "  " + "".join(f"{(i + 1) % 10}" for i in range(len(scenario_names))) + "  verdict   time")
    for result in results:
        cells = "".join("X" if n in result.killed_by else "." if n in result.survived else "-" for n in scenario_names)
        lines.append(f"{result.name:<{width}}  {cells}  {result.verdict:<8} {result.seconds:5.1f}s")
    return "\n".join(lines)


def result_json(result: MutantResult) -> dict[str, Any]:
    return {
        "mutant": result.name, "killed": result.killed, "stale": result.stale, "expected_killers": result.expected,
        "missed_expected": result.missed_expected(), "killed_by": result.killed_by, "invariants": result.invariants,
        "survived_in": result.survived, "seconds": round(result.seconds, 2), "verdict": result.verdict,
        "reaching": result.reaching, "unreached": result.unreached, "unreached_claimers": result.unreached_claimers,
    }


def claimed_mutants(scenarios: Sequence[Any]) -> list[str]:
    """Every mutant some scenario names in `must_fail_under`, sorted."""
    return sorted({name for scenario in scenarios for name in scenario.expect.must_fail_under})


def claim_problems(results: Sequence[MutantResult]) -> dict[str, list[str]]:
    """Scenario name -> why its `must_fail_under` does not hold: each claimed mutant that did not make it fail."""
    problems: dict[str, list[str]] = {}
    for result in results:
        for scenario in result.missed_expected():
            reason = (f"is stale ({result.stale})" if result.stale else "never executes in it (the scenario's runs do not "
                      "execute the lines it edits)" if scenario in result.unreached_claimers else _not_caught(result, scenario))
            problems.setdefault(scenario, []).append(f"must_fail_under: mutant {result.name} {reason}")
    return problems


def _not_caught(result: MutantResult, scenario: str) -> str:
    """Why `scenario` did not catch the mutant: it did not fail under it, or it failed only by what it did not
    reach (a coverage mark, a fault), which a mutant may cause without breaking any property; then say which
    invariants do report it, judged with all of them."""
    vacuous = result.vacuous.get(scenario)
    if vacuous is None:
        return "did not make it fail"
    problems, path = vacuous
    with tempfile.TemporaryDirectory(prefix="claim-") as out:
        _, document, _ = sim_json(["run", path, "--mutant", result.name, "--no-shrink", "--all-invariants", "--out", out])
    fired = sorted({verdict["violation"]["invariant"] for verdict in (document or {}).get("scenarios", [])
                    if verdict["violation"] is not None})
    hint = (f"with invariants = \"all\" it reports {', '.join(fired)}: name it there (or \"all\")" if fired
            else "no invariant reports it even with invariants = \"all\": the scenario does not show this mutant's race")
    return (f"made it fail only by what it did not reach ({'; '.join(problems)}), and no invariant it checks reported "
            f"a violation, which is what catching a mutant takes; {hint}")
