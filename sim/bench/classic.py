"""`python -m sim bench classic`: runs each strategy needs to find each of ten classic concurrency bugs.

Every bug (`classic_bugs.py`) is explored by every strategy from `root_seeds` starting points: root r
runs seeds r*100000, r*100000+1, ... through `sim.explore` until the first failure, at most `cap` runs;
a search that never fails counts as `cap` and is flagged. Every failure found is replayed from its
decisions and must give the same trace, byte for byte; every deadlock must name its blocked tasks.

The preemption-bounded search explores schedules with fewer preemptions first, so the preemptions of
the first failing schedule it finds are the bug's minimal preemption count (`minimal_preemptions`); a
search that covered its whole bound without a failure proves the count is above the bound.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from sim.bench.classic_bugs import BUGS, Program
from sim.bench.figures import runs_table, summary
from sim.exploration import explore, replay
from sim.failure import Failure
from sim.strategies.dfs import PreemptionBoundedDFS
from sim.strategies.registry import strategy_for

SINGLE_STRATEGIES = ("random", "pct-d1", "pct", "pct-d10", "dfs")
STRATEGIES = (*SINGLE_STRATEGIES, "portfolio")
ROOT_STRIDE = 100_000
PORTFOLIO_FACTOR = 3  # the portfolio's median may be at most this many times the best single strategy's


def search(program: Program, strategy: str, root: int, cap: int) -> tuple[int | None, Failure | None, Any]:
    """Runs until the first failure from root seed `root` (None if `cap` runs all passed), the failure, the strategy."""
    found = explore(program, strategy=strategy_for(strategy), runs=cap, seed=root * ROOT_STRIDE, repro_dir=None)
    return (found.runs if found.failed else None), found.failure, found.strategy


def replays_exactly(program: Program, failure: Failure) -> bool:
    return replay(failure.decisions, program, seed=failure.seed).trace_jsonl() == failure.run.trace_jsonl()


def measure_bug(name: str, program: Program, root_seeds: int, cap: int) -> dict[str, Any]:
    """One bug under every strategy and root: runs to detection, replay checks, and what the failures were."""
    by_strategy: dict[str, list[int | None]] = {}
    outcomes: set[str] = set()
    not_replayed, deadlocks_unexplained = 0, 0
    minimal: dict[str, Any] = {}
    for strategy in STRATEGIES:
        runs = []
        for root in range(root_seeds):
            count, failure, searcher = search(program, strategy, root, cap)
            runs.append(count)
            if failure is not None:
                outcomes.add(str(failure.outcome))
                not_replayed += not replays_exactly(program, failure)
                deadlocks_unexplained += failure.deadlock is not None and not failure.deadlock.blocked
            if strategy == "dfs" and root == 0:
                minimal = _minimal_preemptions(failure, searcher)
        by_strategy[strategy] = runs
    return {
        "bug": name,
        "doc": " ".join((program.__doc__ or "").split()),
        "outcomes": sorted(outcomes),
        "minimal_preemptions": minimal,
        "failures_not_replayed": not_replayed,
        "deadlocks_without_report": deadlocks_unexplained,
        "strategies": {strategy: summary(runs, cap) for strategy, runs in by_strategy.items()},
    }


def _minimal_preemptions(failure: Failure | None, searcher: PreemptionBoundedDFS) -> dict[str, Any]:
    """What the preemption-bounded search proved: the count of its first failing schedule, or a lower bound."""
    if failure is not None:
        return {"count": searcher.preemptions, "proved": True}
    return {"count": f">{searcher.bound}", "proved": searcher.exhausted}


def bench_classic(root_seeds: int = 20, cap: int = 2000, on_done: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every bug under every strategy; `on_done` hears of each finished bug as one line."""
    bugs = []
    for name, program in BUGS.items():
        bugs.append(measure_bug(name, program, root_seeds, cap))
        if on_done is not None:
            on_done(_progress_line(bugs[-1]))
    return {"benchmark": "classic", "root_seeds": root_seeds, "cap": cap, "bugs": bugs, "targets": targets(bugs)}


def _progress_line(bug: dict[str, Any]) -> str:
    figures = ", ".join(f"{s} {f['median']:g}/{f['max']}" for s, f in bug["strategies"].items())
    return f"{bug['bug']}: {figures}"


def targets(bugs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The goals: the portfolio finds everything and stays near the best single strategy; dfs finds what its bound allows."""
    def best_single(bug: dict[str, Any]) -> float:
        return min(bug["strategies"][s]["median"] for s in SINGLE_STRATEGIES)

    shallow = [b for b in bugs if b["minimal_preemptions"]["proved"] and isinstance(b["minimal_preemptions"]["count"], int)
               and b["minimal_preemptions"]["count"] <= 2]
    return {
        "portfolio_finds_every_bug_from_every_root": all(b["strategies"]["portfolio"]["undetected"] == 0 for b in bugs),
        "portfolio_median_within_3x_of_best_single": all(
            b["strategies"]["portfolio"]["median"] <= PORTFOLIO_FACTOR * best_single(b) for b in bugs),
        "worst_portfolio_ratio": max(b["strategies"]["portfolio"]["median"] / best_single(b) for b in bugs),
        "bugs_with_at_most_2_preemptions": [b["bug"] for b in shallow],
        "dfs_finds_every_bug_with_at_most_2_preemptions": all(b["strategies"]["dfs"]["undetected"] == 0 for b in shallow),
        "every_failure_replays_exactly": all(b["failures_not_replayed"] == 0 for b in bugs),
        "every_deadlock_reported": all(b["deadlocks_without_report"] == 0 for b in bugs),
    }


def render(result: dict[str, Any]) -> str:
    """The table: one row per bug, its minimal preemptions, median/max runs to detection per strategy."""
    rows = [((bug["bug"], str(bug["minimal_preemptions"]["count"])), bug["strategies"]) for bug in result["bugs"]]
    lines = runs_table(("bug", "preemptions"), rows, STRATEGIES)
    lines.append("")
    lines += [f"{name}: {value}" for name, value in result["targets"].items()]
    return "\n".join(lines)
