"""Turns and persistence (`agent.py`, `transcript.py`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from contract.events.base import Event, event, trace
from contract.ids import AttemptId, SessionId

EXTERNAL = "external"  # the `writer` of a write made by someone other than the agents (a gateway flush)


@event
class AppendOk(Event):
    """A batch of messages was appended (a turn's flush or a rotation's pre-publish flush)."""

    kind = "append.ok"
    feeds = ("R14", "R10")
    session: SessionId
    ids: list[int] = trace(note="the new row ids, in order")
    writer: str | None = trace(omit_if_none=True, default=None, note="`external` for a writer outside the agents; absent for an agent")


@event
class AppendFailed(Event):
    """An append raised; `SessionClosedByCompression` is the closed-session case."""

    kind = "append.failed"
    feeds = ("R1", "R14", "R15")
    session: SessionId | None
    error: str = trace(note="the exception type")
    writer: str | None = trace(omit_if_none=True, default=None, note="`external` for a writer outside the agents; absent for an agent")


@event
class TurnPersisted(Event):
    """One message of a turn became durable (after its append)."""

    kind = "turn.persisted"
    feeds = ("R10", "R12", "R18")
    session: SessionId
    caller_session: SessionId
    turn: int
    role: str
    row: int
    writer: str | None = trace(omit_if_none=True, default=None, note="`external` for a writer outside the agents; absent for an agent")


@event
class SessionAdopted(Event):
    """The agent (at turn start or in a flush) or an attempt (R19) moved to the compression tip."""

    kind = "session.adopted"
    feeds = ("R15", "R19")
    from_session: SessionId = trace(key="from")
    to_session: SessionId = trace(key="to")
    attempt: AttemptId | None = trace(omit_if_none=True, default=None, note="the adopting attempt; absent when the agent adopted")


@event
class SessionReopened(Event):
    """Turn start reopened an orphaned compression-ended session."""

    kind = "session.reopened"
    feeds = ("R20",)
    session: SessionId


@event
class SessionCloseCleared(Event):
    """Turn start cleared a stale explicit close (`tui_close`, ...): this agent still routes the session (#106459)."""

    kind = "session.close_cleared"
    feeds = ("R11",)
    session: SessionId
    reason: str = trace(note="the end reason cleared")


@event
class HardCancelRequested(Event):
    """`Agent.hard_interrupt()` was called (Ctrl+C)."""

    kind = "hard_cancel.requested"
    feeds = ("R1",)
    session: SessionId


@event
class HardCancelFinished(Event):
    """`Agent.hard_interrupt()` returned: the Ctrl+C's cancel of the active attempt is over (waited out behind an
    admitted commit, or won, the worker given its grace and the lease freed or its release tried)."""

    kind = "hard_cancel.finished"
    feeds = ("R1",)
    session: SessionId
    cancelled: bool = trace(note="the cancel won the attempt's fence")


@event
class HostStarted(Event):
    """`Agent.compress()` starts an attempt: a turn's automatic compaction, a `/compress`, or the recovery of a
    provider-proven context overflow (which may run inside a failure cooldown, R23)."""

    kind = "host.started"
    feeds = ("R2", "R23")
    attempt: AttemptId
    session: SessionId
    mode: str = trace(note="`automatic`, `forced` or `overflow`")


def transcript_fingerprint(entries: Iterable[tuple[Any, Any, Any]]) -> str:
    """A short digest of a transcript's (role, content, timestamp) entries in order: the reference digests its
    live list with it and an invariant the rows of a session, so the two can be compared."""
    content = json.dumps([list(entry) for entry in entries])
    return hashlib.sha256(content.encode()).hexdigest()[:16]


@event
class HostReturned(Event):
    """`Agent.compress()` is about to return to the turn loop (the transcripts are fingerprints of the caller's list:
    before the attempt, and after it as the attempt left it: a commit's whole list, else the caller's own messages)."""

    kind = "host.returned"
    feeds = ("R18", "R4")
    attempt: AttemptId
    status: str
    session: SessionId
    caller_session: SessionId
    transcript_before: str
    transcript_after: str


@event
class TurnContextOverflow(Event):
    """The model refused the turn's context as too long (`context_limit_tokens`): recovery compresses past the
    failure cooldown."""

    kind = "turn.context_overflow"
    feeds = ("R23",)
    session: SessionId
    tokens: int = trace(note="the context's estimated size")


@event
class TurnOverflowDeferred(Event):
    """Overflow recovery was blocked transiently (a cooldown, a backoff, a busy lease): no reply this turn, and
    no reset."""

    kind = "turn.overflow_deferred"
    feeds = ("R23",)
    session: SessionId
    reason: str = trace(note="the recovery attempt's reason")


@event
class SessionAutoReset(Event):
    """Compression was proven exhausted: the session ended as `session_reset` and the turn goes on in a fresh one."""

    kind = "session.auto_reset"
    feeds = ("R23",)
    from_session: SessionId = trace(key="from")
    to_session: SessionId = trace(key="to")
    reason: str = trace(note="the refusal that proved exhaustion: `ineffective`, `no_progress` or `would_grow`")
