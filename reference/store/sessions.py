"""Session rows: creation, lookup, frontend ends and the write guard every transcript write passes."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from .errors import SessionClosedByCompression, SessionExistsError, UnknownSessionError
from .reasons import KNOWN_END_REASONS
from .rows import SESSION_COLUMNS, SessionRow


def get(db: sqlite3.Connection, sid: str) -> SessionRow | None:
    row = db.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (sid,)).fetchone()
    return None if row is None else SessionRow.from_sql(row)


def require(db: sqlite3.Connection, sid: str) -> SessionRow:
    """The row a write is about to change; a missing one is a caller bug worth a typed error."""
    row = get(db, sid)
    if row is None:
        raise UnknownSessionError(sid)
    return row


def require_writable(db: sqlite3.Connection, sid: str) -> SessionRow:
    """Refuse transcript writes to a rotated session: they would land behind the live continuation."""
    row = require(db, sid)
    if row.rotated:
        raise SessionClosedByCompression(sid)
    return row


def expect_row_changed(cur: sqlite3.Cursor, sid: str) -> None:
    """An UPDATE keyed on a session id that touched nothing means the session does not exist."""
    if cur.rowcount == 0:
        raise UnknownSessionError(sid)


def insert(
    db: sqlite3.Connection,
    sid: str,
    *,
    now: float,
    parent: str | None,
    model_config: dict[str, Any],
    title: str | None,
    title_source: str | None,
) -> None:
    if get(db, sid) is not None:
        raise SessionExistsError(sid)
    if parent is not None:
        require(db, parent)
    db.execute(
        "INSERT INTO sessions (id, parent_id, started_at, model_config, title, title_source)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (sid, parent, now, json.dumps(model_config, sort_keys=True), title, title_source),
    )


def end(db: sqlite3.Connection, sid: str, *, now: float, reason: str) -> bool:
    """Stamp an end only on an open session, so a later stamp never rewrites an earlier reason."""
    if reason not in KNOWN_END_REASONS:
        raise ValueError(f"unknown end reason {reason!r}")
    require(db, sid)
    cur = db.execute(
        "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
        (now, reason, sid),
    )
    return cur.rowcount == 1


def ids(db: sqlite3.Connection) -> list[str]:
    return [sid for (sid,) in db.execute("SELECT id FROM sessions ORDER BY id")]


def live(db: sqlite3.Connection) -> list[SessionRow]:
    rows = db.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE ended_at IS NULL ORDER BY id")
    return [SessionRow.from_sql(row) for row in rows]


def children(db: sqlite3.Connection, sid: str) -> list[SessionRow]:
    rows = db.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE parent_id = ? ORDER BY started_at, id", (sid,)
    )
    return [SessionRow.from_sql(row) for row in rows]
