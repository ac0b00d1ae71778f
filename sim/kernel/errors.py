"""Exceptions raised by the kernel, to code under test and to the harness."""

from __future__ import annotations

from collections.abc import Iterator

from sim.kernel.deadlock import BlockedTask, describe


class Cancelled(BaseException):
    """Delivered at an await point inside a cancelled scope; caught by the scope that was cancelled.

    A BaseException, as in trio, so that `except Exception` in code under test cannot swallow it.
    """


class TooSlowError(Exception):
    """Raised by `fail_after` when its deadline cancelled the body."""


class EndOfChannel(Exception):
    """A receive on a channel whose senders are all closed and whose buffer is empty."""


class SimulationError(Exception):
    """A run that could not finish normally; carries a report naming every unfinished task."""

    def __init__(self, message: str, report: list[str]) -> None:
        super().__init__(message if not report else message + "\n" + "\n".join(report))
        self.summary = message
        self.report = report


class Deadlock(SimulationError):
    """No task can run and no timer is pending, yet tasks remain blocked.

    `blocked` names each blocked task, what it waits on and who holds that; `cycle` is the circular wait
    among them, or empty when some task waits on something that nobody left can set (a lost wakeup).
    """

    def __init__(self, message: str, blocked: tuple[BlockedTask, ...], cycle: tuple[BlockedTask, ...]) -> None:
        super().__init__(message, describe(blocked, cycle))
        self.blocked = blocked
        self.cycle = cycle


class BudgetExceeded(SimulationError):
    """The step or virtual-time budget ran out before the run finished."""


class MemoryBudgetExceeded(BudgetExceeded):
    """The run passed a memory bound: more events than its history may keep, or (a scenario's) a store grown
    past its size; a run whose memory outpaces its steps (a summary that doubles at every compaction) would
    otherwise grow without end long before its step budget ran out."""


class Interrupted(KeyboardInterrupt):
    """The run was stopped from outside at once (a second Ctrl+C): it has no outcome and is no verdict on the code
    under test. A KeyboardInterrupt, so that code which cleans up after a Ctrl+C does so for it too."""


class DivergenceError(Exception):
    """A replayed decision list no longer fits what the code does at that step."""


def leaves(error: BaseException) -> Iterator[BaseException]:
    """The exceptions inside any nesting of exception groups, in order."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error


def unwrap(error: BaseException) -> BaseException:
    """The exception that failed a run (a task's, reaching the root task wrapped in one group per nursery it
    crossed), out of its exception groups: the first one that is not a Cancelled."""
    found = list(leaves(error))
    return next((leaf for leaf in found if not isinstance(leaf, Cancelled)), found[0])
