"""Replay of a recorded decision list; a list that no longer fits the code is a DivergenceError.

The recording must fit the run at every choice point and end when the run ends: a recording with
decisions left over when the run finishes diverged too (`end`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sim.kernel.decisions import Default, Draw, Recorded, TaskChoice
from sim.kernel.errors import DivergenceError
from sim.strategies.strategy import Strategy

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task


class ReplayStrategy(Strategy):
    name = "replay"

    def __init__(self, decisions: Sequence[Recorded]) -> None:
        self._decisions = list(decisions)
        self._position = 0

    def begin(self, seed: int) -> None:
        self._position = 0

    def _next(self, kind: type, wanted: str, now: str) -> Recorded:
        """The next recorded decision, which must be of `kind` or a default (answered with 0)."""
        position = self._position
        if position >= len(self._decisions):
            raise DivergenceError(f"decision {position}: the recording has ended, but the run asks for a {wanted} ({now})")
        decision = self._decisions[position]
        if not isinstance(decision, (kind, Default)):
            raise DivergenceError(f"decision {position}: the recording has {_describe(decision)}, but the run asks for a {wanted} ({now})")
        self._position += 1
        return decision

    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        names = ", ".join(task.name for task in runnable)
        decision = self._next(TaskChoice, "task choice", f"{len(runnable)} runnable: {names}")
        if isinstance(decision, TaskChoice) and decision.options != len(runnable):
            raise DivergenceError(
                f"decision {self._position - 1}: the recording chose option {decision.choice} of {decision.options} "
                f"runnable tasks, but now {len(runnable)} are runnable: {names}"
            )
        return decision.choice

    def draw(self, stream: str, bound: int) -> int:
        decision = self._next(Draw, "random draw", f"stream {stream!r}, bound {bound}")
        if isinstance(decision, Draw) and (decision.stream, decision.bound) != (stream, bound):
            raise DivergenceError(
                f"decision {self._position - 1}: the recording drew from stream {decision.stream!r} with bound "
                f"{decision.bound}, but the run draws from stream {stream!r} with bound {bound}"
            )
        return decision.choice

    def end(self) -> None:
        """A recording longer than the run also diverged."""
        left = len(self._decisions) - self._position
        if left:
            raise DivergenceError(f"the run ended after {self._position} decisions, but the recording has {left} more")


def _describe(decision: Recorded) -> str:
    if isinstance(decision, TaskChoice):
        return f"a task choice (option {decision.choice} of {decision.options})"
    assert isinstance(decision, Draw)
    return f"a random draw from stream {decision.stream!r}"
