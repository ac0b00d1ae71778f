"""`python -m sim bench detection`: how many runs each strategy needs before a scenario catches its mutant.

For every curated mutant, each killer scenario (one that names the mutant in `must_fail_under`) is explored
under the mutant by each strategy from `root_seeds` starting points: root r runs seeds r*100000,
r*100000+1, ... until the first violation, at most `max_runs`. A search that never fails counts as
`max_runs` and is flagged. Each mutant runs in one overlay subprocess (`python -m sim detect --mutant NAME`)
that does all its scenarios, strategies and roots, so the mutated reference is the one imported.

Coverage is measured on the unmutated reference: for each strategy, the distinct event kinds each
scenario reaches over `coverage_runs` runs, summed over the catalogue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sim.bench.figures import runs_table, summary
from sim.core.words import counted
from sim.mutation.mutants import sim_document
from sim.scenario.model import Scenario
from sim.scenario.runner import explore_seeds
from sim.strategies.by_name import strategy_for

DETECTION_STRATEGIES = ("random", "pct", "portfolio")
ROOT_STRIDE = 100_000
HARD_FOR_RANDOM = 50  # a pair that random needs more median runs than this for is "hard"
REQUIRED_SPEEDUP = 5  # ... and on it PCT or the portfolio must need this many times fewer runs
PORTFOLIO_MEDIAN_TARGET = 10
PORTFOLIO_MAX_TARGET = 200


def runs_to_detect(scenario: Scenario, strategy: str, root: int, max_runs: int) -> int | None:
    """Runs until the first violation from root seed `root`, or None if `max_runs` runs all held."""
    first = root * ROOT_STRIDE
    verdict = explore_seeds(scenario, range(first, first + max_runs), strategy_for(strategy))
    return verdict.runs if verdict.failing is not None else None


def detect(scenarios: Sequence[Scenario], strategies: Sequence[str], root_seeds: int, max_runs: int) -> dict[str, Any]:
    """The subprocess's side, under one mutant: scenario -> strategy -> runs to detection per root seed."""
    return {
        scenario.name: {
            strategy: [runs_to_detect(scenario, strategy, root, max_runs) for root in range(root_seeds)]
            for strategy in strategies
        }
        for scenario in scenarios
    }


def _detect_under(mutant: str, killers: Sequence[Scenario], root_seeds: int, max_runs: int) -> dict[str, Any]:
    args = ["detect", *(str(s.path) for s in killers), "--seeds", str(root_seeds), "--max-runs", str(max_runs),
            "--mutant", mutant]
    return sim_document(args)


def coverage(scenarios: Sequence[Scenario], strategies: Sequence[str], runs: int,
             on_done: Callable[[str], None] | None = None) -> dict[str, dict[str, int]]:
    """Per strategy: distinct event kinds reached per scenario, summed, and the kinds reached anywhere."""
    result = {}
    for strategy in strategies:
        reached = [explore_seeds(s, range(runs), strategy_for(strategy), stop_at_first=False).coverage for s in scenarios]
        result[strategy] = {"marks": sum(map(len, reached)), "kinds": len(set().union(*reached))}
        if on_done is not None:
            on_done(f"coverage under {strategy}: {result[strategy]['kinds']} kinds")
    return result


def bench_detection(
    scenarios: Sequence[Scenario], mutants: Sequence[str], *, root_seeds: int, max_runs: int, coverage_runs: int, jobs: int,
    on_done: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Runs to detection per claimed mutant (one subprocess each, `jobs` at once), then coverage per strategy.

    `on_done` hears of each finished unit (a mutant, a strategy's coverage) as one line.
    """
    killers = {m: [s for s in scenarios if m in s.expect.must_fail_under] for m in mutants}
    claimed = [m for m in mutants if killers[m]]

    def measure(mutant: str) -> dict[str, Any]:
        document = _detect_under(mutant, killers[mutant], root_seeds, max_runs)
        if on_done is not None:
            measured = f"ERROR {document['error']}" if "error" in document else f"{counted(len(document), 'killer scenario')} measured"
            on_done(f"{mutant}: {measured}")
        return document

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        documents = dict(zip(claimed, pool.map(measure, claimed)))
    pairs = [
        {"mutant": mutant, "scenario": scenario,
         "strategies": {strategy: summary(runs, max_runs) for strategy, runs in by_strategy.items()}}
        for mutant, document in documents.items() if "error" not in document
        for scenario, by_strategy in document.items()
    ]
    return {
        "benchmark": "detection",
        "root_seeds": root_seeds,
        "max_runs": max_runs,
        "pairs": pairs,
        "errors": {mutant: document["error"] for mutant, document in documents.items() if "error" in document},
        "unclaimed": [mutant for mutant in mutants if mutant not in claimed],
        "targets": targets(pairs),
        "coverage_runs": coverage_runs,
        "coverage": coverage(scenarios, DETECTION_STRATEGIES, coverage_runs, on_done),
    }


def targets(pairs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The goals: the portfolio fast on every pair, and PCT or the portfolio far ahead where random is slow."""
    def figure(pair: dict[str, Any], strategy: str, key: str) -> float:
        return pair["strategies"][strategy][key]

    hard = [p for p in pairs if figure(p, "random", "median") > HARD_FOR_RANDOM]
    return {
        "portfolio_median_at_most_10": all(figure(p, "portfolio", "median") <= PORTFOLIO_MEDIAN_TARGET for p in pairs),
        "portfolio_max_at_most_200": all(figure(p, "portfolio", "max") <= PORTFOLIO_MAX_TARGET for p in pairs),
        "hard_for_random": [f"{p['mutant']} / {p['scenario']}" for p in hard],
        "pct_or_portfolio_5x_fewer_where_hard": all(
            REQUIRED_SPEEDUP * min(figure(p, "pct", "median"), figure(p, "portfolio", "median")) <= figure(p, "random", "median")
            for p in hard
        ),
        "trivial": all(r == 1 for p in pairs for s in p["strategies"].values() for r in s["runs"]),
    }


def render(result: dict[str, Any]) -> str:
    """The table: one row per (mutant, killer scenario), median/max runs to detection per strategy."""
    rows = [((pair["mutant"], pair["scenario"]), pair["strategies"]) for pair in result["pairs"]]
    lines = runs_table(("mutant", "scenario"), rows, DETECTION_STRATEGIES)
    lines.append("")
    lines += [f"{name}: {value}" for name, value in result["targets"].items()]
    lines += [f"coverage ({result['coverage_runs']} runs per scenario) {strategy}: {c['marks']} marks, {c['kinds']} kinds"
              for strategy, c in result["coverage"].items()]
    lines += [f"{mutant}: ERROR {error}" for mutant, error in result["errors"].items()]
    lines += [f"{mutant}: no killer scenario" for mutant in result["unclaimed"]]
    return "\n".join(lines)
