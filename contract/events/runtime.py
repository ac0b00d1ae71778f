"""The runtime's own (the simulator's kernel; trio records the isolated calls too).

Tasks that start and end, isolated calls abandoned by their caller, and a run the simulator stopped.
"""

from __future__ import annotations

from contract.events.base import Event, event, trace


@event
class TaskSpawn(Event):
    """A task was started (the record's task is its name; a pooled job's is `compress:<attempt>`)."""

    kind = "task.spawn"
    feeds = ("R8",)


@event
class TaskExit(Event):
    """A task finished."""

    kind = "task.exit"
    error: str | None = trace(omit_if_none=True, default=None, note="the exception type it ended with; absent if it returned")


@event
class IsolatedAbandoned(Event):
    """A caller stopped waiting for an isolated call: `compress:<attempt>` is a host giving up on its worker,
    `summary:<attempt>` a summary a hard cancel left running."""

    kind = "isolated.abandoned"
    feeds = ("R2", "R8")
    call: str


@event
class IsolatedDiscarded(Event):
    """An abandoned isolated call finished; what it returned or raised is discarded."""

    kind = "isolated.discarded"
    feeds = ("R2",)
    call: str
    failed: bool


@event
class RunStopped(Event):
    """The simulator stopped the run: a deadlock or an exhausted budget (the record's task is `kernel`)."""

    kind = "run.stopped"
    reason: str
