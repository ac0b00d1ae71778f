"""The DB side of the per-session compression lease: one row per session, owned by a holder string.

The lease fences compressor against compressor only; transcript appends never look at it (R14).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from .errors import LeaseLostError
from .rows import LEASE_COLUMNS, LeaseRow

HolderIsDead = Callable[[str], bool]


def row(db: sqlite3.Connection, sid: str) -> LeaseRow | None:
    found = db.execute(f"SELECT {LEASE_COLUMNS} FROM compression_locks WHERE session_id = ?", (sid,)).fetchone()
    return None if found is None else LeaseRow(*found)


def holder(db: sqlite3.Connection, sid: str, *, now: float) -> str | None:
    """The unexpired holder, or None: an expired row no longer excludes anyone."""
    current = row(db, sid)
    return current.holder if current is not None and current.expires_at > now else None


def try_acquire(
    db: sqlite3.Connection,
    sid: str,
    me: str,
    *,
    now: float,
    ttl_s: float,
    holder_is_dead: HolderIsDead | None,
) -> bool:
    """Claim the lease: re-entry refreshes, a stale row is reclaimed, a live foreign row wins."""
    if ttl_s <= 0:
        raise ValueError("ttl_s must be positive")
    current = row(db, sid)
    if current is not None and current.holder == me:
        return refresh(db, sid, me, now=now, ttl_s=ttl_s)
    if current is not None and _is_stale(current, now=now, holder_is_dead=holder_is_dead):
        _delete_exact(db, current)
    # FIX acquire-never-overwrites (R3/R19): of two acquirers racing on a free row one inserts, the other finds it and loses
    db.execute(
        "INSERT OR IGNORE INTO compression_locks (session_id, holder, acquired_at, expires_at) VALUES (?, ?, ?, ?)",
        (sid, me, now, now + ttl_s),
    )
    confirmed = row(db, sid)
    return confirmed is not None and confirmed.holder == me


def _is_stale(current: LeaseRow, *, now: float, holder_is_dead: HolderIsDead | None) -> bool:
    """Reclaimable: expired, or the holder is provably dead (any doubt must answer alive)."""
    # FIX expired-or-dead-reclaim (R24): a dead holder frees at once, a live unexpired holder is never displaced
    return current.expires_at <= now or (holder_is_dead is not None and holder_is_dead(current.holder))


def refresh(db: sqlite3.Connection, sid: str, me: str, *, now: float, ttl_s: float) -> bool:
    """Extend the holder's own row; ownership is by holder, so an owner may revive its own expired row."""
    # FIX refresh-never-inserts (R3/R25): a refresher after a release or reclaim must not resurrect the lease
    cur = db.execute(
        "UPDATE compression_locks SET expires_at = ? WHERE session_id = ? AND holder = ?", (now + ttl_s, sid, me)
    )
    return cur.rowcount == 1


def release(db: sqlite3.Connection, sid: str, me: str) -> bool:
    """Drop the holder's own row; a second release is a no-op."""
    # FIX holder-qualified-release (R3): a stale release must never free a newer holder's lease
    cur = db.execute("DELETE FROM compression_locks WHERE session_id = ? AND holder = ?", (sid, me))
    return cur.rowcount == 1


def require_held(db: sqlite3.Connection, sid: str, me: str, *, now: float) -> None:
    """A commit goes ahead only while its holder still owns an unexpired lease (R25)."""
    current = row(db, sid)
    if current is None or current.holder != me or current.expires_at <= now:
        raise LeaseLostError(f"compression lease on {sid!r} lost before commit (holder {me!r})")


def reclaim_expired(db: sqlite3.Connection, sid: str, *, now: float) -> bool:
    """Delete an expired row; True when no unexpired lease remains on the session."""
    current = row(db, sid)
    if current is not None and current.expires_at <= now:
        _delete_exact(db, current)
        return True
    return current is None


def _delete_exact(db: sqlite3.Connection, stale: LeaseRow) -> None:
    """Delete exactly the row judged stale (holder and expiry), never one refreshed or re-acquired since."""
    db.execute(
        "DELETE FROM compression_locks WHERE session_id = ? AND holder = ? AND expires_at = ?",
        (stale.session_id, stale.holder, stale.expires_at),
    )
