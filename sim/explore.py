"""`python -m sim explore`: search one scenario for a violation until a run or time budget runs out.

Sharding splits the seed space, not the work list, so machines need no coordination: shard I of N
(0 <= I < N) runs seeds first+I, first+I+N, first+I+2N, ... The N shards of one first seed are disjoint,
so no seed runs twice, and together they cover every seed from the first on.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from sim.scenario.model import Scenario
from sim.scenario.runner import RunReport, Verdict, explore_seeds, strategy_for
from sim.strategies.base import Strategy


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: every `count`-th seed, starting `index` seeds after the first."""

    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """`I/N` with 0 <= I < N; ValueError naming the expected form otherwise."""
        index, slash, count = text.partition("/")
        if not (slash and index.isdigit() and count.isdigit() and int(index) < int(count)):
            raise ValueError(f"expected I/N with 0 <= I < N (like 0/4), got {text!r}")
        return cls(int(index), int(count))

    def seeds(self, first: int) -> Iterator[int]:
        return itertools.count(first + self.index, self.count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass
class Exploration:
    """What one search did: the verdict over its runs, the strategy object that ran them, and where."""

    verdict: Verdict
    strategy: Strategy
    shard: Shard
    first_seed: int

    @property
    def exhausted(self) -> bool | None:
        """For an exhaustive search, whether it covered its whole bounded space; None for sampling strategies."""
        return getattr(self.strategy, "exhausted", None)


def explore(
    scenario: Scenario,
    strategy: str,
    *,
    first_seed: int,
    shard: Shard = Shard(),
    runs: int | None = None,
    time_budget: float | None = None,
    on_run: Callable[[RunReport], None] | None = None,
) -> Exploration:
    """Run this shard's seeds until the first violation, `runs` runs or `time_budget` CPU seconds.

    `on_run` hears of each finished run (progress lines).
    """
    searcher = strategy_for(strategy)
    seeds = _within_budget(shard.seeds(first_seed), runs, time_budget)
    return Exploration(explore_seeds(scenario, seeds, searcher, on_run=on_run), searcher, shard, first_seed)


def _within_budget(seeds: Iterator[int], runs: int | None, time_budget: float | None) -> Iterable[int]:
    """The seeds a budget allows: the first `runs` of them, and only while time is left.

    Time is this process's CPU time, as in every figure the tool reports: runs execute with the wall
    clock frozen to virtual time, and a single-threaded search spends its wall time on the CPU anyway.
    """
    if runs is not None:
        seeds = itertools.islice(seeds, runs)
    if time_budget is None:
        return seeds
    deadline = time.process_time() + time_budget
    return itertools.takewhile(lambda _: time.process_time() < deadline, seeds)
