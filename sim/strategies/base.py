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


# A choice that took the default (task 0, the kernel's FIFO order; a draw of 0) is not a decision anyone made.
# Repro files store only the others, each with its position among all choice points, so a decision list is
# as long as the number of deviations a person has to understand; `expand` restores the full sequence, with
# DEFAULT at the other points (replay answers 0 there, whatever kind of choice it is).
DEFAULT: Decision = ("default",)


def is_default(decision: Decision) -> bool:
    return decision[-1] == 0 or decision == DEFAULT


def sparse(decisions: "Sequence[Decision]") -> list[list]:
    """The non-default decisions, each as [position, *decision]."""
    return [[position, *decision] for position, decision in enumerate(decisions) if not is_default(decision)]


def expand(entries: "Sequence[Sequence]", points: int) -> list[Decision]:
    """The full decision sequence of `points` choice points from its sparse form."""
    full: list[Decision] = [DEFAULT] * points
    for position, *decision in entries:
        if not 0 <= position < points:
            raise ValueError(f"a decision at position {position} lies outside the run's {points} choice points")
        full[position] = tuple(decision)
    return full
