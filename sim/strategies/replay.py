"""Replay of a recorded decision list; a list that no longer fits the code is a DivergenceError."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from sim.kernel.errors import DivergenceError
from sim.strategies.base import DEFAULT, Decision

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task


class ReplayStrategy:
    name = "replay"

    def __init__(self, decisions: Sequence[Decision]) -> None:
        self._decisions = [tuple(d) for d in decisions]
        self._position = 0

    def begin(self, seed: int) -> None:
        self._position = 0

    def _next(self, kind: str, wanted: str, now: str) -> Decision:
        if self._position >= len(self._decisions):
            raise DivergenceError(
                f"decision {self._position}: the recording has ended, but the run asks for a {wanted} ({now})"
            )
        decision = self._decisions[self._position]
        if decision[0] != kind:
            raise DivergenceError(
                f"decision {self._position}: the recording has {_describe(decision)}, but the run asks for a {wanted} ({now})"
            )
        self._position += 1
        return decision

    def _default(self) -> bool:
        """A point where the recording took the default: answer 0 whatever kind of choice it is now."""
        if self._position < len(self._decisions) and self._decisions[self._position] == DEFAULT:
            self._position += 1
            return True
        return False

    def choose_task(self, runnable: Sequence["Task"]) -> int:
        if self._default():
            return 0
        names = ", ".join(task.name for task in runnable)
        _, options, index = self._next("task", "task choice", f"{len(runnable)} runnable: {names}")
        if options != len(runnable):
            raise DivergenceError(
                f"decision {self._position - 1}: the recording chose option {index} of {options} runnable tasks, "
                f"but now {len(runnable)} are runnable: {names}"
            )
        return index

    def draw(self, stream: str, bound: int) -> int:
        if self._default():
            return 0
        _, recorded_stream, recorded_bound, value = self._next("draw", "random draw", f"stream {stream!r}, bound {bound}")
        if (recorded_stream, recorded_bound) != (stream, bound):
            raise DivergenceError(
                f"decision {self._position - 1}: the recording drew from stream {recorded_stream!r} with bound "
                f"{recorded_bound}, but the run draws from stream {stream!r} with bound {bound}"
            )
        return value

    def unused(self) -> int:
        """Decisions left over when the run ended: a recording longer than the run also diverged."""
        return len(self._decisions) - self._position


def _describe(decision: Decision) -> str:
    if decision[0] == "task":
        return f"a task choice (option {decision[2]} of {decision[1]})"
    return f"a random draw from stream {decision[1]!r}"
