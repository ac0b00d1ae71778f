"""Preemption-bounded exhaustive search: every schedule within a preemption bound, each exactly once, then a stop.

Why: random and PCT runs can say "nothing found in N runs", never "nothing there". For a small program this
search can: it enumerates the schedules of at most `bound` preemptions and reports `exhausted` once every
one has run, so a clean result is a statement about the whole bounded space.

The bound counts preemptions as CHESS does (Musuvathi and Qadeer, PLDI 2007): a preemption is a switch away
from a task that could have continued. The default schedule runs the current task until it blocks or
finishes; when it does, choosing any runnable task is free (FIFO order, index 0, comes first). So letting
one task run far ahead costs nothing, and most concurrency bugs need only one or two preemptions.

The search is iterative context bounding: every schedule with 0 preemptions runs before any with 1, and
so on up to the bound, each level explored depth first. The first failing schedule it finds therefore has
the fewest preemptions of any failing schedule (`preemptions` tells how many the current run spent).

One object searches across runs: each `end` files the branches of the run that just finished, each
`begin` replays the choices leading to the next unexplored branch and then follows the default schedule.
The search is over schedules only: every random draw answers 0. A DFS run's task choices are rarely
index 0 (running on is index -1 in the kernel's FIFO order), so its repro files list more choices than a
random run's; they replay exactly all the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim.kernel.errors import DivergenceError
from sim.strategies.strategy import Strategy

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task

DEFAULT_BOUND = 2


class SearchExhausted(Exception):
    """Asked for another run after every schedule within the bound has run."""


@dataclass(frozen=True, slots=True)
class _Point:
    """One choice point of a run: how many tasks could run, which ran, and what running on would have been."""

    options: int
    chosen: int
    default: int
    preemptive: bool  # a task could have continued here, so any other choice is a preemption


class PreemptionBoundedDFS(Strategy):
    """Every schedule with at most `bound` preemptions, fewest preemptions first, each exactly once."""

    name = "dfs"
    systematic = True

    def __init__(self, bound: int = DEFAULT_BOUND) -> None:
        if bound < 0:
            raise ValueError(f"preemption bound must be at least 0, got {bound}")
        self.bound = bound
        self.executions = 0
        self.preemptions = 0  # spent by the current run
        self._levels: list[list[Iterator[tuple[_Point, ...]]]] = [[] for _ in range(bound + 1)]
        self._pending: tuple[tuple[_Point, ...], int] | None = None  # the next branch, once looked at
        self._prefix: tuple[_Point, ...] = ()
        self._path: list[_Point] = []

    @property
    def exhausted(self) -> bool:
        """Whether every schedule within the bound has run: no branch is left to explore."""
        return self.executions > 0 and self._peek() is None

    def begin(self, seed: int) -> None:
        if self.executions:
            branch = self._peek()
            if branch is None:
                raise SearchExhausted(f"all {self.executions} schedules within {self.bound} preemptions have run")
            self._pending = None
            self._prefix, self.preemptions = branch
        self._path = []
        self.executions += 1

    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        depth = len(self._path)
        options = len(runnable)
        if depth < len(self._prefix):
            point = self._forced(depth, options)
        else:
            can_continue = runnable[-1] is previous
            default = options - 1 if can_continue else 0
            point = _Point(options, default, default, can_continue)
        self._path.append(point)
        return point.chosen

    def draw(self, stream: str, bound: int) -> int:
        return 0

    def end(self) -> None:
        """File the branches of the run that just ended: free ones at its own level, preemptions one above."""
        start, spent = len(self._prefix), self.preemptions
        self._levels[spent].append(_branches(self._path, start, preemptive=False))
        if spent < self.bound:
            self._levels[spent + 1].append(_branches(self._path, start, preemptive=True))

    def _forced(self, depth: int, options: int) -> _Point:
        """The prefix's choice at `depth`; the same choices must offer the same tasks, or the tree is not a tree."""
        expected = self._prefix[depth]
        if expected.options != options:
            raise DivergenceError(
                f"decision {depth}: an earlier run offered {expected.options} runnable tasks here, this one offers "
                f"{options}: the program is not deterministic under its schedule"
            )
        return expected

    def _peek(self) -> tuple[tuple[_Point, ...], int] | None:
        """The next branch to run and the preemptions it spends, from the lowest level that has one."""
        if self._pending is None:
            for level, sources in enumerate(self._levels):
                while sources and self._pending is None:
                    branch = next(sources[-1], None)
                    if branch is None:
                        sources.pop()
                    else:
                        self._pending = (branch, level)
                if self._pending is not None:
                    break
        return self._pending


def _branches(path: list[_Point], start: int, *, preemptive: bool) -> Iterator[tuple[_Point, ...]]:
    """A run's untried siblings past its forced prefix, deepest first (depth-first order), made as needed."""
    for depth in reversed(range(start, len(path))):
        point = path[depth]
        if point.preemptive == preemptive:
            for alternative in range(point.options):
                if alternative != point.default:
                    yield (*path[:depth], _Point(point.options, alternative, point.default, preemptive))
