"""Reference SQLite session store: sessions, transcript rows, the compression lease, lineage and cooldowns.

Standard-library sqlite3 only; every public operation is one transaction and takes its time from the caller.
"""

from .errors import (
    CooldownRestoreMismatch,
    LeaseLostError,
    ParentChangedError,
    ParentEndedError,
    SessionClosedByCompression,
    SessionExistsError,
    StoreError,
    TitleInUseError,
    UnknownSessionError,
)
from .lineage import FORK_MARKERS
from .messages import MAYBE_WRITTEN
from .reasons import AUTOMATIC_END_REASONS, COMPRESSION_END, DELIBERATE_END_REASONS, EXPLICIT_CLOSE_REASONS, UNPUBLISHABLE_END_REASONS
from .rows import CooldownRow, LeaseRow, MessageRow, SessionRow
from .session_store import SessionStore

__all__ = [
    "AUTOMATIC_END_REASONS",
    "COMPRESSION_END",
    "DELIBERATE_END_REASONS",
    "EXPLICIT_CLOSE_REASONS",
    "FORK_MARKERS",
    "MAYBE_WRITTEN",
    "CooldownRestoreMismatch",
    "CooldownRow",
    "LeaseLostError",
    "LeaseRow",
    "MessageRow",
    "ParentChangedError",
    "ParentEndedError",
    "SessionClosedByCompression",
    "SessionExistsError",
    "SessionRow",
    "SessionStore",
    "StoreError",
    "TitleInUseError",
    "UNPUBLISHABLE_END_REASONS",
    "UnknownSessionError",
]
