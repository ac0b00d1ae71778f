"""The yardstick every benchmark states CPU cost in: the raw loop's steps, measured in the same process.

Machines differ about 3x in speed, ratios do not: a cost stated as "this many raw-loop steps" means the same
on a laptop and on a CI runner, so a speed target can be written down once.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from sim.bench.raw_loop import RawLoop
from sim.bench.workload import PAIRS, ROUNDS, workload


def best_cpu_s(run: Callable[[], Any], repeats: int) -> float:
    """The least CPU time of `repeats` calls: other load on a shared machine only ever adds time."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def raw_steps_per_s(repeats: int = 5, pairs: int = PAIRS, rounds: int = ROUNDS) -> float:
    """The raw loop's steps per CPU second on the kernel benchmark's workload."""
    probe = RawLoop()
    probe.run(workload, pairs, rounds)
    return probe.steps / best_cpu_s(lambda: RawLoop().run(workload, pairs, rounds), repeats)
