"""Tables, connection setup and the plain-data dump that invariant checkers read."""

from __future__ import annotations

import functools
import json
import sqlite3
from typing import Any

DDL = """
CREATE TABLE IF NOT EXISTS sessions (
    id                TEXT PRIMARY KEY,
    parent_id         TEXT REFERENCES sessions(id),
    started_at        REAL NOT NULL,
    ended_at          REAL,
    end_reason        TEXT,
    model_config      TEXT NOT NULL DEFAULT '{}',
    message_count     INTEGER NOT NULL DEFAULT 0,
    title             TEXT,
    title_source      TEXT,
    cooldown_until    REAL,
    cooldown_error    TEXT,
    ineffective_count INTEGER NOT NULL DEFAULT 0,
    fallback_streak   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS sessions_by_parent ON sessions(parent_id);

CREATE TABLE IF NOT EXISTS messages (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id          TEXT NOT NULL REFERENCES sessions(id),
    role                TEXT NOT NULL,
    content             TEXT,
    timestamp           REAL NOT NULL,
    platform_message_id TEXT,
    active              INTEGER NOT NULL DEFAULT 1,
    compacted           INTEGER NOT NULL DEFAULT 0,
    is_summary          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages(session_id, active, id);

CREATE TABLE IF NOT EXISTS compression_locks (
    session_id  TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    acquired_at REAL NOT NULL,
    expires_at  REAL NOT NULL
);
"""

# Dump key -> (table, ordering column): a fixed order makes a dump identical across runs of one seed.
_DUMPED = {
    "sessions": ("sessions", "id"),
    "messages": ("messages", "id"),
    "leases": ("compression_locks", "session_id"),
}


def connect(path: str, busy_timeout_s: float = 5.0) -> sqlite3.Connection:
    """Open in autocommit mode: the store issues BEGIN IMMEDIATE itself, one per public operation.

    A file shared by several processes runs in WAL mode (readers never block the one writer), and a write
    waits up to `busy_timeout_s` for another process's transaction before failing with "database is locked".
    """
    conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_s)
    if path != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    if path == ":memory:":
        _empty_in_memory().backup(conn)
    else:
        conn.executescript(DDL)
    return conn


@functools.cache
def _empty_in_memory() -> sqlite3.Connection:
    """The empty store's pages, made once per process: copying them costs a tenth of running the DDL, and a
    simulated run opens a fresh in-memory store (threads only read it, so any may copy it)."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.executescript(DDL)
    return conn


def dump(db: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table as plain dicts, in a fixed order."""
    return {key: _dump_table(db, table, order) for key, (table, order) in _DUMPED.items()}


def _dump_table(db: sqlite3.Connection, table: str, order: str) -> list[dict[str, Any]]:
    cur = db.execute(f"SELECT * FROM {table} ORDER BY {order}")
    columns = [d[0] for d in cur.description]
    rows = [dict(zip(columns, values)) for values in cur.fetchall()]
    for row in rows:
        if "model_config" in row:
            row["model_config"] = json.loads(row["model_config"])
    return rows


def integrity(db: sqlite3.Connection) -> list[str]:
    """SQLite's own integrity check: ["ok"], or the problems it found."""
    return [line for (line,) in db.execute("PRAGMA integrity_check")]
