"""The unsteered schedule: always the first runnable task (the kernel's FIFO order), every draw 0.

Nothing deviates, so a run under it is the one a shrunk failure is measured against, and what a program does
when no strategy steers it; it is one schedule, so a search under it has run its whole space after one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sim.strategies.strategy import Strategy

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task


class Fifo(Strategy):
    name = "fifo"
    systematic = True

    def __init__(self) -> None:
        self._runs = 0

    def begin(self, seed: int) -> None:
        self._runs += 1

    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        return 0

    def draw(self, stream: str, bound: int) -> int:
        return 0

    def end(self) -> None:
        """Nothing to learn: the next run would be this one again."""

    @property
    def exhausted(self) -> bool:
        return self._runs > 0
