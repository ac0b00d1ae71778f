"""What every exploration shares, for scenarios and for any program: which seeds to run, and for how long.

Sharding splits the seed space, not the work list, so machines need no coordination: shard I of N
(0 <= I < N) runs seeds first+I, first+I+N, first+I+2N, ... The N shards of one first seed are disjoint,
so no seed runs twice, and together they cover every seed from the first on. A budget is a number of runs
or CPU seconds, and a systematic strategy that has covered its whole space ends the search early.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sim.strategies.strategy import Strategy


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: every `count`-th seed, starting `index` seeds after the first."""

    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`I/N` with 0 <= I < N; ValueError naming the expected form otherwise."""
        index, slash, count = text.partition("/")
        if not (slash and index.isdigit() and count.isdigit() and int(index) < int(count)):
            raise ValueError(f"expected I/N with 0 <= I < N (like 0/4), got {text!r}")
        return cls(int(index), int(count))

    def seeds(self, first: int) -> Iterator[int]:
        return itertools.count(first + self.index, self.count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def within_budget(seeds: Iterable[int], runs: int | None, time_budget_s: float | None) -> Iterable[int]:
    """The seeds a budget allows: the first `runs` of them, and only while time is left.

    Time is this process's CPU time, as in every figure the tool reports: runs execute with the wall
    clock frozen to virtual time, and a single-threaded search spends its wall time on the CPU anyway.
    """
    if runs is not None:
        seeds = itertools.islice(seeds, runs)
    if time_budget_s is None:
        return seeds
    deadline = time.process_time() + time_budget_s
    return itertools.takewhile(lambda _: time.process_time() < deadline, seeds)


def exhaustion(strategy: Strategy) -> bool | None:
    """For a systematic search, whether it covered its whole bounded space; None for a sampling strategy."""
    return strategy.exhausted if strategy.systematic else None


def until_exhausted(seeds: Iterable[int], strategy: Strategy) -> Iterator[int]:
    """The seeds, until a systematic strategy has run its whole space."""
    for seed in seeds:
        if strategy.exhausted:
            return
        yield seed
