"""The strategy interface: what every exploration strategy, replay included, implements.

Three calls, as in shuttle: begin an execution, pick the next task among the runnable ones, and draw a
number for a named random stream. The World records every answer in the decision list, so any strategy's
run can be replayed by `ReplayStrategy`: the kernel records task choices, the World records draws. PCT, bounded exhaustive search and Hypothesis-driven choice are
further implementations of the same three calls; the kernel never needs to know which one it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task

# One entry of a decision list: ("task", options, chosen_index) or ("draw", stream, bound, value).
Decision = tuple


class Strategy(Protocol):
    name: str

    def begin(self, seed: int) -> None:
        """Start a new execution with this root seed."""

    def choose_task(self, runnable: Sequence["Task"]) -> int:
        """Index of the task to run next; called only when two or more tasks can run."""

    def draw(self, stream: str, bound: int) -> int:
        """A number in [0, bound) for the named random stream."""
