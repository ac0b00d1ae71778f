"""Transcript rows: appends, the watermark, and the row moves both commit paths are built from."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from . import lineage, sessions
from .errors import ParentEndedError
from .rows import MESSAGE_COLUMNS, PAYLOAD_COLUMNS, MessageRow

# The in-memory mark on a message dict whose earlier append raised: an error after that transaction's COMMIT
# (the connection dropped on the way back) leaves the row durable although the writer was told it failed.
MAYBE_WRITTEN = "_maybe_written"


def append(
    db: sqlite3.Connection, sid: str, msgs: Iterable[Mapping[str, Any]], *, now: float, refuse_ended: Collection[str] = (),
) -> list[int]:
    """A turn's write: refused only for a rotated or missing session, or one ended for a reason in
    `refuse_ended` (a rotation's pre-publish flush: it must not grow a parent the user closed on purpose).

    A user message whose platform message id already has a live row in the session is not written again: the
    gateway wrote it on receipt (#104653), and that row's id is returned as the message's own. Nor is any other
    message marked `MAYBE_WRITTEN` whose exact payload the session holds, live or summarized since: that is its
    own earlier write (an append that raised after its COMMIT, a commit that carried it; platform id rules).
    """
    # FIX appends-ignore-lease (R14/R1): the lease fences compressor against compressor; a turn never waits on it
    row = sessions.require_writable(db, sid)
    if row.end_reason in refuse_ended:
        raise ParentEndedError(f"parent {sid!r} already ended ({row.end_reason})")
    ids = []
    for msg in msgs:
        # FIX platform-message-written-once (R10): the gateway's receipt write and the turn's flush share the platform id, so one row serves both
        written = platform_message_row(db, sid, msg)
        if written is None and msg.get(MAYBE_WRITTEN) and msg.get("platform_message_id") is None:
            # FIX indeterminate-append-written-once (R10): an append reported failed may have committed; written again, the turn is live twice
            written = written_row_of(db, sid, msg)
        ids.append(insert(db, sid, [msg], now=now)[0] if written is None else written)
    recount(db, sid)
    return ids


def written_row_of(db: sqlite3.Connection, sid: str, msg: Mapping[str, Any]) -> int | None:
    """The row in `sid` with exactly `msg`'s role, content and timestamp, a live one first, if there is one."""
    found = db.execute(
        "SELECT id FROM messages WHERE session_id = ? AND role = ? AND content = ? AND timestamp = ?"
        " ORDER BY active DESC, id LIMIT 1",
        (sid, msg["role"], msg["content"], msg.get("timestamp")),
    ).fetchone()
    return None if found is None else found[0]


def platform_message_row(db: sqlite3.Connection, sid: str, msg: Mapping[str, Any]) -> int | None:
    """The row of the user message with `msg`'s platform message id: its live row in `sid`, else the row its
    conversation summarized since (in `sid`, or in a session `sid` continues by compression), if there is one."""
    platform_id = msg.get("platform_message_id")
    if msg["role"] != "user" or platform_id is None:
        return None
    live = _platform_row(db, [sid], platform_id, " AND active = 1")
    if live is not None:
        return live
    # FIX summarized-platform-message-written-once (R10): a receipt row another writer summarized is no live row; written again, the message is in the summary and live after later ones
    return _platform_row(db, lineage.continued_from(db, sid), platform_id, "")


def _platform_row(db: sqlite3.Connection, sids: list[str], platform_id: str, only: str) -> int | None:
    """The oldest user row with `platform_id` in `sids` (restricted by the SQL condition `only`), if any."""
    found = db.execute(
        f"SELECT id FROM messages WHERE session_id IN ({', '.join('?' * len(sids))}){only}"
        " AND role = 'user' AND platform_message_id = ? ORDER BY id LIMIT 1",
        (*sids, platform_id),
    ).fetchone()
    return None if found is None else found[0]


def inserted_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just wrote (sqlite3 leaves `lastrowid` None only before any INSERT)."""
    row_id = cursor.lastrowid
    assert row_id is not None, "an INSERT gave no row id"
    return row_id


def insert(db: sqlite3.Connection, sid: str, msgs: Iterable[Mapping[str, Any]], *, now: float) -> list[int]:
    """Insert active rows in order; a dict without a timestamp is stamped with the caller's `now`."""
    return [
        inserted_id(db.execute(
            f"INSERT INTO messages (session_id, {PAYLOAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (
                sid,
                msg["role"],
                msg["content"],
                msg.get("timestamp", now),
                msg.get("platform_message_id"),
                int(bool(msg.get("is_summary", False))),
            ),
        ))
        for msg in msgs
    ]


def clone(db: sqlite3.Connection, ids: Iterable[int], *, into: str) -> list[int]:
    """Copy rows as new active rows of `into`, in the given order, with fresh ids and the exact payload."""
    return [
        inserted_id(db.execute(
            f"INSERT INTO messages (session_id, {PAYLOAD_COLUMNS})"
            f" SELECT ?, {PAYLOAD_COLUMNS} FROM messages WHERE id = ?",
            (into, row_id),
        ))
        for row_id in ids
    ]


def carried_verbatim(db: sqlite3.Connection, ids: Iterable[int], msgs: Iterable[Mapping[str, Any]]) -> list[int]:
    """The rows of `ids`, in order, whose exact role, content and timestamp one of `msgs` carries."""
    kept = {(msg["role"], msg["content"], msg.get("timestamp")) for msg in msgs}
    query = "SELECT role, content, timestamp FROM messages WHERE id = ?"
    return [row_id for row_id in ids if tuple(db.execute(query, (row_id,)).fetchone()) in kept]


def active_ids_above(
    db: sqlite3.Connection, sid: str, watermark: int | None, ceiling: int | None = None
) -> list[int]:
    """Active ids in (watermark, ceiling], oldest first; an unknown watermark claims nothing."""
    if watermark is None:
        return []
    # FIX carried-rows-keep-their-order (R14): the rows a commit carries after its candidate are another writer's messages, cloned in the order they were sent
    rows = db.execute(
        "SELECT id FROM messages WHERE session_id = ?1 AND active = 1 AND id > ?2"
        " AND (?3 IS NULL OR id <= ?3) ORDER BY id",
        (sid, watermark, ceiling),
    )
    return [row_id for (row_id,) in rows]


def last_active_ids(db: sqlite3.Connection, sid: str, count: int, ceiling: int | None) -> list[int]:
    """The newest `count` active ids at or below `ceiling` (no bound when None), oldest first."""
    rows = db.execute(
        "SELECT id FROM messages WHERE session_id = ?1 AND active = 1"
        " AND (?2 IS NULL OR id <= ?2) ORDER BY id DESC LIMIT ?3",
        (sid, ceiling, count),
    )
    return sorted(row_id for (row_id,) in rows)


def retire_active(db: sqlite3.Connection, sid: str, superseded: Iterable[int]) -> None:
    """Deactivate the whole active set: `superseded` rows live on as copies (hidden from recall),
    the rest were summarized away (kept searchable)."""
    db.executemany(
        "UPDATE messages SET active = 0, compacted = 0 WHERE id = ? AND session_id = ? AND active = 1",
        [(row_id, sid) for row_id in superseded],
    )
    db.execute("UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ? AND active = 1", (sid,))


def recount(db: sqlite3.Connection, sid: str) -> None:
    """Keep message_count equal to the active-row count after every transcript write."""
    db.execute(
        "UPDATE sessions SET message_count ="
        " (SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND active = 1) WHERE id = ?1",
        (sid,),
    )


def active(db: sqlite3.Connection, sid: str, above: int = 0) -> list[MessageRow]:
    """The active rows with ids above `above`, oldest first: a row's payload never changes and ids only grow,
    so a reader that kept what it read up to an id can read on from there."""
    rows = db.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND active = 1 AND id > ? ORDER BY id", (sid, above)
    )
    return [MessageRow.from_sql(row) for row in rows]


def every(db: sqlite3.Connection, sid: str, above: int = 0) -> list[MessageRow]:
    """Every row with an id above `above`, active or not, oldest first (read on from an id as `active` is)."""
    rows = db.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND id > ? ORDER BY id", (sid, above))
    return [MessageRow.from_sql(row) for row in rows]


def watermark(db: sqlite3.Connection, sid: str) -> int:
    """Highest active id: rows above it were appended after a compressor took its snapshot."""
    (value,) = db.execute(
        "SELECT COALESCE(MAX(id), 0) FROM messages WHERE session_id = ? AND active = 1", (sid,)
    ).fetchone()
    return value
