"""The two compaction commits: in-place archive and rotation publish, each the body of one transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from . import lease, messages, sessions, titles
from .errors import ParentChangedError, ParentEndedError
from .reasons import AUTOMATIC_END_REASONS, COMPRESSION_END
from .rows import SessionRow


def archive_and_compact(
    db: sqlite3.Connection,
    sid: str,
    compacted: Sequence[Mapping[str, Any]],
    *,
    holder: str,
    watermark: int | None,
    now: float,
    tail_count: int,
) -> list[int]:
    """Replace the active set with `compacted`, keeping rows appended since the snapshot live after it.

    A rewind slot row retires as a hidden copy only if `compacted` carries it verbatim; one the summary took
    in is archived as summarized."""
    _require_rows(compacted, "compacted")
    if tail_count < 0:
        raise ValueError("tail_count must be >= 0")
    sessions.require_writable(db, sid)
    # FIX archive-verifies-lease (R25): a displaced or lapsed holder must not overwrite the transcript
    lease.require_held(db, sid, holder, now=now)
    # FIX clone-concurrent-tail (R14): rows appended above the watermark during the summary stay live, after it
    tail = messages.active_ids_above(db, sid, watermark)
    # FIX tail-rewind-bounded-at-watermark (R14/#99545): a concurrent append must not take a rewind slot
    rewind = messages.last_active_ids(db, sid, tail_count, watermark)
    # FIX tail-rewind-only-carried-rows (R14/R12): a slot row the candidate summarized (a turn's unsaved message took its verbatim place) must stay searchable
    rewind = messages.carried_verbatim(db, rewind, compacted)
    messages.retire_active(db, sid, superseded=rewind + tail)
    new_ids = messages.insert(db, sid, compacted, now=now)
    new_ids += messages.clone(db, tail, into=sid)
    messages.recount(db, sid)
    return new_ids


def publish_child(
    db: sqlite3.Connection,
    parent: str,
    child: str,
    handoff: Sequence[Mapping[str, Any]],
    *,
    holder: str,
    watermark: int | None,
    ceiling: int | None,
    now: float,
    ttl_s: float,
    require_refresh: bool,
    own_rows: Sequence[int] = (),
) -> list[int]:
    """Rotate: the child gets the handoff plus the foreign tail, and the parent closes as `compression`.

    The foreign tail is every active parent row above the watermark except the rotating agent's own
    pre-publish flush (`own_rows`, already in the handoff): the rows up to `ceiling` (the parent's watermark
    before that flush), and any row above it that is not one of ours (another writer's append that landed
    after the ceiling was read)."""
    # FIX publish-verifies-and-refreshes-lease (R25): renew inside the commit, then commit only while still the holder
    if require_refresh:
        lease.refresh(db, parent, holder, now=now, ttl_s=ttl_s)
    lease.require_held(db, parent, holder, now=now)
    parent_row = sessions.require(db, parent)
    healed = _healable_end_reason(parent_row)
    _require_rows(handoff, "handoff")
    sessions.insert(
        db,
        child,
        now=now,
        parent=parent,
        model_config=parent_row.model_config,
        title=None,
        title_source=None,
    )
    titles.carry_to_child(db, parent_row, child)
    new_ids = messages.insert(db, child, handoff, now=now)
    # FIX clone-foreign-tail-bounded (R14): rows above the ceiling are this agent's own flush, already in the handoff
    foreign_tail = messages.active_ids_above(db, parent, watermark, ceiling)
    # FIX clone-appends-above-ceiling (R14): an append that landed after the ceiling read is not our flush; left behind it is marked summarized
    foreign_tail += [row_id for row_id in messages.active_ids_above(db, parent, ceiling) if row_id not in own_rows]
    new_ids += messages.clone(db, foreign_tail, into=child)
    messages.retire_active(db, parent, superseded=foreign_tail)
    messages.recount(db, parent)
    messages.recount(db, child)
    _close_parent(db, parent, now=now, healed=healed)
    return new_ids


def _require_rows(rows: Sequence[Mapping[str, Any]], what: str) -> None:
    """An empty replacement would silently wipe the live transcript."""
    if not rows:
        raise ValueError(f"{what} must not be empty")


def _healable_end_reason(parent: SessionRow) -> str | None:
    """The automatic end stamp the close may overwrite; None when there is nothing to heal."""
    if parent.live or parent.rotated:
        return None
    # FIX publish-refuses-deliberate-end (R11): a boundary the user chose must never be undone by a rotation
    if parent.end_reason not in AUTOMATIC_END_REASONS:
        raise ParentEndedError(f"parent {parent.id!r} already ended ({parent.end_reason})")
    # FIX publish-heals-automatic-end (R11): an automatic stamp (e.g. tui_shutdown) must not wedge rotation forever
    return parent.end_reason


def _close_parent(db: sqlite3.Connection, parent: str, *, now: float, healed: str | None) -> None:
    """Close the parent as `compression` only if it is still open (or carries the stamp being healed)."""
    # FIX close-parent-only-if-open (R19): a parent another attempt already rotated must not be rotated twice
    cur = db.execute(
        "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND (ended_at IS NULL OR end_reason IS ?)",
        (now, COMPRESSION_END, parent, healed),
    )
    if cur.rowcount != 1:
        raise ParentChangedError(f"parent {parent!r} changed during publication")
