"""What the oracle may read of a target's store, as types: the rows, and the reads (`StoreView`).

The invariants judge a run by its history and by the state it left in the store; every system under test
(the reference, hermes-agent as released) answers these reads about its own database, in these row types,
so that no invariant reads a target's store through anything but this protocol. Rows are frozen values: no
reader can hold a cursor across a transaction or change what the next reader is told.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from contract.vocabulary import COMPRESSION_END


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
        return built(cls, (*row[:5], json.loads(row[5]), *row[6:]))

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
        return built(cls, (*head, bool(active), bool(compacted), bool(is_summary)))

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


def built(cls: type[Row], values: Iterable[Any]) -> Row:
    """A frozen row filled in field order straight into its `__dict__`: reads hand out rows by the thousand
    per run, and a frozen dataclass's `__init__` (one `object.__setattr__` per field) was most of their cost."""
    row = object.__new__(cls)
    row.__dict__.update(zip(cls.__dataclass_fields__, values))  # type: ignore[attr-defined]  # Row is a dataclass type, which a TypeVar cannot say
    return row


class StoreView(Protocol):
    """The reads an invariant may make of the store, each answering from committed state."""

    # Whether a session's title is stored with its source (who gave it); a store that keeps none shows every
    # `SessionRow.title_source` as None, and is judged on its titles alone.
    keeps_title_source: bool

    def session_ids(self) -> list[str]:
        """Every session id, sorted."""

    def get_session(self, sid: str) -> SessionRow | None: ...

    def live_sessions(self) -> list[SessionRow]:
        """The sessions not ended."""

    def children(self, sid: str) -> list[SessionRow]:
        """The sessions whose parent is `sid`."""

    def active_messages(self, sid: str, above: int = 0) -> list[MessageRow]:
        """The session's active rows with an id above `above`, by id."""

    def all_messages(self, sid: str, above: int = 0) -> list[MessageRow]:
        """Every row of the session (active or not) with an id above `above`, by id."""

    def active_watermark(self, sid: str) -> int:
        """The highest id among the session's active rows (0 for none)."""

    def lease_row(self, sid: str) -> LeaseRow | None: ...

    def cooldown_row(self, sid: str) -> CooldownRow: ...
