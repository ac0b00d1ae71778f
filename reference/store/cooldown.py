"""Durable compression cooldown and breaker counters (columns on the session row)."""

from __future__ import annotations

import dataclasses
import sqlite3

from . import sessions
from .errors import CooldownRestoreMismatch, UnknownSessionError
from .rows import COOLDOWN_COLUMNS, MISSING_COOLDOWN, CooldownRow

TIMEOUT_ERROR = "timeout:"  # how a host's timeout record names its error (the budget follows)


def record(db: sqlite3.Connection, sid: str, until: float, error: str) -> None:
    """Record a failure cooldown; concurrent recorders keep the later deadline and its error."""
    # FIX cooldown-merge-max (R2): a late worker's shorter deadline must not cut the host's timeout cooldown short
    cur = db.execute(
        "UPDATE sessions SET"
        " cooldown_error = CASE WHEN cooldown_until > ?1 THEN cooldown_error ELSE ?2 END,"
        " cooldown_until = CASE WHEN cooldown_until > ?1 THEN cooldown_until ELSE ?1 END"
        " WHERE id = ?3",
        (until, error, sid),
    )
    sessions.expect_row_changed(cur, sid)


def active(db: sqlite3.Connection, sid: str, *, now: float) -> tuple[float, str | None] | None:
    """The cooldown still in force at `now`; an expired deadline blocks nothing."""
    found = db.execute(
        "SELECT cooldown_until, cooldown_error FROM sessions WHERE id = ? AND cooldown_until > ?", (sid, now)
    ).fetchone()
    return None if found is None else (found[0], found[1])


def raw(db: sqlite3.Connection, sid: str) -> CooldownRow:
    """The row exactly as stored, expired or not, so a rollback can snapshot and later restore it."""
    found = db.execute(f"SELECT {COOLDOWN_COLUMNS} FROM sessions WHERE id = ?", (sid,)).fetchone()
    if found is None:
        return MISSING_COOLDOWN
    until, error, ineffective_count, fallback_streak = found
    return CooldownRow(until=until, error=error, ineffective_count=ineffective_count, fallback_streak=fallback_streak,
                       exists=True)


def restore(db: sqlite3.Connection, sid: str, row: CooldownRow) -> None:
    """Put back a snapshot exactly, earlier deadline or empty row included, except a host's later timeout record."""
    row = _keeping_later_timeout(raw(db, sid), row)
    # FIX cooldown-exact-restore (R1): a rollback writes the raw pre-attempt row, then proves it by reading it back
    db.execute(
        "UPDATE sessions SET cooldown_until = ?, cooldown_error = ?, ineffective_count = ?, fallback_streak = ?"
        " WHERE id = ?",
        (row.until, row.error, row.ineffective_count, row.fallback_streak, sid),
    )
    stored = raw(db, sid)
    if stored != row:
        raise CooldownRestoreMismatch(f"cooldown row of {sid!r} reads back as {stored}, wrote {row}")


def _keeping_later_timeout(current: CooldownRow, snapshot: CooldownRow) -> CooldownRow:
    """The snapshot, with the deadline of a timeout or a failed split recorded since it was read. Only a host records
    a timeout, never the rolled-back attempt's own (a rollback after its own timeout record keeps the whole row), and
    only an admitted commit fails a split, never a rolled-back one's: such a record is another attempt's."""
    later = current.until is not None and (snapshot.until is None or current.until > snapshot.until)
    # FIX rollback-keeps-later-timeout (R2): erasing another attempt's timeout or split-failure record lets the next turn re-enter the route that just failed
    if later and (current.error or "").startswith((TIMEOUT_ERROR, "session_split_failed:")):
        return dataclasses.replace(snapshot, until=current.until, error=current.error)
    return snapshot


def clear(db: sqlite3.Connection, sid: str) -> None:
    cur = db.execute("UPDATE sessions SET cooldown_until = NULL, cooldown_error = NULL WHERE id = ?", (sid,))
    sessions.expect_row_changed(cur, sid)


def bump_ineffective(db: sqlite3.Connection, sid: str) -> int:
    """Count an ineffective compaction in one statement, so concurrent strikes are never lost."""
    returned = db.execute(
        "UPDATE sessions SET ineffective_count = ineffective_count + 1 WHERE id = ? RETURNING ineffective_count",
        (sid,),
    ).fetchall()
    if not returned:
        raise UnknownSessionError(sid)
    return returned[0][0]


def reset_ineffective(db: sqlite3.Connection, sid: str) -> None:
    cur = db.execute("UPDATE sessions SET ineffective_count = 0 WHERE id = ?", (sid,))
    sessions.expect_row_changed(cur, sid)
