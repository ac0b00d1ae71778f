"""Lenient replay: follow a recorded decision list where it still fits, and take the default choice elsewhere.

A strict replay (`replay.py`) refuses a list that no longer fits the run. The shrinker needs the opposite:
every candidate list it tries, however mangled, must produce SOME run, so that it can judge the run and
keep the decisions the kernel actually recorded as the candidate's canonical list. Entries are consumed by
position; one of the right kind is followed (its choice clamped into range), one of the wrong kind, and
everything past the end of the list, is answered with the default: task 0 and draws of 0.

Task 0 is the kernel's FIFO order, the schedule a run follows when nothing steers it, so every non-zero
choice is a deviation a person has to understand; a draw of 0 is the smallest value of its stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sim.kernel.decisions import Draw, Recorded, TaskChoice
from sim.strategies.strategy import Strategy

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task

DEFAULT_CHOICE = 0


class PrefixReplay(Strategy):
    name = "prefix"

    def __init__(self, decisions: Sequence[Recorded]) -> None:
        self._decisions = list(decisions)
        self._position = 0

    def begin(self, seed: int) -> None:
        self._position = 0

    def _recorded(self, kind: type) -> int:
        """The recorded choice at the current position if the entry is of `kind`, else the default."""
        position = self._position
        self._position += 1
        if position >= len(self._decisions) or not isinstance(self._decisions[position], kind):
            return DEFAULT_CHOICE
        return self._decisions[position].choice

    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        return _clamp(self._recorded(TaskChoice), len(runnable))

    def draw(self, stream: str, bound: int) -> int:
        return _clamp(self._recorded(Draw), bound)


def _clamp(value: int, bound: int) -> int:
    return min(max(value, 0), bound - 1)
