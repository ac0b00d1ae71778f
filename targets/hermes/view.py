"""What the oracle may read of a hermes run: its database through `StoreView`, and the system around it.

The invariants read the store through `contract.store.StoreView`; here each read is a query of hermes's own
`state.db` (its `sessions` and `messages` tables, and `compression_locks` where the release has it) over a
read-only connection of the harness, answered in the contract's rows. The connection belongs to no simulated
thread, so a read is never a scheduling point: the oracle looks without moving the run. It reads only what is
committed, as any other process would.

Times: hermes writes `time.time()`, the wall clock, which a run pins to `EPOCH_S` plus virtual time; the contract's
rows say virtual seconds, which every invariant compares with event times. Each time column is read back as
virtual seconds (rounded to the microsecond: at 1.8e9 seconds a float keeps about 0.2 us).

Mapping: a session's `parent_session_id` is the row's parent, its `ended_at`/`end_reason` as they are; a message
is active unless the release's `active` column says otherwise (0.16-0.17 have no such column: every row is
active), compacted as its `compacted` column says; a summary row is one whose text starts with the release's
summary prefix. hermes has no watermark (0 for every session), no title source, and keeps its failure
cooldown on the session row (0.18.2+), which is what `cooldown_row` reads.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from contract.store import MISSING_COOLDOWN, CooldownRow, LeaseRow, MessageRow, SessionRow, built
from sim.threads.clock import EPOCH_S

SUMMARY_PREFIXES = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY", "SUMMARY")


def virtual(wall: float | None) -> float | None:
    """A time hermes wrote (the pinned wall clock) as the run's virtual seconds."""
    return None if wall is None else round(wall - EPOCH_S, 6)


class HermesStore:
    """`StoreView` over one run's hermes database (see the module docstring)."""

    keeps_title_source = False  # `sessions.title` only: hermes records no source

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False, isolation_level=None)
        self._columns = {row[1] for row in self._db.execute("PRAGMA table_info(messages)")}
        self._session_columns = {row[1] for row in self._db.execute("PRAGMA table_info(sessions)")}
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        self._has_locks = "compression_locks" in tables
        active = "active" if "active" in self._columns else "1"
        compacted = "compacted" if "compacted" in self._columns else "0"
        platform = "platform_message_id" if "platform_message_id" in self._columns else "NULL"
        self._message_columns = f"id, session_id, role, content, timestamp, {platform}, {active}, {compacted}"
        self._active = active

    def close(self) -> None:
        self._db.close()

    def _sessions(self, where: str = "", args: tuple[Any, ...] = (), order: str = "id") -> list[SessionRow]:
        title = "title" if "title" in self._session_columns else "NULL"
        rows = self._db.execute(f"SELECT id, parent_session_id, started_at, ended_at, end_reason, message_count, {title} "
                                f"FROM sessions {where} ORDER BY {order}", args).fetchall()
        return [built(SessionRow, (sid, parent, virtual(started), virtual(ended), reason, {}, count or 0, title_text, None))
                for sid, parent, started, ended, reason, count, title_text in rows]

    def session_ids(self) -> list[str]:
        return [row[0] for row in self._db.execute("SELECT id FROM sessions ORDER BY id")]

    def get_session(self, sid: str) -> SessionRow | None:
        found = self._sessions("WHERE id = ?", (sid,))
        return found[0] if found else None

    def live_sessions(self) -> list[SessionRow]:
        return self._sessions("WHERE ended_at IS NULL")

    def children(self, sid: str) -> list[SessionRow]:
        return self._sessions("WHERE parent_session_id = ?", (sid,), order="started_at, id")

    def _messages(self, sid: str, above: int, active_only: bool) -> list[MessageRow]:
        where = f" AND {self._active} = 1" if active_only else ""
        rows = self._db.execute(f"SELECT {self._message_columns} FROM messages WHERE session_id = ? AND id > ?{where} "
                                "ORDER BY id", (sid, above)).fetchall()
        return [built(MessageRow, (*row[:4], virtual(row[4]), row[5], bool(row[6]), bool(row[7]), _is_summary(row[3])))
                for row in rows]

    def active_messages(self, sid: str, above: int = 0) -> list[MessageRow]:
        return self._messages(sid, above, True)

    def all_messages(self, sid: str, above: int = 0) -> list[MessageRow]:
        return self._messages(sid, above, False)

    def active_watermark(self, sid: str) -> int:
        """hermes has no watermark: the highest active row, which is what an attempt of it knows of."""
        found = self._db.execute(f"SELECT MAX(id) FROM messages WHERE session_id = ? AND {self._active} = 1", (sid,)).fetchone()
        return found[0] or 0

    def lease_row(self, sid: str) -> LeaseRow | None:
        if not self._has_locks:
            return None
        row = self._db.execute("SELECT session_id, holder, acquired_at, expires_at FROM compression_locks WHERE session_id = ?",
                               (sid,)).fetchone()
        return None if row is None else built(LeaseRow, (row[0], row[1], virtual(row[2]), virtual(row[3])))

    def cooldown_row(self, sid: str) -> CooldownRow:
        if "compression_failure_cooldown_until" not in self._session_columns:
            return MISSING_COOLDOWN
        row = self._db.execute("SELECT compression_failure_cooldown_until, compression_failure_error, "
                               "compression_fallback_streak FROM sessions WHERE id = ?", (sid,)).fetchone()
        if row is None:
            return MISSING_COOLDOWN
        return CooldownRow(until=virtual(row[0]), error=row[1], ineffective_count=0, fallback_streak=row[2] or 0, exists=True)

    def active_row_ids(self, sid: str) -> list[int]:
        """The ids of the session's active rows (what an attempt that starts now works from)."""
        return [row[0] for row in self._db.execute(f"SELECT id FROM messages WHERE session_id = ? AND {self._active} = 1 "
                                                   "ORDER BY id", (sid,))]


def _is_summary(content: str | None) -> bool:
    return content is not None and content.lstrip().startswith(SUMMARY_PREFIXES)


class HermesView:
    """`sim.invariants.SystemView` for a hermes run: the store above, the release's settings an invariant may
    read, its agents, and which process a task or lease holder belongs to."""

    def __init__(self, system: Any) -> None:
        self._system = system
        self.store = system.store
        self.config = HermesConfig(system.settings_values)
        self.agents = {spec.name: AgentSlot(spec, system.agents) for spec in system.scenario.world.agents}

    @property
    def ctrl_c_grace_s(self) -> float:
        """The terminal's grace after a Ctrl+C: hermes's own (cli.py: 50 joins of 0.2 s)."""
        return float(self.config.ctrl_c_grace_s)

    def process_of(self, incarnation: str) -> str:
        return incarnation

    def holder_is_dead(self, holder: str) -> bool:
        return self._system.process_of_holder(holder) in self._system.dead

    def agent_of_task(self, task: str) -> str | None:
        """A turn's thread (`turn.<agent>.<n>`), a terminal's (`cli.<agent>`) or a gateway's (`gateway.<agent>`), what
        the user typed (`type.<agent>`) or sent (`message.<agent>`)."""
        kind, _, rest = task.partition(".")
        if kind in ("turn", "cli", "type", "ctrl_c", "gateway", "message"):
            return rest.split(".", 1)[0]
        return None


class AgentSlot:
    """An agent as invariants find it: its scenario spec (with `.process`) and hermes's AIAgent of its name now (the
    gateway builds a new one after a reset)."""

    def __init__(self, spec: Any, agents: dict[str, Any]) -> None:
        self.spec = spec
        self._agents = agents

    @property
    def agent(self) -> Any:
        return self._agents[self.spec.name]


class HermesConfig:
    """The settings of the run an invariant may read, by the reference's names (`lease_ttl_s`, ...); a setting
    hermes does not have is an AttributeError naming it (such an invariant is not applicable to hermes)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"hermes-agent has no setting {name!r}") from None
