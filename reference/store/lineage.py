"""Compression lineage: which child continues a session, where the chain is live now, and orphan repair."""

from __future__ import annotations

import sqlite3

from . import lease, sessions
from .reasons import AUTOMATIC_END_REASONS, EXPLICIT_CLOSE_REASONS
from .rows import SessionRow

FORK_MARKERS = ("_branched_from", "_delegate_from", "_reset_from")

# Bounds a walk over a corrupt (cyclic or absurdly long) chain.
CHAIN_CAP = 1000


def is_fork_of(child: SessionRow, parent_id: str) -> bool:
    """A branch, delegate or reset child names its direct parent in a fork marker."""
    # FIX fork-marker-names-parent (R16): a marker naming another row was inherited verbatim on rotation, not a fork
    return any(child.model_config.get(marker) == parent_id for marker in FORK_MARKERS)


def continuation_children(db: sqlite3.Connection, sid: str) -> list[SessionRow]:
    return [child for child in sessions.children(db, sid) if not is_fork_of(child, sid)]


def _next_hop(db: sqlite3.Connection, sid: str) -> SessionRow | None:
    """The continuation to follow. Only a race leaves several: prefer one that carried the chain on,
    then a live one, then the newest."""
    return max(
        continuation_children(db, sid),
        key=lambda c: (c.rotated, c.live, c.started_at, c.id),
        default=None,
    )


def chain_end(db: sqlite3.Connection, sid: str) -> SessionRow | None:
    """The session the chain from `sid` ends in, live or ended; None when it breaks off (an orphan parent).

    A corrupt chain (a cycle, or longer than the cap) ends at a rotated row, which no caller takes as its end.
    """
    row = sessions.get(db, sid)
    seen: set[str] = set()
    # FIX transitive-tip (R15): walk through every rotated middle; a depth-1 look stops at an ended mid
    while row is not None and row.rotated and row.id not in seen and len(seen) < CHAIN_CAP:
        seen.add(row.id)
        row = _next_hop(db, row.id)
    return row


def continued_from(db: sqlite3.Connection, sid: str) -> list[str]:
    """`sid` and every session it continues by compression, newest first: its conversation so far."""
    found: list[str] = []
    row = sessions.get(db, sid)
    while row is not None and row.id not in found and len(found) < CHAIN_CAP:
        found.append(row.id)
        parent = sessions.get(db, row.parent_id) if row.parent_id is not None else None
        row = parent if parent is not None and parent.rotated and not is_fork_of(row, parent.id) else None
    return found


def compression_tip(db: sqlite3.Connection, sid: str) -> str | None:
    """The session the chain from `sid` continues in, for a writer to adopt; None when the chain ended on purpose.

    That is its end if live, or ended only by an automatic stamp (a shutdown, a reap, an eviction): such a stamp
    lands while an agent may still be working, the end's own agent goes on writing there, and publication heals
    it. A deliberate end (a reset, a switch) or an explicit close is final for a writer that did not route it.
    """
    row = chain_end(db, sid)
    if row is None or row.rotated:
        return None
    # FIX adopt-automatically-ended-tip (R11/R15): a shutdown stamp on the tip would leave every stale writer of the lineage failing closed forever
    adoptable = row.live or row.end_reason in AUTOMATIC_END_REASONS
    return row.id if adoptable else None


def reopen_orphaned(db: sqlite3.Connection, sid: str, *, now: float) -> bool:
    """Heal a rotation that closed its parent without publishing a child (legacy R20 state)."""
    if not sessions.require(db, sid).rotated:
        return False
    # FIX reopen-requires-no-continuation-and-no-lease (R16/R20): else a second head beside the child or a live worker
    if continuation_children(db, sid) or not lease.reclaim_expired(db, sid, now=now):
        return False
    db.execute("UPDATE sessions SET ended_at = NULL, end_reason = NULL WHERE id = ?", (sid,))
    return True


def reopen_if_explicitly_closed(db: sqlite3.Connection, sid: str) -> str | None:
    """Clear an explicit close for the host that still routes `sid` (#106459); the reason cleared, or None.

    Never an automatic, boundary or `compression` stamp, nor a close whose session already has a
    continuation (lineage owns it). The UPDATE is keyed on the exact stamp read, so a close that lands
    between the read and the write is not cleared.
    """
    row = sessions.get(db, sid)
    if row is None or row.end_reason not in EXPLICIT_CLOSE_REASONS or continuation_children(db, sid):
        return None
    db.execute(
        "UPDATE sessions SET ended_at = NULL, end_reason = NULL WHERE id = ? AND ended_at = ? AND end_reason = ?",
        (sid, row.ended_at, row.end_reason),
    )
    return row.end_reason
