"""The two kinds of decision a run records: which runnable task ran, and what a random draw answered.

A decision list is the run's choice sequence: replaying it reproduces the run exactly. Both kinds carry
`choice`, the number that was picked (a task's index in the kernel's FIFO order, a draw's value), so the
shrinker and the lenient replay can treat them alike; 0 is the default a run takes when nothing steers it.
`Default` marks a choice point that a sparse recording left out (it took the default), whatever its kind.
Their JSON form lives in `serialization.py` and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TaskChoice:
    """Option `choice` of `options` runnable tasks ran (the kernel interns these: recording allocates nothing)."""

    options: int
    choice: int

    def with_choice(self, choice: int) -> TaskChoice:
        return TaskChoice(self.options, choice)

    def __str__(self) -> str:
        return f"task {self.choice} of {self.options}"


@dataclass(frozen=True, slots=True)
class Draw:
    """The named random stream was asked for a number below `bound` and answered `choice`."""

    stream: str
    bound: int
    choice: int

    def with_choice(self, choice: int) -> Draw:
        return Draw(self.stream, self.bound, choice)

    def __str__(self) -> str:
        return f"draw {self.stream} < {self.bound}: {self.choice}"


@dataclass(frozen=True, slots=True)
class Default:
    """A choice point a sparse recording left out: it took the default, which replay answers with 0."""

    choice: int = 0

    def with_choice(self, choice: int) -> Default:
        return self

    def __str__(self) -> str:
        return "default"


Decision = TaskChoice | Draw
Recorded = TaskChoice | Draw | Default
DEFAULT = Default()


def is_default(decision: Recorded) -> bool:
    return decision.choice == 0


def non_default(decisions: Iterable[Recorded]) -> int:
    """Choices other than task 0 or a draw of 0: each is a deviation from the unsteered run."""
    return sum(1 for decision in decisions if decision.choice != 0)
