"""The other tools' side of `bench classic --threads`: runs frontrun or interleave-test on the thread bugs.

Started by `sim/bench/peers.py` as a child process, because each tool needs a process of its own: frontrun
runs only under its own launcher (`frontrun python ...`), interleave-test only on Python 3.12 or newer. It
imports nothing of compaction-sim but `classic_threads.py`, loaded by its path, so that any Python can run
it. For every bug, strategy and root seed it searches up to `cap` runs for the first failure, and prints one
JSON document: the runs to the first failure (null if none within the cap), the runs made and the CPU seconds
they took (this process's, threads included, as the simulator's own figures are), and what stopped a search
that neither failed nor used its cap (a hang, an inconclusive run).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT_STRIDE = 100_000  # root r searches from seed r * ROOT_STRIDE, as the simulator's classic benchmark does
PER_RUN_TIMEOUT_S = 2.0


def load_bugs() -> Any:
    spec = importlib.util.spec_from_file_location("classic_threads", HERE / "classic_threads.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["classic_threads"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def frontrun_search(bugs: Any, name: str, strategy: str, root: int, cap: int) -> dict[str, Any]:
    import frontrun

    bug = bugs.BUGS[name]
    options: dict[str, Any] = {"max_executions": cap} if strategy == "dpor" else {"seed": root * ROOT_STRIDE, "max_attempts": cap}
    result = frontrun.explore(setup=bug.setup, workers=list(bug.workers), invariant=bugs.invariant(bug), strategy=strategy,
                              clock="virtual", reproduce_on_failure=0, deadlock_timeout=PER_RUN_TIMEOUT_S,
                              timeout_per_run=PER_RUN_TIMEOUT_S, **options)
    found = result.property_holds is False
    note = "" if result.property_holds is not None else (getattr(result, "inconclusive_reason", None) or "inconclusive")
    return {"first_failure": result.num_explored if found else None, "runs": result.num_explored, "note": str(note)[:120]}


def interleave_search(bugs: Any, name: str, strategy: str, root: int, cap: int) -> dict[str, Any]:
    import interleave_test

    program = bugs.program(bugs.BUGS[name])
    result = interleave_test.explore(program, iterations=cap, seed=root * ROOT_STRIDE, strategy=strategy, granularity="line",
                                     timeout=PER_RUN_TIMEOUT_S, include=[str(HERE / "classic_threads.py")],
                                     raise_on_failure=False)
    failure = result.failure
    if failure is None:
        return {"first_failure": None, "runs": result.schedules_run, "note": "exhausted" if result.exhausted else ""}
    found = failure.kind != "hang"  # a hang is the tool stuck on the program, not the bug found
    return {"first_failure": failure.iteration + 1 if found else None, "runs": result.schedules_run,
            "note": "" if found else f"hang: {failure.details}"[:120]}


TOOLS: dict[str, tuple[tuple[str, ...], Callable[..., dict[str, Any]], bool]] = {
    # tool: (its strategies, the search, whether its strategies are seeded)
    "frontrun": (("dpor", "random"), frontrun_search, True),
    "interleave-test": (("random", "pct", "dfs"), interleave_search, True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("tool", choices=sorted(TOOLS))
    parser.add_argument("--roots", type=int, default=20)
    parser.add_argument("--cap", type=int, default=2000)
    parser.add_argument("--bugs", default="", help="comma-separated bug names (default: all)")
    args = parser.parse_args()
    bugs = load_bugs()
    strategies, search, _ = TOOLS[args.tool]
    names = [name for name in args.bugs.split(",") if name] or list(bugs.BUGS)
    figures: dict[str, dict[str, Any]] = {}
    for name in names:
        for strategy in strategies:
            roots = 1 if strategy == "dpor" else args.roots  # a systematic search without a seed runs once
            searches = []
            for root in range(roots):
                started = time.process_time()
                try:
                    outcome = search(bugs, name, strategy, root, args.cap)
                except Exception as error:  # the tool's own failure to run the program is a figure too
                    outcome = {"first_failure": None, "runs": 0, "note": f"{type(error).__name__}: {error}"[:120]}
                outcome["cpu_s"] = time.process_time() - started
                searches.append(outcome)
            figures.setdefault(name, {})[f"{args.tool}-{strategy}"] = searches
        print(f"{args.tool}: {name} done", file=sys.stderr, flush=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
