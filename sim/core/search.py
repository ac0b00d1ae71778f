"""The one loop over runs that every search shares (a program's, a scenario's, a swarm campaign's): which seeds
to run, for how long, under a frozen wall clock, and until when.

Sharding splits the seed space, not the work list, so machines need no coordination: shard I of N
(0 <= I < N) runs seeds first+I, first+I+N, first+I+2N, ... The N shards of one first seed are disjoint,
so no seed runs twice, and together they cover every seed from the first on. A budget is a number of runs
or CPU seconds, a systematic strategy that has covered its whole space ends the search early, and so does a
stop request (`sim.core.stopping`), between two runs.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sim.core import stopping
from sim.core.timefreeze import frozen_time
from sim.strategies.strategy import Strategy

R = TypeVar("R")


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


@dataclass
class Searched(Generic[R]):
    """What a search did: its runs, their CPU seconds, the last run's result, and whether a stop request ended it."""

    runs: int = 0
    cpu_s: float = 0.0  # this process's CPU time for the loop, the frozen clock's start included
    last: R | None = None
    interrupted: bool = False


def search(seeds: Iterable[int], run: Callable[[int], R], *, runs: int | None = None, time_budget_s: float | None = None,
           strategy: Strategy | None = None, batch: AbstractContextManager[Any] | None = None,
           until: Callable[[R], bool] = lambda _: False, on_run: Callable[[R], None] | None = None) -> Searched[R]:
    """`run(seed)` for each seed, inside one wall-clock freeze (and `batch`, what the runs share), until a result
    meets `until`, the budget (`runs` runs, `time_budget_s` CPU seconds) is spent, a systematic `strategy` has
    covered its space, or a stop request comes; `on_run` hears each result as it comes."""
    started = time.process_time()
    done: Searched[R] = Searched()
    allowed = within_budget(seeds, runs, time_budget_s)
    order = stopping.Until(allowed if strategy is None else until_exhausted(allowed, strategy))
    with frozen_time(), batch or nullcontext():
        for seed in order:
            done.last = run(seed)
            done.runs += 1
            if on_run is not None:
                on_run(done.last)
            if until(done.last):
                break
    done.interrupted = order.cut
    done.cpu_s = time.process_time() - started
    return done
