"""Every invariant can fail: a short history that breaks it is caught, and its lawful twin is not.

The histories are written by hand, event by event, in the vocabulary of reference/EVENTS.md; invariants
that read the store get a real SessionStore arranged into the state the history describes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from reference.config import CompactionConfig
from reference.store import SessionStore
from sim.history import HistoryEvent
from sim.invariants import INVARIANTS

H1 = "proc=p1:pid=100:attempt=1"
H2 = "proc=p1:pid=100:attempt=2"
DEAD = "proc=p9:pid=999:attempt=1"


@dataclass
class FakeSystem:
    store: SessionStore = field(default_factory=SessionStore)
    config: CompactionConfig = field(default_factory=lambda: CompactionConfig(lease_ttl_s=60, idle_timeout_s=10, ceiling_timeout_s=100, commit_overrun_slice_s=5, tail_count=1))
    dead: set[str] = field(default_factory=lambda: {DEAD})
    agents: dict[str, Any] = field(default_factory=dict)

    def holder_is_dead(self, holder: str) -> bool:
        return holder in self.dead


def E(kind: str, time: float = 0.0, task: str = "t", **fields: Any) -> tuple[str, float, str, dict[str, Any]]:
    return (kind, time, task, fields)


def check(name: str, events: list[tuple], arrange: Callable[[SessionStore], None] | None = None) -> list[str]:
    system = FakeSystem()
    if arrange is not None:
        system.agents = arrange(system.store) or {}  # an arrangement may also return the agents, by name
    invariant = INVARIANTS[name](system)
    history, found = [], []
    for item in events:
        if callable(item):  # what a step did to the store besides recording its event
            item(system.store)
            continue
        kind, time, task, fields = item
        event = HistoryEvent(len(history), time, task, kind, fields)
        history.append(event)
        violation = invariant.on_event(event)
        if violation is not None:
            found.append(violation.explanation)
    final = invariant.at_end(history)
    if final is not None:
        found.append(final.explanation)
    return found


def two_live_heads(store: SessionStore) -> None:
    store.create_session("s", now=0)
    store.create_session("s/c", now=0, parent="s")


def one_head(store: SessionStore) -> None:
    store.create_session("s", now=0)


def rotated(children: int) -> Callable[[SessionStore], None]:
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        for index in range(children):
            store.create_session(f"s/c{index}", now=0, parent="s")
        store.end_session("s", now=0, reason="compression")
    return arrange


def duplicated(store: SessionStore) -> None:
    store.create_session("s", now=0)
    store.append_messages("s", [{"role": "user", "content": "hi", "timestamp": 1.0}] * 2, now=1)


def leased_by(holder: str, expires: float) -> Callable[[SessionStore], None]:
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.try_acquire_lease("s", holder, now=expires - 60, ttl_s=60)
    return arrange


def lost_append(store: SessionStore) -> None:
    store.create_session("s", now=0)
    store.append_messages("s", [{"role": "user", "content": "kept?", "timestamp": 1.0}], now=1)
    store.try_acquire_lease("s", H1, now=1, ttl_s=60)
    store.archive_and_compact("s", [{"role": "assistant", "content": "summary", "timestamp": 2.0}], holder=H1, watermark=None, now=2)


def ended_as(reason: str) -> Callable[[SessionStore], None]:
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.end_session("s", now=1, reason=reason)
    return arrange


def two_hops(tip_live: bool) -> Callable[[SessionStore], None]:
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.create_session("s/m", now=1, parent="s")
        store.create_session("s/t", now=2, parent="s/m")
        for sid in ["s", "s/m"] + ([] if tip_live else ["s/t"]):
            store.end_session(sid, now=3, reason="compression" if sid != "s/t" else "session_reset")
    return arrange


def archived_with_tail(tail_count: int) -> Callable[[SessionStore], None]:
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.append_messages("s", [{"role": "user", "content": "q", "timestamp": 1.0}, {"role": "assistant", "content": "a", "timestamp": 2.0}], now=2)
        store.try_acquire_lease("s", H1, now=2, ttl_s=60)
        store.append_messages("s", [{"role": "user", "content": "meanwhile", "timestamp": 3.0}], now=3)
        compacted = [{"role": "user", "content": "summary", "timestamp": 4.0}, {"role": "assistant", "content": "a", "timestamp": 2.0}]
        store.archive_and_compact("s", compacted, holder=H1, watermark=2, now=4, tail_count=tail_count)
    return arrange


def holding(content: str) -> Callable[[SessionStore], dict[str, Any]]:
    def arrange(store: SessionStore) -> dict[str, Any]:
        store.create_session("s", now=0)
        store.append_messages("s", [{"role": "user", "content": "hello", "timestamp": 1.0}], now=1)
        message = {"role": "user", "content": content, "timestamp": 1.0, "_db_persisted": True, "_row_id": 1}
        return {"main": SimpleNamespace(agent=SimpleNamespace(messages=[message]))}
    return arrange


def cooling_until(until: float) -> Callable[[SessionStore], None]:
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.record_cooldown("s", until, "timeout:idle")
    return arrange


CASES: dict[str, tuple[list[tuple], list[tuple], Callable | None, Callable | None]] = {
    # name: (violating events, lawful events, arrange for violating, arrange for lawful)
    "hard_cancel_restores_cooldown": (
        [E("lease.acquired", 0, session="s", holder=H1), lambda store: store.clear_cooldown("s"),
         E("cooldown.cleared", 0, session="s", attempt="p1.1"), E("fence.cancel_won", 1, attempt="p1.1", hard=True),
         E("compaction.finished", 1, session="s", attempt="p1.1", status="unchanged", reason="hard_cancelled")],
        [E("lease.acquired", 0, session="s", holder=H1), lambda store: store.clear_cooldown("s"),
         E("cooldown.cleared", 0, session="s", attempt="p1.1"), E("fence.cancel_won", 1, attempt="p1.1", hard=True),
         lambda store: store.record_cooldown("s", 60.0, "timeout:idle"), E("cooldown.restored", 1, session="s", attempt="p1.1"),
         E("compaction.finished", 1, session="s", attempt="p1.1", status="unchanged", reason="hard_cancelled")],
        cooling_until(60.0), cooling_until(60.0)),
    "cooldown_never_shortened": (
        [E("cooldown.set", 5, session="s", until=65.0, attempt="p1.1"), E("cooldown.set", 26, session="s", until=27.0, attempt="p1.1")],
        [E("cooldown.set", 5, session="s", until=65.0, attempt="p1.1"), E("cooldown.set", 26, session="s", until=27.0, attempt="p1.1")],
        cooling_until(27.0), cooling_until(65.0)),
    "cancelled_attempt_never_acquires": (
        [E("fence.cancel_won", 5, attempt="p1.1", hard=False), E("lease.acquired", 10, session="s", holder=H1)],
        [E("lease.acquired", 0, session="s", holder=H1), E("fence.cancel_won", 5, attempt="p1.1", hard=False)],
        None, None),
    "pool_admission_bounded": (
        [E("task.spawn", 0, f"compress:p1.{i}") for i in range(1, 6)],
        [E("task.spawn", 0, f"compress:p1.{i}") for i in range(1, 5)]
        + [E("compaction.finished", 1, attempt="p1.1", status="committed"), E("task.spawn", 2, "compress:p1.5"), E("task.spawn", 2, "compress:p2.1")],
        None, None),
    "no_commit_after_cancel": (
        [E("fence.cancel_won", attempt="p1.1"), E("fence.begin_ok", attempt="p1.1")],
        [E("fence.begin_ok", attempt="p1.1"), E("fence.revoked", attempt="p1.1"), E("commit.archived", attempt="p1.1", session="s")],
        None, None),
    "lease_held_across_commit": (
        [E("fence.begin_ok", attempt="p1.1"), E("lease.released", session="s", holder=H1, held=True)],
        [E("fence.begin_ok", attempt="p1.1"), E("commit.archived", attempt="p1.1", session="s"), E("lease.released", session="s", holder=H1, held=True)],
        None, None),
    "single_live_head": ([E("commit.published", parent="s", child="s/c", attempt="p1.1")], [E("commit.published")], two_live_heads, one_head),
    "one_continuation_per_parent": ([E("commit.published")], [E("commit.published")], rotated(2), rotated(1)),
    "no_orphan_parent": ([E("commit.published")], [E("commit.published")], rotated(0), rotated(1)),
    "caller_session_follows_rotation": (
        [E("host.returned", attempt="p1.1", status="rotated", session="s/c", caller_session="s")],
        [E("host.returned", attempt="p1.1", status="rotated", session="s/c", caller_session="s/c")],
        None, None),
    "no_duplicate_persisted_turn": ([E("append.ok", session="s", ids=[1, 2])], [E("append.ok", session="s", ids=[1])], duplicated, one_head),
    "acknowledged_appends_survive": (
        [E("turn.persisted", session="s", row=1, role="user")],
        [E("turn.persisted", session="s", row=1, role="user"), E("compaction.watermark", session="s", attempt="p1.1", watermark=None),
         E("commit.archived", session="s", attempt="p1.1")],
        lost_append, lost_append),
    "aborted_attempt_leaves_parent_unchanged": (
        [E("attempt.claimed", task="w1", attempt="p1.1", generation=1), E("append.ok", task="w1", session="s", ids=[7]),
         E("compaction.finished", task="w1", attempt="p1.1", status="failed")],
        [E("attempt.claimed", task="w1", attempt="p1.1", generation=1), E("append.ok", task="w1", session="s", ids=[7]),
         E("compaction.finished", task="w1", attempt="p1.1", status="rotated")],
        None, None),
    "caller_transcript_only_through_commit": (
        [E("host.returned", attempt="p1.1", status="unchanged", transcript_before="a", transcript_after="b")],
        [E("host.returned", attempt="p1.1", status="committed", transcript_before="a", transcript_after="b")],
        None, None),
    "lease_mutual_exclusion": (
        [E("lease.acquired", 0, session="s", holder=H1), E("lease.acquired", 30, session="s", holder=H2)],
        [E("lease.acquired", 0, session="s", holder=H1), E("lease.acquired", 61, session="s", holder=H2)],
        None, None),
    "appends_never_refused_by_lease": (
        [E("append.failed", session="s", error="SessionCompressionBusyError")],
        [E("append.failed", session="s", error="OperationalError")],
        None, None),
    "lease_released_within_ttl": (
        [E("compaction.finished", 10, attempt="p1.1", status="unchanged"), E("lease.refreshed", 20, session="s", holder=H1)],
        [E("compaction.finished", 10, attempt="p1.1", status="unchanged")],
        None, None),
    "dead_holder_reclaimable": ([E("process.crashed", process="p9", pid=999), E("lease.contended", session="s", holder=H1)],
                                [E("process.crashed", process="p9", pid=999), E("lease.contended", session="s", holder=H1)],
                                leased_by(DEAD, 100), leased_by(H2, 100)),
    "turn_fails_only_expectedly": (
        [E("fault.fired", fault=0, fault_kind="host_interrupt", point="host.wait"),
         E("frontend.turn_failed", agent="main", error="RuntimeError: can't release lock: this task does not own it")],
        [E("fault.fired", fault=0, fault_kind="host_interrupt", point="host.wait"),
         E("frontend.turn_failed", agent="main", error="ExceptionGroup: Exceptions from nursery (1 sub-exception)"),
         E("frontend.turn_failed", agent="main", error="PersistenceFailed: session 'D' was closed by compression")],
        None, None),
    "worker_raises_only_after_fault": (
        [E("fault.fired", fault=0, fault_kind="stall", point="provider.progress", duration=75.0),
         E("compaction.error", attempt="p1.1", error="ExceptionGroup('Exceptions from nursery', [TypeError('cannot unpack')])")],
        [E("fault.fired", fault=0, fault_kind="db_write_failure", op="archive_and_compact", phase="before_commit"),
         E("compaction.error", attempt="p1.1", error="OperationalError('disk I/O error (injected)')")],
        None, None),
    "stale_attempt_writes_no_state": (
        [E("host.timeout", attempt="p1.1", budget="idle", since_progress=10), E("cooldown.cleared", attempt="p1.1", session="s")],
        [E("cooldown.cleared", attempt="p1.1", session="s")],
        None, None),
    "would_grow_latches_breaker": (
        [E("compaction.refused", session="s", attempt=f"p1.{i}", reason="would_grow") for i in range(3)],
        [E("compaction.refused", session="s", attempt="p1.1", reason="would_grow"), E("compaction.committed", session="s", attempt="p1.2", tokens=5, tokens_before=9),
         E("compaction.refused", session="s", attempt="p1.3", reason="would_grow"), E("compaction.refused", session="s", attempt="p1.4", reason="would_grow")],
        None, None),
    "idle_timeout_within_bounds": (
        [E("host.timeout", attempt="p1.1", budget="idle", since_progress=19.0)],
        [E("host.timeout", attempt="p1.1", budget="idle", since_progress=10.0)],
        None, None),
    "hung_commit_reported": (
        [E("fence.begin_ok", 0, attempt="p1.1"), E("host.timeout", 1, attempt="p1.1"), E("fence.finish", 20, attempt="p1.1")],
        [E("fence.begin_ok", 0, attempt="p1.1"), E("host.timeout", 1, attempt="p1.1"), E("host.commit_overrun", 6, attempt="p1.1"), E("fence.finish", 20, attempt="p1.1")],
        None, None),
    "stale_job_never_runs": (
        [E("host.timeout", attempt="p1.1"), E("compaction.summary_started", attempt="p1.1")],
        [E("compaction.summary_started", attempt="p1.1"), E("host.timeout", attempt="p1.1")],
        None, None),
    "next_turn_persists_after_ctrl_c": (
        [E("frontend.ctrl_c_grace_expired", agent="main"), E("frontend.turn_submitted", agent="main"), E("frontend.turn_failed", agent="main", error="x")],
        [E("frontend.ctrl_c_grace_expired", agent="main"), E("frontend.turn_submitted", agent="main"), E("turn.persisted", session="s", row=1, role="user")],
        None, None),
    "hard_cancel_frees_lease": (
        [E("lease.acquired", 0, session="s", holder=H1), E("hard_cancel.requested", 1, session="s"), E("frontend.ctrl_c_grace_expired", 3)],
        [E("lease.acquired", 0, session="s", holder=H1), E("hard_cancel.requested", 1, session="s"), E("lease.released", 1, session="s", holder=H1, held=True),
         E("frontend.ctrl_c_grace_expired", 3)],
        None, None),
    "deliberate_end_is_final": (
        [E("frontend.session_ended", session="s", reason="session_reset"), E("commit.published", parent="s", child="s/c", attempt="p1.1")],
        [E("frontend.session_ended", session="s", reason="session_reset"), E("compaction.commit_failed", session="s", attempt="p1.1")],
        ended_as("compression"), ended_as("session_reset")),
    "closed_write_adopts_live_tip": (
        [E("append.failed", session="s", error="SessionClosedByCompression"), E("frontend.turn_failed", agent="main", error="PersistenceFailed")],
        [E("append.failed", session="s", error="SessionClosedByCompression"), E("frontend.turn_failed", agent="main", error="PersistenceFailed")],
        two_hops(tip_live=True), two_hops(tip_live=False)),
    "rewind_slots_stay_under_watermark": (
        [E("compaction.watermark", session="s", attempt="p1.1", watermark=2), E("commit.archived", session="s", attempt="p1.1", rows=3)],
        [E("compaction.watermark", session="s", attempt="p1.1", watermark=2), E("commit.archived", session="s", attempt="p1.1", rows=3)],
        archived_with_tail(0), archived_with_tail(1)),
    "durable_messages_match_rows": (
        [E("host.returned", attempt="p1.1", status="timeout", session="s", caller_session="s")],
        [E("host.returned", attempt="p1.1", status="timeout", session="s", caller_session="s")],
        holding("hel"), holding("hello")),
}



def lease_held_by(holder: str) -> Callable[[SessionStore], None]:
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.try_acquire_lease("s", holder, now=0, ttl_s=60)
    return arrange


CASES.update({
    "no_progress_after_give_up": (
        [E("host.timeout", 5, attempt="p1.1", budget="idle"), E("compaction.summary_progress", 6, attempt="p1.1")],
        [E("compaction.summary_progress", 4, attempt="p1.1"), E("host.timeout", 5, attempt="p1.1", budget="idle")],
        None, None),
    "late_contender_adopts": (
        [E("lease.acquired", session="s", holder=H1), E("compaction.summary_started", attempt="p1.1", generation=1)],
        [E("lease.acquired", session="s", holder=H1), E("session.adopted", attempt="p1.1", to="s/c0")],
        rotated(1), rotated(1)),
    "current_attempt_owns_compressor": (
        [E("attempt.claimed", attempt="p1.1", generation=1), E("attempt.claimed", attempt="p1.2", generation=2),
         E("compaction.summary_started", attempt="p1.2", generation=2), E("fence.begin_ok", attempt="p1.1")],
        [E("attempt.claimed", attempt="p1.1", generation=1), E("attempt.claimed", attempt="p1.2", generation=2),
         E("compaction.summary_started", attempt="p1.2", generation=2), E("cooldown.clear_skipped", session="s", attempt="p1.1"),
         E("compaction.refused", session="s", attempt="p1.1", reason="superseded"), E("fence.begin_ok", attempt="p1.2")],
        None, None),
    "refresher_tolerates_blips": (
        [E("lease.refresh_failed", session="s", holder=H1, failures=1), E("lease.expired_giveup", session="s", holder=H1)],
        [E("lease.refresh_failed", session="s", holder=H1, failures=1), E("lease.refresh_failed", session="s", holder=H1, failures=2),
         E("lease.expired_giveup", session="s", holder=H1)],
        None, None),
    "refresh_extends_own_row": (
        [E("lease.acquired", 0, session="s", holder=H1), E("lease.acquired", 70, session="s", holder=H2),
         E("lease.refreshed", 75, session="s", holder=H1)],
        [E("lease.acquired", 0, session="s", holder=H1), E("lease.refreshed", 30, session="s", holder=H1),
         E("lease.released", 40, session="s", holder=H1, held=True), E("lease.acquired", 50, session="s", holder=H2),
         E("lease.refreshed", 60, session="s", holder=H2)],
        None, None),
    "commit_holds_lease": (
        [E("commit.archived", 1, session="s", attempt="p1.2", rows=2)],
        [E("commit.archived", 1, session="s", attempt="p1.1", rows=2)],
        lease_held_by(H1), lease_held_by(H1)),
    "retry_never_overlaps_live_worker": (
        [E("lease.acquired", 0, session="s", holder=H1), E("lease.refreshed", 90, session="s", holder=H1),
         E("host.timeout", 100, attempt="p1.1", budget="ceiling"), E("lease.acquired", 110, session="s", holder=H2)],
        # lawful: the worker finished first; or its lease lapsed a TTL after its last renewal (a suspended process)
        [E("lease.acquired", 0, session="s", holder=H1), E("host.timeout", 100, attempt="p1.1", budget="ceiling"),
         E("compaction.finished", 120, session="s", attempt="p1.1", status="unchanged", reason="fence_cancelled"),
         E("lease.acquired", 121, session="s", holder=H2),
         E("lease.acquired", 200, session="t", holder="proc=p2:pid=101:attempt=1"),
         E("host.timeout", 300, attempt="p2.1", budget="ceiling"),
         E("lease.acquired", 310, session="t", holder="proc=p2:pid=101:attempt=2")],
        None, None),
})


def titled(source: str) -> Callable[[SessionStore], None]:
    """`s` rotated into `s/c`, which shows the title "T" set by `source`."""
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.create_session("s/c", now=1, parent="s", title="T", title_source=source)
        store.end_session("s", now=1, reason="compression")
    return arrange


RESET = {"from": "s", "to": "s/r", "reason": "x"}
CASES.update({
    "title_follows_conversation": (
        [E("session.titled", 0, session="s", title="T", source="derived", stored="T"),
         E("commit.published", 1, parent="s", child="s/c", attempt="p1.1")],
        [E("session.titled", 0, session="s", title="T", source="derived", stored="T"),
         E("commit.published", 1, parent="s", child="s/c", attempt="p1.1")],
        titled("user"), titled("derived")),
    "no_false_auto_reset": (
        [E("compaction.finished", 0, session="s", attempt="p1.1", status="unchanged", reason="cooldown"),
         E("session.auto_reset", 1, **RESET)],
        [E("compaction.finished", 0, session="s", attempt="p1.1", status="unchanged", reason="ineffective"),
         E("session.auto_reset", 1, **RESET)],
        None, None),
    "overflow_recovery_ignores_cooldown": (
        [E("turn.context_overflow", 0, session="s", tokens=900),
         E("compaction.blocked", 0, task="w", session="s", attempt="p1.1", reason="cooldown"),
         E("host.returned", 1, attempt="p1.1", status="unchanged", session="s", caller_session="s")],
        [E("turn.context_overflow", 0, session="s", tokens=900),
         E("compaction.blocked", 0, task="w", session="s", attempt="p1.1", reason="structural_backoff"),
         E("host.returned", 1, attempt="p1.1", status="unchanged", session="s", caller_session="s")],
        None, None),
})


def with_rows(retire_without_recount: bool) -> Callable[[SessionStore], None]:
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.append_messages("s", [{"role": "user", "content": "hi", "timestamp": 0.0},
                                    {"role": "assistant", "content": "ack: hi", "timestamp": 0.1}], now=0)
        if retire_without_recount:  # what a commit that retires rows but skips the recount leaves behind
            store._db.execute("UPDATE messages SET active = 0 WHERE session_id = 's'")
    return arrange


def answered_only(store: SessionStore) -> None:
    store.create_session("s", now=0)
    store.append_messages("s", [{"role": "assistant", "content": "ack: hi", "timestamp": 0.1}], now=0)


def struck(store: SessionStore) -> None:
    store.create_session("s", now=0)
    store.bump_ineffective("s")


CASES.update({
    "cancel_never_beats_admitted_commit": (
        [E("fence.begin_ok", 0, attempt="p1.1"), E("fence.finish", 10, attempt="p1.1"), E("fence.cancel_won", 10, attempt="p1.1", hard=True)],
        [E("fence.begin_ok", 0, attempt="p1.1"), E("fence.finish", 10, attempt="p1.1"), E("fence.cancel_won", 11, attempt="p1.2", hard=True)],
        None, None),
    "summary_starts_under_lease": (
        [E("lease.contended", 0, session="s", holder=H2), E("lease.released", 0, session="s", holder=H2, held=False),
         E("compaction.summary_started", 1, attempt="p1.2", generation=2)],
        [E("lease.acquired", 0, session="s", holder=H1), E("compaction.summary_started", 1, attempt="p1.1", generation=1),
         E("lease.released", 5, session="s", holder=H1, held=True)],
        None, None),
    "message_count_matches_active_rows": ([], [], with_rows(True), with_rows(False)),
    "completed_turn_persists_user_message": (
        [E("frontend.turn_submitted", 0, "cli", agent="main", text="hi"),
         E("turn.persisted", 1, "cli", session="s", caller_session="s", turn=1, role="assistant", row=1)],
        [E("frontend.turn_submitted", 0, "cli", agent="main", text="hi"),
         E("turn.persisted", 1, "cli", session="s", caller_session="s", turn=1, role="user", row=1),
         E("turn.persisted", 1, "cli", session="s", caller_session="s", turn=1, role="assistant", row=2)],
        answered_only, with_rows(False)),
    "no_summary_inside_cooldown": (
        [E("cooldown.set", 1, session="s", until=60.0, attempt="p2.1", error="summary_failed"),
         E("lease.acquired", 5, session="s", holder=H1), E("compaction.summary_started", 5, attempt="p1.1", generation=1)],
        [E("cooldown.set", 1, session="s", until=60.0, attempt="p2.1", error="summary_failed"),
         E("lease.acquired", 5, session="s", holder=H1), lambda store: store.clear_cooldown("s"),
         E("cooldown.cleared", 5, session="s", attempt="p1.1"), E("compaction.summary_started", 5, attempt="p1.1", generation=1)],
        cooling_until(60.0), cooling_until(60.0)),
    "abandoned_attempt_frees_lease": (
        [E("compaction.finished", 1, session="s", attempt="p1.1", status="unchanged", reason="lock_contended"),
         E("lease.contended", 2, session="s", holder=H2)],
        [E("lease.release_failed", 1, session="s", holder=H1, error="OperationalError"),
         E("compaction.finished", 1, session="s", attempt="p1.1", status="unchanged", reason="fence_cancelled"),
         E("lease.contended", 2, session="s", holder=H2)],
        lease_held_by(H1), lease_held_by(H1)),
    "timeout_backs_off": (
        [E("lease.acquired", 0, session="s", holder=H1), E("host.timeout", 10, attempt="p1.1", budget="idle"),
         E("lease.acquired", 20, session="s", holder=H2), E("compaction.summary_started", 20, attempt="p1.2", generation=2)],
        [E("lease.acquired", 0, session="s", holder=H1), E("host.timeout", 10, attempt="p1.1", budget="idle"),
         E("lease.acquired", 20, session="s", holder=H2), E("cooldown.cleared", 20, session="s", attempt="p1.2"),
         E("compaction.summary_started", 20, attempt="p1.2", generation=2)],
        None, None),
    "commit_below_threshold_clears_strikes": (
        [E("compaction.strike", 0, session="s", attempt="p1.1", strikes=1), E("lease.acquired", 5, session="s", holder=H2),
         E("compaction.committed", 6, session="s", attempt="p1.2", tokens=5, tokens_before=9)],
        [E("compaction.strike", 0, session="s", attempt="p1.1", strikes=1), E("lease.acquired", 5, session="s", holder=H2),
         lambda store: store.reset_ineffective("s"), E("compaction.committed", 6, session="s", attempt="p1.2", tokens=5, tokens_before=9)],
        struck, struck),
})


def test_a_newer_claim_alone_does_not_excuse_a_skipped_rollback():
    """#198 F1: the owner's rollback was skipped because a lock loser claimed later; only a newer writer excuses it."""
    owner_cleared = [E("lease.acquired", 0, session="s", holder=H1), lambda store: store.clear_cooldown("s"),
                     E("cooldown.cleared", 0, session="s", attempt="p1.1"),
                     E("attempt.claimed", 1, attempt="p1.2", generation=2), E("lease.contended", 1, session="s", holder=H2),
                     E("fence.cancel_won", 2, attempt="p1.1", hard=True),
                     E("attempt.restore_skipped_stale", 2, attempt="p1.1", generation=1, current=2)]
    finished = E("compaction.finished", 2, session="s", attempt="p1.1", status="unchanged", reason="hard_cancelled")
    newer_wrote = [lambda store: store.record_cooldown("s", 90.0, "summary_failed"),
                   E("cooldown.set", 2, session="s", until=90.0, attempt="p1.2", error="summary_failed")]
    assert check("hard_cancel_restores_cooldown", owner_cleared + [finished], cooling_until(60.0))
    assert check("hard_cancel_restores_cooldown", owner_cleared + newer_wrote + [finished], cooling_until(60.0)) == []


def test_only_a_host_timeout_before_the_users_stop_excuses_the_rollback():
    acquired = [E("lease.acquired", 0, session="s", holder=H1)]
    stop = [E("fence.cancel_won", 1, attempt="p1.1", hard=True)]
    timeout = [E("host.timeout", 20, attempt="p1.1", budget="idle"), lambda store: store.record_cooldown("s", 80.0, "timeout:idle"),
               E("cooldown.set", 20, session="s", until=80.0, attempt="p1.1", error="timeout:idle")]
    finished = [E("compaction.finished", 60, session="s", attempt="p1.1", status="unchanged", reason="hard_cancelled")]
    assert check("hard_cancel_restores_cooldown", acquired + stop + timeout + finished, one_head)
    assert check("hard_cancel_restores_cooldown", acquired + timeout + stop + finished, one_head) == []


def test_only_a_newer_attempt_that_took_the_lease_supersedes_a_rollback():
    claims = [E("attempt.claimed", 0, attempt="p1.1", generation=1), E("lease.acquired", 0, session="s", holder=H1),
              E("attempt.claimed", 1, attempt="p1.2", generation=2)]
    restored = E("attempt.restored", 2, attempt="p1.1", generation=1)
    newer_took_lease = [E("lease.released", 1, session="s", holder=H1, held=True), E("lease.acquired", 1, session="s", holder=H2)]
    newer_sat_out = [E("lease.contended", 1, session="s", holder=H2)]
    assert check("stale_attempt_writes_no_state", claims + newer_took_lease + [restored])
    assert check("stale_attempt_writes_no_state", claims + newer_sat_out + [restored]) == []


def test_only_the_overflow_recovery_may_summarize_inside_a_cooldown():
    """R23: the recovery of a provider-proven overflow bypasses the failure cooldown; no other automatic attempt does."""
    cooling = [E("cooldown.set", 1, session="s", until=60.0, attempt="p2.1", error="summary_failed")]
    summary = [E("lease.acquired", 5, session="s", holder=H1), E("compaction.summary_started", 5, attempt="p1.1", generation=1)]
    automatic = [E("host.started", 5, attempt="p1.1", session="s", mode="automatic")]
    overflow = [E("host.started", 5, attempt="p1.1", session="s", mode="overflow")]
    assert check("no_summary_inside_cooldown", cooling + automatic + summary, cooling_until(60.0))
    assert check("no_summary_inside_cooldown", cooling + overflow + summary, cooling_until(60.0)) == []


def test_an_overflow_recovery_refused_under_the_lease_for_a_cooldown_is_caught():
    """The recheck under the lease is a second place a cooldown can block the recovery; it counts like the gate."""
    events = [E("turn.context_overflow", 0, session="s", tokens=900),
              E("compaction.refused", 0, task="w", session="s", attempt="p1.1", reason="cooldown"),
              E("host.returned", 1, attempt="p1.1", status="unchanged", session="s", caller_session="s")]
    assert check("overflow_recovery_ignores_cooldown", events)


def three_rows_leased(store: SessionStore) -> None:
    store.create_session("s", now=0)
    store.append_messages("s", [{"role": "user", "content": f"m{i}", "timestamp": float(i)} for i in range(3)], now=1)
    store.try_acquire_lease("s", H1, now=1, ttl_s=60)


def archive_all(store: SessionStore) -> None:
    store.archive_and_compact("s", [{"role": "user", "content": "summary", "timestamp": 5.0}], holder=H1, watermark=3, now=5)


CASES.update({
    "archived_rows_were_in_input": (
        [E("compaction.watermark", 1, session="s", attempt="p1.1", watermark=3),
         E("compaction.input", 1, session="s", attempt="p1.1", rows=[1, 2]), archive_all,
         E("commit.archived", 5, session="s", attempt="p1.1", rows=1)],
        [E("compaction.watermark", 1, session="s", attempt="p1.1", watermark=3),
         E("compaction.input", 1, session="s", attempt="p1.1", rows=[1, 2, 3]), archive_all,
         E("commit.archived", 5, session="s", attempt="p1.1", rows=1)],
        three_rows_leased, three_rows_leased),
})


def test_the_current_attempt_is_never_refused_its_own_clear():
    own_check_removed = [E("attempt.claimed", attempt="p1.2", generation=2), E("compaction.summary_started", attempt="p1.2", generation=2),
                         E("cooldown.clear_skipped", session="s", attempt="p1.2")]
    stopped = [E("attempt.claimed", attempt="p1.2", generation=2), E("compaction.summary_started", attempt="p1.2", generation=2),
               E("host.timeout", attempt="p1.2", budget="idle"), E("cooldown.clear_skipped", session="s", attempt="p1.2")]
    assert check("current_attempt_owns_compressor", own_check_removed)
    assert check("current_attempt_owns_compressor", stopped) == []

@pytest.mark.parametrize("name", sorted(INVARIANTS))
def test_every_invariant_has_a_case_here(name):
    assert name in CASES, f"add a violating and a lawful history for {name}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_violating_history_is_caught(name):
    violating, _, arrange, _ = CASES[name]
    assert check(name, violating, arrange), f"{name} missed its violation"


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_lawful_twin_passes(name):
    _, lawful, _, arrange = CASES[name]
    assert check(name, lawful, arrange) == []


def test_a_job_started_after_its_host_gave_up_does_no_work():
    started_stale = [E("fence.cancel_won", 0, attempt="p1.1", hard=True), E("task.spawn", 0, "compress:p1.1"),
                     E("attempt.claimed", 0, attempt="p1.1", generation=1)]
    started_first = [E("task.spawn", 0, "compress:p1.1"), E("fence.cancel_won", 0, attempt="p1.1", hard=True),
                     E("attempt.claimed", 0, attempt="p1.1", generation=1)]
    assert check("stale_job_never_runs", started_stale)
    assert check("stale_job_never_runs", started_first) == []


def test_a_later_commit_does_not_cover_an_append_an_earlier_one_archived():
    """The row appended after commit A's capture was archived by A (lost); B's higher watermark never saw it live."""
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.append_messages("s", [{"role": "user", "content": c, "timestamp": t} for t, c in ((0.0, "a"), (0.1, "b"))], now=0)

    def late(store: SessionStore) -> None:
        store.append_messages("s", [{"role": "user", "content": "late", "timestamp": 1.0}], now=1)

    def archive_everything(store: SessionStore) -> None:
        store._db.execute("UPDATE messages SET active = 0, compacted = 1 WHERE session_id = 's'")
        store.append_messages("s", [{"role": "user", "content": "summary", "timestamp": 2.0}], now=2)

    events = [
        E("compaction.watermark", 0, session="s", attempt="p1.1", watermark=2),
        late, E("append.ok", 1, session="s", ids=[3]), E("turn.persisted", 1, session="s", row=3, role="user"),
        archive_everything, E("commit.archived", 2, session="s", attempt="p1.1", rows=1),
        E("compaction.watermark", 3, session="s", attempt="p1.2", watermark=4),
        E("commit.archived", 4, session="s", attempt="p1.2", rows=1),
    ]
    assert check("acknowledged_appends_survive", events, arrange), "a later commit's watermark hid the loss"
