"""`python -m sim mutate`: the curated kill matrix.

First a forced-fail sanity pass: one scenario is run with every run made to fail, and the command must
report it, which proves that a failure travels from a subprocess to the verdict (a harness that cannot
fail would make every mutant look killed). Then each curated mutant, in a subprocess over an overlay copy
of the reference (the working tree is never touched), runs the scenarios that name it in `must_fail_under`
first, then the rest of the catalogue. Mutants run in parallel, one process each. A stop request (Ctrl+C:
`sim.stopping`) starts no further mutant, and leaves unjudged those in progress: their children stopped
part-way, and a verdict needs every run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from sim import children, stopping


@dataclass
class MutantResult:
    name: str
    expected: list[str]
    killed_by: dict[str, str] = field(default_factory=dict)  # scenario -> replay command
    survived: list[str] = field(default_factory=list)
    stale: str | None = None
    seconds: float = 0.0

    @property
    def killed(self) -> bool:
        return bool(self.killed_by)

    def missed_expected(self) -> list[str]:
        return [scenario for scenario in self.expected if scenario not in self.killed_by]

    @property
    def verdict(self) -> str:
        """killed (by its expected killers), or what went wrong: STALE, SURVIVED, MISSED (killed, not by them)."""
        if self.stale:
            return "STALE"
        if not self.killed:
            return "SURVIVED"
        return "MISSED" if self.missed_expected() else "killed"


def sim_json(args: Sequence[str]) -> tuple[int, dict[str, Any] | None, str]:
    """`python -m sim ARGS --json` in a child process: its exit status, its document (None if it printed none), its stderr."""
    done = children.run([sys.executable, "-m", "sim", *args, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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


def sanity_pass(scenario: Path) -> str | None:
    """None if a forced failure is reported as a failure; otherwise what went wrong."""
    code, document, errors = sim_json(["run", str(scenario), "--runs", "1", "--no-shrink", "--force-fail"])
    if code == 1 and document and not document["passed"]:
        return None
    return f"a forced failure was not reported (exit {code}): {errors.strip()[:200]}"


def run_mutant(name: str, killers: list[Any], others: list[Any], out: Path) -> MutantResult:
    """One mutant: its expected killers first, then the rest of the catalogue, each group in one subprocess."""
    result = MutantResult(name, [scenario.name for scenario in killers])
    started = time.monotonic()
    for group in (killers, others):
        if not group:
            continue
        paths = [str(scenario.path) for scenario in group]
        code, document, errors = sim_json(["run", *paths, "--mutant", name, "--out", str(out / name), "--no-shrink"])
        if document is None:
            result.stale = errors.strip().splitlines()[-1] if errors.strip() else f"exit {code}"
            break
        for verdict in document["scenarios"]:
            if verdict["violation"] is not None:
                result.killed_by[verdict["scenario"]] = verdict["replay"]
            else:
                result.survived.append(verdict["scenario"])
    result.seconds = time.monotonic() - started
    return result


def kill_matrix(scenarios: Sequence[Any], mutants: Sequence[str], jobs: int, out: Path, *, claims_only: bool = False,
                on_done: Callable[[MutantResult], None] | None = None) -> list[MutantResult]:
    """Each mutant against the scenarios that claim it, then (unless `claims_only`) the rest, `jobs` mutants at a
    time; `on_done` hears of each finished mutant. After a stop request, only the mutants judged before it."""
    killers = {name: [s for s in scenarios if name in s.expect.must_fail_under] for name in mutants}

    def one(name: str) -> MutantResult | None:
        if stopping.requested():
            return None
        others = [] if claims_only else [s for s in scenarios if s not in killers[name]]
        result = run_mutant(name, killers[name], others, out)
        if stopping.requested():
            return None
        if on_done is not None:
            on_done(result)
        return result

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return [result for result in pool.map(one, mutants) if result is not None]


def render_matrix(results: Sequence[MutantResult], scenario_names: Sequence[str]) -> str:
    """Mutants down, scenarios across (by column number); X killed, . survived, - not run."""
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
        "missed_expected": result.missed_expected(), "killed_by": result.killed_by, "survived_in": result.survived,
        "seconds": round(result.seconds, 2),
    }


def claimed_mutants(scenarios: Sequence[Any]) -> list[str]:
    """Every mutant some scenario names in `must_fail_under`, sorted."""
    return sorted({name for scenario in scenarios for name in scenario.expect.must_fail_under})


def claim_problems(results: Sequence[MutantResult]) -> dict[str, list[str]]:
    """Scenario name -> why its `must_fail_under` does not hold: each claimed mutant that did not make it fail."""
    problems: dict[str, list[str]] = {}
    for result in results:
        for scenario in result.missed_expected():
            reason = f"is stale ({result.stale})" if result.stale else "did not make it fail"
            problems.setdefault(scenario, []).append(f"must_fail_under: mutant {result.name} {reason}")
    return problems
