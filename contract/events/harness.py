"""The harness's own moves (`sim/scenario/`).

Processes that start, crash and restart; a frontend's end stamp; writers outside the agents.
"""

from __future__ import annotations

from contract.events.base import Event, event, trace
from contract.ids import SessionId


@event
class ProcessStarted(Event):
    """A second process started (the `second_process` fault), or a real stress worker did."""

    kind = "process.started"
    feeds = ("R3", "R19")
    process: str
    pid: int
    slot: str | None = trace(omit_if_none=True, default=None, note="a stress worker's slot (`w1` ...); absent in a simulation")


@event
class ProcessCrashed(Event):
    """A simulated process died: its tasks stopped, its pid is dead from now on (no cleanup ran, what it
    committed stays). A real stress worker killed by SIGKILL is recorded so by the stress parent."""

    kind = "process.crashed"
    feeds = ("R24",)
    process: str = trace(note="a stress worker's is named by the log reader, from its own `process.started`")
    pid: int
    start: int | None = trace(
        omit_if_none=True, default=None,
        note="a simulated process's start (its holder ids' `start=`): a later process on its recycled pid has another; absent for a stress worker",
    )
    slot: str | None = trace(omit_if_none=True, default=None, note="a stress worker's slot; absent in a simulation")


@event
class ProcessRestarted(Event):
    """A crashed process came back as a new incarnation (a new pid, attempts numbered afresh), once its agents
    have reopened their sessions."""

    kind = "process.restarted"
    feeds = ("R24",)
    process: str
    pid: int


@event
class FrontendSessionEnded(Event):
    """A frontend stamped a session as ended (the `end_session` drive)."""

    kind = "frontend.session_ended"
    feeds = ("R11",)
    session: SessionId
    reason: str | None = trace(note="null: the frontend's default stamp")


@event
class FrontendCommandFailed(Event):
    """A command the user gave (/compress, /title, ending a session) failed, and the frontend showed its error."""

    kind = "frontend.command_failed"
    agent: str
    command: str
    error: str = trace(note="`<exception type>: <message>`")


@event
class ExternalRotated(Event):
    """A writer that takes no lease rotated the live head of a lineage (the `unleased_rotation` fault)."""

    kind = "external.rotated"
    feeds = ("R19",)
    parent: SessionId
    child: SessionId


@event
class ExternalRotationSkipped(Event):
    """The lease-less writer found no live head to rotate."""

    kind = "external.rotation_skipped"
    session: SessionId | None
