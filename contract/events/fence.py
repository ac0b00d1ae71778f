"""Commit fence (`fence.py`)."""

from __future__ import annotations

from contract.events.base import Event, event, trace
from contract.ids import AttemptId


@event
class FenceSetupRefused(Event):
    """Lease setup was refused: the attempt was already cancelled or revoked."""

    kind = "fence.setup_refused"
    feeds = ("R3",)
    attempt: AttemptId


@event
class FenceBeginOk(Event):
    """A commit was admitted; the fence lock is held until `fence.finish`."""

    kind = "fence.begin_ok"
    feeds = ("R5", "R6", "R8")
    attempt: AttemptId


@event
class FenceBeginRefused(Event):
    """Commit admission was refused."""

    kind = "fence.begin_refused"
    feeds = ("R5", "R8")
    attempt: AttemptId
    reason: str = trace(note="`cancelled`, `revoked`, `hard_cancel`, `deadline` or `superseded` (a newer attempt of the compressor started its summary)")


@event
class FenceFinish(Event):
    """The commit's fence lock was released."""

    kind = "fence.finish"
    feeds = ("R6",)
    attempt: AttemptId


@event
class FenceCancelWon(Event):
    """A host timeout or a hard cancel won the fence: this attempt will never commit."""

    kind = "fence.cancel_won"
    feeds = ("R1", "R2")
    attempt: AttemptId
    hard: bool


@event
class FenceRevoked(Event):
    """The host revoked commit admission while unwinding."""

    kind = "fence.revoked"
    feeds = ("R5", "R6")
    attempt: AttemptId
    commit_in_flight: bool
