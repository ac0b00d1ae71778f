"""SessionStore: the public face of the store. Each public operation is exactly one SQLite transaction.

Time is never read here: every `now` is the caller's (virtual) clock, so a simulation replays exactly.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from . import commits, cooldown, lease, lineage, messages, schema, sessions, titles
from .reasons import COMPRESSION_END
from .rows import CooldownRow, LeaseRow, MessageRow, SessionRow

FaultHook = Callable[[str, str], None]
Message = Mapping[str, Any]


class SessionStore:
    """SQLite session store; `fault_hook(op, "before_commit"|"after_commit")` brackets every write's COMMIT."""

    keeps_title_source = True

    def __init__(self, path: str = ":memory:", *, fault_hook: FaultHook | None = None, busy_timeout_s: float = 5.0) -> None:
        self._db = schema.connect(path, busy_timeout_s)
        self.fault_hook = fault_hook

    def close(self) -> None:
        self._db.close()

    @property
    def changes(self) -> int:
        """Rows written since the store opened, rolled-back writes included: it moves whenever the data may
        have, so a reader can keep an answer until it does."""
        return self._db.total_changes

    # -- transactions ---------------------------------------------------------------------------

    def _txn(self, op: str | None) -> Transaction:
        return Transaction(self._db, op, self._fire)

    def _fire(self, op: str | None, point: str) -> None:
        if op is not None and self.fault_hook is not None:
            self.fault_hook(op, point)

    def _write(self, op: str) -> AbstractContextManager[sqlite3.Connection]:
        return self._txn(op)

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._txn(None)

    # -- sessions -------------------------------------------------------------------------------

    def create_session(
        self,
        sid: str,
        *,
        now: float,
        parent: str | None = None,
        model_config: dict[str, Any] | None = None,
        title: str | None = None,
        title_source: str | None = None,
    ) -> None:
        with self._write("create_session") as db:
            sessions.insert(
                db, sid, now=now, parent=parent, model_config=model_config or {}, title=title,
                title_source=title_source,
            )

    def get_session(self, sid: str) -> SessionRow | None:
        with self._read() as db:
            return sessions.get(db, sid)

    def set_session_title(self, sid: str, title: str, *, source: str = "user") -> str | None:
        """A user's /title (source "user") or the auto-titler's ("derived", "llm"); the title stored, or None
        when an automatic title ranks below the current one. A user's title another conversation shows is
        refused (TitleInUseError)."""
        with self._write("set_session_title") as db:
            return titles.set_title(db, sid, title, source=source)

    def end_session(self, sid: str, *, now: float, reason: str) -> bool:
        """A frontend's end stamp; True if it ended the session, False if it was already ended."""
        with self._write("end_session") as db:
            return sessions.end(db, sid, now=now, reason=reason)

    def session_ids(self) -> list[str]:
        """Every session id, sorted: what invariant checkers iterate."""
        with self._read() as db:
            return sessions.ids(db)

    def live_sessions(self) -> list[SessionRow]:
        with self._read() as db:
            return sessions.live(db)

    def children(self, sid: str) -> list[SessionRow]:
        with self._read() as db:
            return sessions.children(db, sid)

    # -- messages -------------------------------------------------------------------------------

    def append_messages(
        self, sid: str, msgs: Sequence[Message], *, now: float, refuse_ended: Collection[str] = (),
    ) -> list[int]:
        with self._write("append_messages") as db:
            return messages.append(db, sid, msgs, now=now, refuse_ended=refuse_ended)

    def append_message(self, sid: str, msg: Message, *, now: float) -> int:
        with self._write("append_message") as db:
            return messages.append(db, sid, [msg], now=now)[0]

    def active_messages(self, sid: str, above: int = 0) -> list[MessageRow]:
        with self._read() as db:
            return messages.active(db, sid, above)

    def all_messages(self, sid: str, above: int = 0) -> list[MessageRow]:
        with self._read() as db:
            return messages.every(db, sid, above)

    def active_watermark(self, sid: str) -> int:
        with self._read() as db:
            return messages.watermark(db, sid)

    # -- lease ----------------------------------------------------------------------------------

    def try_acquire_lease(
        self,
        sid: str,
        holder: str,
        *,
        now: float,
        ttl_s: float,
        holder_is_dead: Callable[[str], bool] | None = None,
    ) -> bool:
        with self._write("try_acquire_lease") as db:
            return lease.try_acquire(db, sid, holder, now=now, ttl_s=ttl_s, holder_is_dead=holder_is_dead)

    def refresh_lease(self, sid: str, holder: str, *, now: float, ttl_s: float) -> bool:
        with self._write("refresh_lease") as db:
            return lease.refresh(db, sid, holder, now=now, ttl_s=ttl_s)

    def release_lease(self, sid: str, holder: str) -> bool:
        with self._write("release_lease") as db:
            return lease.release(db, sid, holder)

    def lease_holder(self, sid: str, *, now: float) -> str | None:
        with self._read() as db:
            return lease.holder(db, sid, now=now)

    def lease_row(self, sid: str) -> LeaseRow | None:
        with self._read() as db:
            return lease.row(db, sid)

    # -- commits --------------------------------------------------------------------------------

    def archive_and_compact(
        self,
        sid: str,
        compacted: Sequence[Message],
        *,
        holder: str,
        watermark: int | None,
        now: float,
        tail_count: int = 0,
    ) -> list[int]:
        """In-place commit; returns the new active ids (compacted rows, then the concurrent tail)."""
        with self._write("archive_and_compact") as db:
            return commits.archive_and_compact(
                db, sid, compacted, holder=holder, watermark=watermark, now=now, tail_count=tail_count
            )

    def publish_child(
        self,
        parent: str,
        child: str,
        handoff: Sequence[Message],
        *,
        holder: str,
        watermark: int | None,
        ceiling: int | None,
        now: float,
        ttl_s: float,
        require_refresh: bool = True,
        own_rows: Sequence[int] = (),
    ) -> list[int]:
        """Rotation commit; returns the child's active ids (handoff, then the foreign tail)."""
        # FIX publish-atomic (R20): child row, handoff and the parent's close commit together or not at all
        with self._write("publish_child") as db:
            return commits.publish_child(
                db, parent, child, handoff, holder=holder, watermark=watermark, ceiling=ceiling, now=now,
                ttl_s=ttl_s, require_refresh=require_refresh, own_rows=own_rows,
            )

    def rotate_without_lease(
        self,
        parent: str,
        child: str,
        handoff: Sequence[Message],
        *,
        now: float,
        model_config: dict[str, Any],
        title: str | None,
        title_source: str | None,
    ) -> list[int]:
        """A rotation by a writer that takes no lease and checks no fence (an older agent sharing the database):
        create `child` continuing `parent` (with the model config and title it read from `parent`), append
        `handoff` to it, close `parent` as compression. Nothing here guards against a concurrent rotation; that
        is the point (R19). Returns the child's new row ids."""
        with self._write("rotate_without_lease") as db:
            sessions.insert(
                db, child, now=now, parent=parent, model_config=model_config, title=title, title_source=title_source,
            )
            row_ids = messages.append(db, child, handoff, now=now) if handoff else []
            sessions.end(db, parent, now=now, reason=COMPRESSION_END)
            return row_ids

    # -- lineage --------------------------------------------------------------------------------

    def compression_tip(self, sid: str) -> str | None:
        with self._read() as db:
            return lineage.compression_tip(db, sid)

    def continuation_children(self, sid: str) -> list[str]:
        with self._read() as db:
            return [child.id for child in lineage.continuation_children(db, sid)]

    def reopen_orphaned(self, sid: str, *, now: float) -> bool:
        with self._write("reopen_orphaned") as db:
            return lineage.reopen_orphaned(db, sid, now=now)

    def reopen_if_explicitly_closed(self, sid: str) -> str | None:
        with self._write("reopen_if_explicitly_closed") as db:
            return lineage.reopen_if_explicitly_closed(db, sid)

    # -- cooldown and breaker -------------------------------------------------------------------

    def record_cooldown(self, sid: str, until: float, error: str) -> None:
        with self._write("record_cooldown") as db:
            cooldown.record(db, sid, until, error)

    def get_cooldown(self, sid: str, *, now: float) -> tuple[float, str | None] | None:
        with self._read() as db:
            return cooldown.active(db, sid, now=now)

    def cooldown_row(self, sid: str) -> CooldownRow:
        with self._read() as db:
            return cooldown.raw(db, sid)

    def restore_cooldown_row(self, sid: str, row: CooldownRow) -> None:
        with self._write("restore_cooldown_row") as db:
            cooldown.restore(db, sid, row)

    def clear_cooldown(self, sid: str) -> None:
        with self._write("clear_cooldown") as db:
            cooldown.clear(db, sid)

    def bump_ineffective(self, sid: str) -> int:
        with self._write("bump_ineffective") as db:
            return cooldown.bump_ineffective(db, sid)

    def reset_ineffective(self, sid: str) -> None:
        with self._write("reset_ineffective") as db:
            cooldown.reset_ineffective(db, sid)

    # -- checkers -------------------------------------------------------------------------------

    def integrity(self) -> list[str]:
        """SQLite's integrity check of the whole file: ["ok"] when sound."""
        return schema.integrity(self._db)

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """All sessions, messages and lease rows as plain data in a fixed order, for invariant checkers."""
        with self._read() as db:
            return schema.dump(db)

    @property
    def size_bytes(self) -> int:
        """What the database holds, in bytes (pages times the page size): freed pages stay, so it only grows, and
        the same writes give the same size."""
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        return pages * self._db.execute("PRAGMA page_size").fetchone()[0]


class Transaction:
    """One BEGIN IMMEDIATE..COMMIT, rolled back on any error; reads run in one too, so each sees one state.

    `op` names a write, whose COMMIT the fault hook brackets: raising before it rolls the write back,
    raising after it leaves the write durable (an indeterminate outcome for the caller). A class rather than
    a generator-based context manager: every store operation opens one, and the generator's machinery cost
    about a sixth of a read."""

    __slots__ = ("_db", "_op", "_fire")

    def __init__(self, db: sqlite3.Connection, op: str | None, fire: Callable[[str | None, str], None]) -> None:
        self._db = db
        self._op = op
        self._fire = fire

    def __enter__(self) -> sqlite3.Connection:
        self._db.execute("BEGIN IMMEDIATE")
        return self._db

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: Any) -> None:
        if kind is not None:
            self._roll_back()
            return
        try:
            self._fire(self._op, "before_commit")
            self._db.execute("COMMIT")
        except BaseException:
            self._roll_back()
            raise
        self._fire(self._op, "after_commit")

    def _roll_back(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
