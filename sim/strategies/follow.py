"""Lenient replay by name: follow a recorded schedule of task names and per-stream draws in a changed run.

The shrinker removes drives and faults. Every drive is a task started at time 0, so removing one changes
the number of runnable tasks at the first choice points, and a decision list, which picks tasks by their
index in the runnable list, then steers every later choice to a different task (`PrefixReplay` keeps
positions, so the whole schedule after the first removed step is misread). A schedule of names survives
such an edit: each choice is "the k-th runnable task called N", each draw "the n-th answer of stream S".
A choice whose task is no longer there is skipped, looking a few entries ahead (`LOOKAHEAD`) for the next
task that can run, so the steps of a removed task fall out while the others keep their order.

`Recording` wraps any strategy and writes such a schedule of the run it steers, so the shrinker always
holds the schedule of its smallest run. Replayed unchanged, a recorded schedule gives back the same run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim.strategies.strategy import Strategy

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task

LOOKAHEAD = 8  # recorded choices skipped at most to find one whose task can run; a bound, not a tuning
DEFAULT_CHOICE = 0


@dataclass(frozen=True)
class TaskPick:
    """The `rank`-th of the runnable tasks named `name` ran."""

    name: str
    rank: int


@dataclass(frozen=True)
class Schedule:
    """What a run chose, by name: the picks in order, and each stream's draws in order."""

    picks: tuple[TaskPick, ...] = ()
    draws: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def renamed(self, rename: Callable[[str], str | None]) -> Schedule:
        """The same schedule with task names mapped; a name mapped to None drops its picks."""
        picks = []
        for pick in self.picks:
            name = rename(pick.name)
            if name is not None:
                picks.append(TaskPick(name, pick.rank))
        return Schedule(tuple(picks), self.draws)


def _pick(runnable: Sequence[Task], choice: int) -> TaskPick:
    name = runnable[choice].name
    return TaskPick(name, sum(1 for task in runnable[:choice] if task.name == name))


class Recording(Strategy):
    """Any strategy, with the schedule of the run it steers written down by name."""

    def __init__(self, inner: Strategy) -> None:
        self.inner = inner
        self.name = inner.name
        self._picks: list[TaskPick] = []
        self._draws: dict[str, list[int]] = {}

    def begin(self, seed: int) -> None:
        self._picks, self._draws = [], {}
        self.inner.begin(seed)

    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        choice = self.inner.choose_task(runnable, previous)
        self._picks.append(_pick(runnable, choice))
        return choice

    def draw(self, stream: str, bound: int) -> int:
        value = self.inner.draw(stream, bound)
        self._draws.setdefault(stream, []).append(value)
        return value

    def end(self) -> None:
        self.inner.end()

    def schedule(self) -> Schedule:
        return Schedule(tuple(self._picks), tuple((stream, tuple(values)) for stream, values in self._draws.items()))


class FollowSchedule(Strategy):
    """Replay a `Schedule` where it still fits; the default (task 0, a draw of 0) elsewhere."""

    name = "follow"

    def __init__(self, schedule: Schedule) -> None:
        self._schedule = schedule
        self._draws = dict(schedule.draws)
        self._position = 0
        self._drawn: dict[str, int] = {}

    def begin(self, seed: int) -> None:
        self._position, self._drawn = 0, {}

    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        picks = self._schedule.picks
        for position in range(self._position, min(self._position + LOOKAHEAD, len(picks))):
            pick = picks[position]
            named = [index for index, task in enumerate(runnable) if task.name == pick.name]
            if named:
                self._position = position + 1
                return named[min(pick.rank, len(named) - 1)]
        return DEFAULT_CHOICE

    def draw(self, stream: str, bound: int) -> int:
        count = self._drawn.get(stream, 0)
        self._drawn[stream] = count + 1
        values = self._draws.get(stream, ())
        return min(values[count], bound - 1) if count < len(values) else DEFAULT_CHOICE
