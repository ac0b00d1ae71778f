"""Cooldown (`cooldown.py`, `compactor.py`)."""

from __future__ import annotations

from contract.events.base import Event, event, trace
from contract.ids import AttemptId, SessionId


@event
class CooldownSet(Event):
    """A failure cooldown was recorded (the timeout ladder, a summary failure, a split failure)."""

    kind = "cooldown.set"
    feeds = ("R2", "R11")
    session: SessionId
    until_s: float = trace(key="until", note="the virtual time the cooldown lasts until")
    attempt: AttemptId
    error: str


@event
class CooldownPersistFailed(Event):
    """The durable cooldown record failed; the local deadline still holds."""

    kind = "cooldown.persist_failed"
    session: SessionId
    attempt: AttemptId
    error: str = trace(note="the exception type")


@event
class CooldownCleared(Event):
    """A success (or a forced attempt) cleared the cooldown."""

    kind = "cooldown.cleared"
    feeds = ("R2",)
    session: SessionId
    attempt: AttemptId


@event
class CooldownClearSkipped(Event):
    """A success-path clear was a no-op: the attempt was cancelled or superseded."""

    kind = "cooldown.clear_skipped"
    feeds = ("R2", "R21")
    session: SessionId
    attempt: AttemptId


@event
class CooldownRestored(Event):
    """A hard-cancel rollback wrote the raw pre-attempt cooldown row back."""

    kind = "cooldown.restored"
    feeds = ("R1",)
    session: SessionId
    attempt: AttemptId
