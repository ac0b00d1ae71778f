"""Frozen row values handed out by the store, so no caller can hold a cursor across a transaction."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, TypeVar

from .reasons import COMPRESSION_END

SESSION_COLUMNS = (
    "id, parent_id, started_at, ended_at, end_reason, model_config, message_count, title, title_source"
)
MESSAGE_COLUMNS = (
    "id, session_id, role, content, timestamp, platform_message_id, active, compacted, is_summary"
)
LEASE_COLUMNS = "session_id, holder, acquired_at, expires_at"
COOLDOWN_COLUMNS = "cooldown_until, cooldown_error, ineffective_count, fallback_streak"

# Every column a clone copies byte for byte: all but the identity and the liveness flags.
PAYLOAD_COLUMNS = "role, content, timestamp, platform_message_id, is_summary"


@dataclass(frozen=True)
class SessionRow:
    id: str
    parent_id: str | None
    started_at: float
    ended_at: float | None
    end_reason: str | None
    model_config: dict[str, Any]
    message_count: int
    title: str | None
    title_source: str | None

    @classmethod
    def from_sql(cls, row: tuple[Any, ...]) -> SessionRow:
        return _built(cls, (*row[:5], json.loads(row[5]), *row[6:]))

    @property
    def live(self) -> bool:
        return self.ended_at is None

    @property
    def rotated(self) -> bool:
        """Closed by compression: the session's lineage continues in a child."""
        return self.end_reason == COMPRESSION_END


@dataclass(frozen=True)
class MessageRow:
    id: int
    session_id: str
    role: str
    content: str | None
    timestamp: float
    platform_message_id: str | None
    active: bool
    compacted: bool
    is_summary: bool

    @classmethod
    def from_sql(cls, row: tuple[Any, ...]) -> MessageRow:
        *head, active, compacted, is_summary = row
        return _built(cls, (*head, bool(active), bool(compacted), bool(is_summary)))

    @property
    def payload(self) -> tuple[str, str | None, float, str | None, bool]:
        """What a clone must reproduce exactly; identity and liveness excluded."""
        return (self.role, self.content, self.timestamp, self.platform_message_id, self.is_summary)


@dataclass(frozen=True)
class LeaseRow:
    session_id: str
    holder: str
    acquired_at: float
    expires_at: float


@dataclass(frozen=True)
class CooldownRow:
    """The raw cooldown and breaker columns, kept whole so a rollback can put back exactly this."""

    until: float | None
    error: str | None
    ineffective_count: int
    fallback_streak: int
    exists: bool


MISSING_COOLDOWN = CooldownRow(until=None, error=None, ineffective_count=0, fallback_streak=0, exists=False)


Row = TypeVar("Row")


def _built(cls: type[Row], values: Iterable[Any]) -> Row:
    """A frozen row filled in field order straight into its `__dict__`: reads hand out rows by the thousand
    per run, and a frozen dataclass's `__init__` (one `object.__setattr__` per field) was most of their cost."""
    row = object.__new__(cls)
    row.__dict__.update(zip(cls.__dataclass_fields__, values))  # type: ignore[attr-defined]
    return row
