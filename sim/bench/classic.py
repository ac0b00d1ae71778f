"""`python -m sim bench classic`: runs each strategy needs to find each of eleven classic concurrency bugs.

With `--threads`, the bugs are the first ten written with plain threading, and three with SQLite
(`classic_threads.py`), run by the thread runtime; the other tools that control Python threads (frontrun,
interleave-test) search the very same code in the same run (`peers.py`), so runs to the first failure and
runs per CPU second stand side by side.

Every bug (`classic_bugs.py`) is explored by every strategy from `root_seeds` starting points: root r
runs seeds r*100000, r*100000+1, ... through `sim.explore` until the first failure, at most `cap` runs;
a search that never fails counts as `cap` and is flagged. Every failure found is replayed from its
decisions and must give the same trace, byte for byte; every deadlock must name its blocked tasks.

The preemption-bounded search explores schedules with fewer preemptions first, so the preemptions of
the first failing schedule it finds are the bug's minimal preemption count (`minimal_preemptions`); a
search that covered its whole bound without a failure proves the count is above the bound.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from typing import Any

from sim.bench import classic_threads
from sim.bench.classic_bugs import BUGS, Program
from sim.bench.figures import runs_table, summary
from sim.bench.peers import measure_peers
from sim.core.timefreeze import frozen_time
from sim.programs.exploration import explore, replay
from sim.programs.failure import Failure
from sim.strategies.by_name import strategy_for
from sim.strategies.dfs import PreemptionBoundedDFS
from sim.threads.patching import threads_patched

SINGLE_STRATEGIES = ("random", "pct-d1", "pct", "pct-d10", "task-pct-d10", "dfs")
STRATEGIES = (*SINGLE_STRATEGIES, "portfolio")
ROOT_STRIDE = 100_000
PORTFOLIO_FACTOR = 3  # the portfolio's median may be at most this many times the best single strategy's


def programs(threads: bool) -> dict[str, Any]:
    """The bugs by name: async programs, or (threads) plain programs over the thread runtime."""
    if not threads:
        return dict(BUGS)
    return {name: classic_threads.program(bug) for name, bug in classic_threads.BUGS.items()}


def search(program: Any, strategy: str, root: int, cap: int) -> tuple[int | None, Failure | None, Any, int]:
    """Runs until the first failure from root seed `root` (None if `cap` runs all passed), the failure, the
    strategy, and the runs made."""
    found = explore(program, strategy=strategy_for(strategy), runs=cap, seed=root * ROOT_STRIDE, shrink=False)
    return (found.runs if found.failed else None), found.failure, found.strategy, found.runs


def replays_exactly(program: Program, failure: Failure) -> bool:
    return replay(failure.decisions, program, seed=failure.seed).trace_jsonl() == failure.run.trace_jsonl()


def measure_bug(name: str, program: Any, root_seeds: int, cap: int, doc: str = "", setup_cpu_s: float = 0.0) -> dict[str, Any]:
    """One bug under every strategy and root: runs to detection, runs per CPU second, replay checks, and what
    the failures were. The searches run in the caller's batch (one wall-clock freeze, one patched standard
    library for a thread program), as a campaign's runs do, or in one of their own; each strategy's CPU time is
    its searches' plus `setup_cpu_s`, its share of the batch's setup; it starts after a full garbage collection
    (not counted), so that it does not pay for collecting the garbage of the strategy before it."""
    by_strategy: dict[str, dict[str, Any]] = {}
    failures: list[Failure] = []
    minimal: dict[str, Any] = {}
    for strategy in STRATEGIES:
        runs, made = [], 0
        gc.collect()  # the garbage of what ran before is not this strategy's to collect
        started = time.process_time()
        with frozen_time(), threads_patched():
            for root in range(root_seeds):
                count, failure, searcher, searched = search(program, strategy, root, cap)
                runs.append(count)
                made += searched
                failures += [failure] if failure is not None else []
                if strategy == "dfs" and root == 0:
                    minimal = _minimal_preemptions(failure, searcher)
        cpu_s = time.process_time() - started + setup_cpu_s
        by_strategy[strategy] = {**summary(runs, cap), "runs_per_cpu_s": round(made / cpu_s, 1)}
    deadlocks = [failure.deadlock for failure in failures if failure.deadlock is not None]
    return {
        "bug": name,
        "doc": doc or " ".join((program.__doc__ or "").split()),
        "outcomes": sorted({str(failure.outcome) for failure in failures}),
        "minimal_preemptions": minimal,
        "failures_not_replayed": sum(not replays_exactly(program, failure) for failure in failures),
        "deadlocks_without_report": sum(not deadlock.blocked for deadlock in deadlocks),
        "deadlock_cycles": sorted({_cycle(deadlock) for deadlock in deadlocks}),
        "strategies": by_strategy,
    }


def _cycle(deadlock: Any) -> str:
    """A deadlock's wait-for cycle as the tasks in it, or that there is none (a lost wakeup)."""
    if not deadlock.cycle:
        return "no cycle: a lost wakeup"
    return " -> ".join(entry.task for entry in deadlock.cycle)


def _minimal_preemptions(failure: Failure | None, searcher: PreemptionBoundedDFS) -> dict[str, Any]:
    """What the preemption-bounded search proved: the count of its first failing schedule, or a lower bound."""
    if failure is not None:
        return {"count": searcher.preemptions, "proved": True}
    return {"count": f">{searcher.bound}", "proved": searcher.exhausted}


def bench_classic(root_seeds: int = 20, cap: int = 2000, on_done: Callable[[str], None] | None = None, *,
                  threads: bool = False, peer_python: str | None = None) -> dict[str, Any]:
    """Every bug under every strategy, and with `threads` every peer tool too; `on_done` hears of each finished
    bug (and peer tool) as one line."""
    bugs = []
    docs = {name: bug.doc for name, bug in classic_threads.BUGS.items()} if threads else {}
    measured = programs(threads)
    setup_cpu_s = batch_setup_cpu_s()
    share_s = setup_cpu_s / (len(measured) * len(STRATEGIES))
    with frozen_time(), threads_patched():
        for name, program in measured.items():
            bugs.append(measure_bug(name, program, root_seeds, cap, docs.get(name, ""), share_s))
            if on_done is not None:
                on_done(_progress_line(bugs[-1]))
    result: dict[str, Any] = {"benchmark": "classic-threads" if threads else "classic", "root_seeds": root_seeds, "cap": cap, "bugs": bugs,
              "batch_setup_cpu_s": round(setup_cpu_s, 5), "targets": targets(bugs)}
    if threads:
        result["virtual_time"] = virtual_time()
        result["peers"] = measure_peers([bug["bug"] for bug in bugs], root_seeds, cap, peer_python, on_done)
        result["targets"].update(peer_targets(bugs, result["peers"]))
    return result


def batch_setup_cpu_s(probes: int = 5) -> float:
    """CPU seconds to open and close a batch (the wall-clock freeze, the patching and the scan of loaded modules),
    the most of `probes`: every search of the benchmark runs in one batch, and each strategy's figures are charged
    an equal share of this, so runs per CPU second count the setup a campaign pays once."""
    spent = []
    for _ in range(probes):
        started = time.process_time()
        with frozen_time(), threads_patched():
            pass
        spent.append(time.process_time() - started)
    return max(spent)


def virtual_time(runs: int = 200) -> dict[str, Any]:
    """Virtual seconds per wall second of a thread program that holds a lease for 300 virtual seconds."""
    started = time.perf_counter()
    found = explore(classic_threads.lease_for_five_minutes, runs=runs, shrink=False)
    wall_s = time.perf_counter() - started
    assert not found.failed, found
    return {"program": "lease_for_five_minutes", "runs": runs, "virtual_s_per_run": 300, "wall_s": round(wall_s, 3),
            "virtual_s_per_wall_s": round(runs * 300 / wall_s)}


def peer_targets(bugs: Sequence[dict[str, Any]], peers: dict[str, Any]) -> dict[str, Any]:
    """The goals against the other tools: every bug a tool finds found by the portfolio, in no more runs at the
    median than that tool's best strategy, and at least as many runs per CPU second as its fastest."""
    missed, more_runs, slower = [], [], []
    for bug in bugs:
        theirs = peers["bugs"][bug["bug"]]
        ours = bug["strategies"]["portfolio"]
        found = [figures for figures in theirs.values() if figures["undetected"] < len(figures["runs"])]
        if found and ours["undetected"] == len(ours["runs"]):
            missed.append(bug["bug"])
        if found:
            best = min(figures["median"] for figures in found)
            if ours["median"] > best:
                more_runs.append(f"{bug['bug']} ({ours['median']:g} vs {best:g})")
        fastest = max((figures["runs_per_cpu_s"] or 0 for figures in theirs.values()), default=0)
        if ours["runs_per_cpu_s"] < fastest:
            slower.append(f"{bug['bug']} ({ours['runs_per_cpu_s']:g} vs {fastest:g})")
    return {"peers_measured": dict(peers["tools"]), "portfolio_finds_every_bug_a_peer_finds": not missed,
            "bugs_where_a_peer_needs_fewer_runs_at_the_median": more_runs,
            "bugs_where_a_peer_makes_more_runs_per_cpu_second": slower}


def _complete(row: dict[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    """Every column of a row, a tool that did not run as a blank cell."""
    blank = {"median": float("nan"), "max": "-", "undetected": 0, "runs_per_cpu_s": None}
    return {column: row.get(column, blank) for column in columns}


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
    """The table: one row per bug, its minimal preemptions, median/max runs to detection per strategy and per
    peer tool's strategy; then runs per CPU second over all of a strategy's runs; then the targets."""
    peers = result.get("peers", {"bugs": {}})
    columns = [*STRATEGIES, *sorted({strategy for figures in peers["bugs"].values() for strategy in figures})]
    figures = [{**bug["strategies"], **peers["bugs"].get(bug["bug"], {})} for bug in result["bugs"]]
    rows = [((bug["bug"], str(bug["minimal_preemptions"]["count"])), _complete(row, columns))
            for bug, row in zip(result["bugs"], figures)]
    lines = runs_table(("bug", "preemptions"), rows, columns)
    lines += ["", "runs per CPU second:"]
    lines += [f"  {bug['bug']}: " + ", ".join(f"{column} {row[column].get('runs_per_cpu_s') or '-'}" for column in columns)
              for bug, (_, row) in zip(result["bugs"], rows)]
    lines.append("")
    lines += [f"{name}: {value}" for name, value in result["targets"].items()]
    return "\n".join(lines)
