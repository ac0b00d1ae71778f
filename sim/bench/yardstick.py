"""The yardstick every benchmark states CPU cost in: the raw loop's steps, measured in the same process.

Machines differ about 3x in speed, ratios do not: a cost stated as "this many raw-loop steps" means the same
on a laptop and on a CI runner, so a speed target can be written down once.

A shared machine's speed also moves within one process, by a third within seconds (raw-loop probes a few
seconds apart read 0.79 M to 1.67 M steps/s in one run of `bench swarm --speed-only`). Two timings that are to
be divided by one another are therefore taken side by side (`interleaved_best`): the calls take turns, so
each ratio compares the same moments of the machine, and the least time of each still filters out load,
which only ever adds time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from sim.bench.raw_loop import RawLoop
from sim.bench.workload import PAIRS, ROUNDS, workload


def interleaved_best(calls: Sequence[Callable[[], Any]], repeats: int) -> list[float]:
    """Each call's least CPU time over `repeats` rounds in which every call runs once, in turn."""
    best = [float("inf")] * len(calls)
    for _ in range(repeats):
        for position, call in enumerate(calls):
            started = time.process_time()
            call()
            best[position] = min(best[position], time.process_time() - started)
    return best


def raw_probe(pairs: int = PAIRS, rounds: int = ROUNDS) -> None:
    """One run of the raw loop on the kernel benchmark's workload: the yardstick's unit of work."""
    RawLoop().run(workload, pairs, rounds)


@cache
def raw_probe_steps(pairs: int = PAIRS, rounds: int = ROUNDS) -> int:
    """The steps one `raw_probe` takes (the workload is fixed, so counted once)."""
    probe = RawLoop()
    probe.run(workload, pairs, rounds)
    return probe.steps


def raw_steps_per_s(repeats: int = 5) -> float:
    """The raw loop's steps per CPU second, on its own: for a figure that is not timed beside a probe."""
    (seconds,) = interleaved_best([raw_probe], repeats)
    return raw_probe_steps() / seconds
