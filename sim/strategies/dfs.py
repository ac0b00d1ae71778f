"""Delay-bounded exhaustive search: every schedule within a delay budget, each exactly once, then a stop.

Why: random and PCT runs can say "nothing found in N runs", never "nothing there". For a small scenario
this search can: it walks the tree of scheduling choices depth first and reports `exhausted` once every
schedule within the budget has run, so a clean result is a statement about the whole bounded space.

The bound is delay bounding (Emmi, Qadeer and Rakamaric, POPL 2011) over the kernel's own deterministic
schedule, which runs the first runnable task (index 0, FIFO order). Choosing index i instead spends i
delays (skipping i tasks); with two runnable tasks, the common case, that is one delay per non-default
choice. A run spends at most `budget` delays. Most concurrency bugs need few delays, and the number of
schedules grows polynomially in the run length for a fixed budget, not exponentially.

One object searches across runs: each `begin` replays the choices leading to the next unexplored branch
and extends it with index 0. The search is over schedules only: every random draw answers 0, the stream's
first value, which arms every probability trigger and fires it at each hit (a draw below p * bound fires).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from sim.kernel.errors import DivergenceError

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task

DEFAULT_BUDGET = 2


class SearchExhausted(Exception):
    """Asked for another run after every schedule within the budget has run."""


@dataclass(frozen=True)
class _Choice:
    options: int
    chosen: int
    spent: int  # delays spent before this choice


class DelayBoundedDFS:
    """Depth-first search over schedules spending at most `budget` delays per run."""

    name = "dfs"

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        if budget < 0:
            raise ValueError(f"delay budget must be at least 0, got {budget}")
        self.budget = budget
        self.executions = 0
        self._prefix: list[_Choice] = []
        self._path: list[_Choice] = []

    @property
    def exhausted(self) -> bool:
        """Whether every schedule within the budget has run: no branch is left to explore."""
        return self.executions > 0 and self._next_prefix() is None

    def begin(self, seed: int) -> None:
        if self.executions:
            prefix = self._next_prefix()
            if prefix is None:
                raise SearchExhausted(f"all {self.executions} schedules within {self.budget} delays have run")
            self._prefix = prefix
        self._path = []
        self.executions += 1

    def choose_task(self, runnable: Sequence["Task"]) -> int:
        depth = len(self._path)
        spent = self._path[-1].spent + self._path[-1].chosen if self._path else 0
        chosen = self._forced(depth, len(runnable)) if depth < len(self._prefix) else 0
        self._path.append(_Choice(len(runnable), chosen, spent))
        return chosen

    def draw(self, stream: str, bound: int) -> int:
        return 0

    def _forced(self, depth: int, options: int) -> int:
        """The prefix's choice at `depth`; the same choices must offer the same tasks, or the tree is not a tree."""
        expected = self._prefix[depth]
        if expected.options != options:
            raise DivergenceError(
                f"decision {depth}: an earlier run offered {expected.options} runnable tasks here, this one "
                f"offers {options}: the scenario is not deterministic under its schedule"
            )
        return expected.chosen

    def _next_prefix(self) -> list[_Choice] | None:
        """The deepest choice of the last run with an untried sibling within the budget, that sibling taken."""
        for depth in reversed(range(len(self._path))):
            choice = self._path[depth]
            sibling = choice.chosen + 1
            if sibling < choice.options and choice.spent + sibling <= self.budget:
                return [*self._path[:depth], _Choice(choice.options, sibling, choice.spent)]
        return None
