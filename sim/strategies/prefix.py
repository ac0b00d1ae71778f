"""Lenient replay: follow a recorded decision list where it still fits, and take the default choice elsewhere.

A strict replay (`replay.py`) refuses a list that no longer fits the run. The shrinker needs the opposite:
every candidate list it tries, however mangled, must produce SOME run, so that it can judge the run and
keep the decisions the kernel actually recorded as the candidate's canonical list. Entries are consumed by
position; one of the right kind is followed (its index or value clamped into range), one of the wrong
kind, and everything past the end of the list, is answered with the default: task 0 and draws of 0.

Task 0 is the kernel's FIFO order, the schedule a run follows when nothing steers it, so every non-zero
choice is a deviation a person has to understand; a draw of 0 is the smallest value of its stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from sim.strategies.base import Decision, is_default

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task

DEFAULT_CHOICE = 0


class PrefixReplay:
    name = "prefix"

    def __init__(self, decisions: Sequence[Decision]) -> None:
        self._decisions = [tuple(d) for d in decisions]
        self._position = 0

    def begin(self, seed: int) -> None:
        self._position = 0

    def _recorded(self, kind: str) -> int:
        """The recorded number at the current position if the entry is of `kind`, else the default."""
        position = self._position
        self._position += 1
        if position >= len(self._decisions) or self._decisions[position][0] != kind:
            return DEFAULT_CHOICE
        return int(self._decisions[position][-1])

    def choose_task(self, runnable: Sequence["Task"]) -> int:
        return _clamp(self._recorded("task"), len(runnable))

    def draw(self, stream: str, bound: int) -> int:
        return _clamp(self._recorded("draw"), bound)


def _clamp(value: int, bound: int) -> int:
    return min(max(value, 0), bound - 1)


def non_default(decisions: Iterable[Decision]) -> int:
    """Choices other than task 0 or a draw of 0: each is a deviation from the unsteered run."""
    return sum(1 for decision in decisions if not is_default(decision))
