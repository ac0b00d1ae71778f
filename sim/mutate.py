"""`python -m sim mutate`: the curated kill matrix.

First a forced-fail sanity pass: one scenario is run with every run made to fail, and the command must
report it, which proves that a failure travels from a subprocess to the verdict (a harness that cannot
fail would make every mutant look killed). Then each curated mutant, in a subprocess over an overlay copy
of the reference (the working tree is never touched), runs the scenarios that name it in `must_fail_under`
first, then the rest of the catalogue. Mutants run in parallel, one process each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from sim.scenario.runner import FORCE_FAIL_ENV


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


def _sim_json(args: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, dict[str, Any] | None, str]:
    done = subprocess.run([sys.executable, "-m", "sim", *args, "--json"], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    try:
        return done.returncode, json.loads(done.stdout), done.stderr
    except json.JSONDecodeError:
        return done.returncode, None, done.stderr


def sanity_pass(scenario: Path) -> str | None:
    """None if a forced failure is reported as a failure; otherwise what went wrong."""
    code, document, errors = _sim_json(["run", str(scenario), "--runs", "1", "--no-shrink"], {FORCE_FAIL_ENV: "1"})
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
        code, document, errors = _sim_json(["run", *paths, "--mutant", name, "--out", str(out / name), "--no-shrink"])
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


def kill_matrix(scenarios: Sequence[Any], mutants: Sequence[str], jobs: int, out: Path) -> list[MutantResult]:
    killers = {name: [s for s in scenarios if name in s.expect.must_fail_under] for name in mutants}

    def one(name: str) -> MutantResult:
        return run_mutant(name, killers[name], [s for s in scenarios if s not in killers[name]], out)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, mutants))


def render_matrix(results: Sequence[MutantResult], scenario_names: Sequence[str]) -> str:
    """Mutants down, scenarios across (by column number); X killed, . survived, - not run."""
    width = max((len(r.name) for r in results), default=6)
    lines = ["scenarios: " + ", ".join(f"{i + 1}={name}" for i, name in enumerate(scenario_names)), ""]
    lines.append(" " * width + "  " + "".join(f"{(i + 1) % 10}" for i in range(len(scenario_names))) + "  verdict   time")
    for result in results:
        cells = "".join("X" if n in result.killed_by else "." if n in result.survived else "-" for n in scenario_names)
        verdict = "STALE" if result.stale else "killed" if result.killed and not result.missed_expected() else "SURVIVED" if not result.killed else "MISSED"
        lines.append(f"{result.name:<{width}}  {cells}  {verdict:<8} {result.seconds:5.1f}s")
    return "\n".join(lines)


def result_json(result: MutantResult) -> dict[str, Any]:
    return {
        "mutant": result.name, "killed": result.killed, "stale": result.stale, "expected_killers": result.expected,
        "missed_expected": result.missed_expected(), "killed_by": result.killed_by, "survived_in": result.survived,
        "seconds": round(result.seconds, 2),
    }
