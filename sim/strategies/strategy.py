"""The strategy interface: what every exploration strategy, replay included, implements.

As in shuttle: begin an execution, pick the next task among the runnable ones, and draw a number for a
named random stream; then end the execution. The kernel records every task choice and the World every
draw (`decisions.py`), so any strategy's run can be replayed by `ReplayStrategy`. A systematic search
also says when it has nothing new left to run (`exhausted`), which ends an exploration early; a sampling
strategy never runs out. The kernel never needs to know which strategy it runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task


class AccessObserver(Protocol):
    """What a strategy that reduces by conflicts hears from the thread runtime: what each running task touches."""

    def access(self, tid: int, target: Any, part: Any, kind: int) -> None: ...

    def record(self, tid: int, key: tuple[int, Any], kind: int) -> None: ...

    def boundary(self) -> None: ...


class Strategy(ABC):
    name: str
    systematic: ClassVar[bool] = False  # True for a search that enumerates a bounded space and can exhaust it

    @property
    def run_name(self) -> str:
        """What ran the current execution, as a run records it (a portfolio names its member too)."""
        return self.name

    @abstractmethod
    def begin(self, seed: int) -> None:
        """Start a new execution with this root seed."""

    @abstractmethod
    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        """Index of the task to run next; asked only when two or more tasks can run.

        `previous` is the task that ran the step before (None at the start and once the clock has moved).
        If it can go on, it is `runnable[-1]`, and switching away from it is a preemption.
        """

    @abstractmethod
    def draw(self, stream: str, bound: int) -> int:
        """A number in [0, bound) for the named random stream."""

    def end(self) -> None:  # noqa: B027  # an optional hook: most strategies expect nothing of the end
        """The execution finished; a strategy that holds expectations about it checks them here."""

    @property
    def exhausted(self) -> bool:
        """Whether a systematic search has run every execution in its space; never true for sampling."""
        return False

    def observe_threads(self) -> AccessObserver | None:
        """Called by the thread runtime as a run of a thread program begins: the observer of what its steps touch,
        or None when this strategy does not use it (then the runtime does not trace accesses at all)."""
        return None
