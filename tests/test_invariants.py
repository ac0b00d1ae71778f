"""Every invariant can fail: a short history that breaks it is caught, and its lawful twin is not.

The histories are written by hand, event by event, with the event classes of `contract.events`; invariants
that read the store get a real SessionStore arranged into the state the history describes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import ROOT

from contract.events import (
    ActivityLabeled,
    AppendFailed,
    AppendOk,
    AttemptClaimed,
    AttemptRestored,
    AttemptRestoreSkippedStale,
    CommitArchived,
    CommitPublished,
    CompactionBlocked,
    CompactionCarriedUnread,
    CompactionCommitFailed,
    CompactionCommitted,
    CompactionError,
    CompactionFinished,
    CompactionInput,
    CompactionRefused,
    CompactionStrike,
    CompactionSummaryDone,
    CompactionSummaryProgress,
    CompactionSummaryStarted,
    CompactionWatermark,
    CooldownCleared,
    CooldownClearSkipped,
    CooldownRestored,
    CooldownSet,
    Event,
    ExternalRotated,
    FenceBeginOk,
    FenceBeginRefused,
    FenceCancelWon,
    FenceFinish,
    FenceRevoked,
    FrontendCtrlC,
    FrontendCtrlCGraceExpired,
    FrontendSessionEnded,
    FrontendTitleFailed,
    FrontendTurnFailed,
    FrontendTurnSubmitted,
    GatewayDelivered,
    GatewayTurnStarted,
    HardCancelFinished,
    HardCancelRequested,
    HostCommitOverrun,
    HostReturned,
    HostStarted,
    HostTimeout,
    HostUnwind,
    IsolatedAbandoned,
    LeaseAcquired,
    LeaseAcquireFailed,
    LeaseContended,
    LeaseExpiredGiveup,
    LeaseRefreshed,
    LeaseRefreshFailed,
    LeaseReleased,
    LeaseReleaseFailed,
    PointFaultFired,
    PoolSaturated,
    ProcessCrashed,
    ProcessRestarted,
    SessionAdopted,
    SessionAutoReset,
    SessionTitled,
    StallFired,
    StoreFaultFired,
    TaskExit,
    TaskSpawn,
    TurnContextOverflow,
    TurnOverflowDeferred,
    TurnPersisted,
)
from contract.events.turns import transcript_fingerprint
from contract.history import HistoryEvent
from contract.ids import AttemptId, HolderId, SessionId
from reference.config import CompactionConfig
from reference.store import SessionStore
from sim.invariants import INVARIANTS, Invariant, InvariantSet
from sim.invariants.facts import AttemptSet
from sim.invariants.invariant import handles, per_run
from sim.invariants.transcript import NoDuplicatePersistedTurn
from sim.scenario.loader import load_scenario
from sim.scenario.names import registry
from sim.scenario.runner import run_once

H1 = HolderId.of("p1", 100, 1)
H2 = HolderId.of("p1", 100, 2)
DEAD = HolderId.of("p9", 999, 1)
A1, A2, A3, A4, A5 = (AttemptId.of("p1", n) for n in range(1, 6))
S, CHILD, T = SessionId("s"), SessionId("s/c"), SessionId("t")
P2_H1, P2_H2 = HolderId.of("p2", 101, 1), HolderId.of("p2", 101, 2)
P2_A1 = AttemptId.of("p2", 1)
# Another agent's summary failed and recorded a cooldown on `s`.
OTHER_FAILED = CooldownSet(session=S, until_s=60.0, attempt=AttemptId.of("p2", 1), error="summary_failed")


@dataclass
class FakeSystem:
    store: SessionStore = field(default_factory=SessionStore)
    config: CompactionConfig = field(default_factory=lambda: CompactionConfig(
        lease_ttl_s=60, idle_timeout_s=10, ceiling_timeout_s=100, commit_overrun_slice_s=5, tail_count=1, gateway_writes_on_receipt=True,
        context_limit_tokens=100))
    ctrl_c_grace_s: float = 2.0
    dead: set[str] = field(default_factory=lambda: {DEAD})
    agents: dict[str, Any] = field(default_factory=dict)
    restarted: dict[str, str] = field(default_factory=dict)  # incarnation -> its process, once restarted

    def process_of(self, incarnation: str) -> str:
        return self.restarted.get(incarnation, incarnation)

    def holder_is_dead(self, holder: str) -> bool:
        return holder in self.dead

    def agent_of_task(self, task: str) -> str | None:
        """A test names a task acting for an agent's user `agent:<name>`."""
        kind, _, agent = task.partition(":")
        return agent if kind == "agent" else None


def E(event: Event, time: float = 0.0, task: str = "t") -> tuple[Event, float, str]:
    """One step of a history: the event, when it happened and which task recorded it."""
    return (event, time, task)


def finished(attempt: AttemptId, status: str, reason: str = "") -> CompactionFinished:
    return CompactionFinished(session=S, attempt=attempt, status=status, reason=reason)


def returned(status: str, *, session: SessionId = S, caller_session: SessionId = S, before: str = "a", after: str = "a") -> HostReturned:
    return HostReturned(attempt=A1, status=status, session=session, caller_session=caller_session, transcript_before=before,
                        transcript_after=after)


def timed_out(attempt: AttemptId, budget: str = "idle", since_progress_s: float = 10.0) -> HostTimeout:
    return HostTimeout(attempt=attempt, budget=budget, since_progress_s=since_progress_s)


def persisted(row: int, role: str = "user") -> TurnPersisted:
    return TurnPersisted(session=S, caller_session=S, turn=1, role=role, row=row)


def grace_expired() -> FrontendCtrlCGraceExpired:
    return FrontendCtrlCGraceExpired(agent="main", turn_abandoned=False)


def cancel_returned(cancelled: bool = True) -> HardCancelFinished:
    return HardCancelFinished(session=S, cancelled=cancelled)


def check(name: str, events: list[tuple], arrange: Callable[[SessionStore], None] | None = None) -> list[str]:
    system = FakeSystem()
    if arrange is not None:
        system.agents = arrange(system.store) or {}  # an arrangement may also return the agents, by name
    invariant = INVARIANTS[name](system)
    invariant.at_start()
    history, found = [], []
    for item in events:
        if callable(item):  # what a step did to the store besides recording its event
            item(system.store)
            continue
        event, time, task = item
        record = HistoryEvent(len(history), time, task, event)
        history.append(record)
        violation = invariant.on_event(record)
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


def ended_on_purpose(store: SessionStore) -> None:
    store.create_session("s", now=0)
    store.end_session("s", now=1, reason="session_reset")


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


def asked(question: str) -> Callable[[SessionStore], dict[str, Any]]:
    """main holds its question and the reply written as row 2: what its model answered."""
    def arrange(store: SessionStore) -> dict[str, Any]:
        held = [{"role": "user", "content": question, "timestamp": 1.0}, {"role": "assistant", "content": "a", "_row_id": 2}]
        return {"main": SimpleNamespace(agent=SimpleNamespace(messages=held, session_id=S))}
    return arrange


def cooling_until(until: float) -> Callable[[SessionStore], None]:
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.record_cooldown("s", until, "timeout:idle")
    return arrange



CASES: dict[str, tuple[list[Any], list[Any], Callable | None, Callable | None]] = {
    # name: (violating events, lawful events, arrange for violating, arrange for lawful)
    "hard_cancel_restores_cooldown": (
        [E(LeaseAcquired(session=S, holder=H1), 0), lambda store: store.clear_cooldown("s"),
         E(CooldownCleared(session=S, attempt=A1), 0), E(FenceCancelWon(attempt=A1, hard=True), 1),
         E(finished(A1, "unchanged", "hard_cancelled"), 1)],
        [E(LeaseAcquired(session=S, holder=H1), 0), lambda store: store.clear_cooldown("s"),
         E(CooldownCleared(session=S, attempt=A1), 0), E(FenceCancelWon(attempt=A1, hard=True), 1),
         lambda store: store.record_cooldown("s", 60.0, "timeout:idle"), E(CooldownRestored(session=S, attempt=A1), 1),
         E(finished(A1, "unchanged", "hard_cancelled"), 1)],
        cooling_until(60.0), cooling_until(60.0)),
    "cooldown_never_shortened": (
        [E(CooldownSet(session=S, until_s=65.0, attempt=A1, error="timeout:idle"), 5),
         E(CooldownSet(session=S, until_s=27.0, attempt=A1, error="timeout:idle"), 26)],
        [E(CooldownSet(session=S, until_s=65.0, attempt=A1, error="timeout:idle"), 5),
         E(CooldownSet(session=S, until_s=27.0, attempt=A1, error="timeout:idle"), 26)],
        cooling_until(27.0), cooling_until(65.0)),
    "cancelled_attempt_never_acquires": (
        [E(FenceCancelWon(attempt=A1, hard=False), 5), E(LeaseAcquired(session=S, holder=H1), 10)],
        [E(LeaseAcquired(session=S, holder=H1), 0), E(FenceCancelWon(attempt=A1, hard=False), 5)],
        None, None),
    "pool_admission_bounded": (
        [E(TaskSpawn(), 0, f"compress:p1.{i}") for i in range(1, 6)],
        [E(TaskSpawn(), 0, f"compress:p1.{i}") for i in range(1, 5)]
        + [E(finished(A1, "committed"), 1), E(TaskSpawn(), 2, "compress:p1.5"), E(TaskSpawn(), 2, "compress:p2.1")],
        None, None),
    "no_commit_after_cancel": (
        [E(FenceCancelWon(attempt=A1, hard=False)), E(FenceBeginOk(attempt=A1))],
        [E(FenceBeginOk(attempt=A1)), E(FenceRevoked(attempt=A1, commit_in_flight=True)),
         E(CommitArchived(session=S, attempt=A1, rows=2))],
        None, None),
    "no_admission_after_ctrl_c": (
        [E(HostStarted(attempt=A1, session=S, mode="forced"), 0, "agent:main"),
         E(FrontendCtrlC(agent="main", turn_running=True), 1, "ctrl_c"), E(HardCancelRequested(session=S), 1, "ctrl_c"),
         E(FenceBeginOk(attempt=A1), 1)],
        [E(HostStarted(attempt=A1, session=S, mode="forced"), 0, "agent:main"), E(FenceBeginOk(attempt=A1), 1),
         E(FrontendCtrlC(agent="main", turn_running=True), 1, "ctrl_c"), E(HardCancelRequested(session=S), 1, "ctrl_c")],
        None, None),
    "summarized_attempt_refused_only_for_a_cause": (
        [E(HostStarted(attempt=A1, session=S, mode="forced"), 0), E(CompactionSummaryDone(attempt=A1, chars=10), 5),
         E(FenceBeginRefused(attempt=A1, reason="deadline"), 6),
         E(CompactionRefused(session=S, attempt=A1, reason="commit_fence_cancelled"), 6)],
        [E(HostStarted(attempt=A1, session=S, mode="forced"), 0), E(CompactionSummaryDone(attempt=A1, chars=10), 5),
         E(FenceBeginRefused(attempt=A1, reason="deadline"), 100),
         E(CompactionRefused(session=S, attempt=A1, reason="commit_fence_cancelled"), 100)],
        None, None),
    "lease_held_across_commit": (
        [E(FenceBeginOk(attempt=A1)), E(LeaseReleased(session=S, holder=H1, held=True))],
        [E(FenceBeginOk(attempt=A1)), E(CommitArchived(session=S, attempt=A1, rows=2)), E(LeaseReleased(session=S, holder=H1, held=True))],
        None, None),
    "single_live_head": ([E(CommitPublished(parent=S, child=CHILD, attempt=A1))], [E(CommitPublished(parent=S, child=CHILD, attempt=A1))],
                         two_live_heads, one_head),
    "one_continuation_per_parent": ([E(CommitPublished(parent=S, child=CHILD, attempt=A1))], [E(CommitPublished(parent=S, child=CHILD, attempt=A1))],
                                    rotated(2), rotated(1)),
    "no_orphan_parent": ([E(CommitPublished(parent=S, child=CHILD, attempt=A1))], [E(CommitPublished(parent=S, child=CHILD, attempt=A1))],
                         rotated(0), rotated(1)),
    "caller_session_follows_rotation": (
        [E(returned("rotated", session=CHILD, caller_session=S))],
        [E(returned("rotated", session=CHILD, caller_session=CHILD))],
        None, None),
    "no_duplicate_persisted_turn": ([E(AppendOk(session=S, ids=[1, 2]))], [E(AppendOk(session=S, ids=[1]))], duplicated, one_head),
    "acknowledged_appends_survive": (
        [E(persisted(1))],
        [E(persisted(1)), E(CompactionWatermark(session=S, attempt=A1, watermark=None)), E(CommitArchived(session=S, attempt=A1, rows=1))],
        lost_append, lost_append),
    "aborted_attempt_leaves_parent_unchanged": (
        [E(AttemptClaimed(attempt=A1, generation=1), task="w1"), E(AppendOk(session=S, ids=[7]), task="w1"),
         E(finished(A1, "failed"), task="w1")],
        [E(AttemptClaimed(attempt=A1, generation=1), task="w1"), E(AppendOk(session=S, ids=[7]), task="w1"),
         E(finished(A1, "rotated"), task="w1")],
        ended_on_purpose, ended_on_purpose),
    "caller_transcript_only_through_commit": (
        [E(returned("unchanged", before="a", after="b"))],
        [E(returned("committed", before="a", after="b"))],
        None, None),
    "lease_mutual_exclusion": (
        [E(LeaseAcquired(session=S, holder=H1), 0), E(LeaseAcquired(session=S, holder=H2), 30)],
        [E(LeaseAcquired(session=S, holder=H1), 0), E(LeaseAcquired(session=S, holder=H2), 61)],
        None, None),
    "appends_never_refused_by_lease": (
        [E(AppendFailed(session=S, error="SessionCompressionBusyError"))],
        [E(AppendFailed(session=S, error="OperationalError"))],
        None, None),
    "lease_released_within_ttl": (
        [E(finished(A1, "unchanged"), 10), E(LeaseRefreshed(session=S, holder=H1), 20)],
        [E(finished(A1, "unchanged"), 10)],
        None, None),
    "dead_holder_reclaimable": ([E(ProcessCrashed(process="p9", pid=999)), E(LeaseContended(session=S, holder=H1))],
                                [E(ProcessCrashed(process="p9", pid=999)), E(LeaseContended(session=S, holder=H1))],
                                leased_by(DEAD, 100), leased_by(H2, 100)),
    "turn_fails_only_expectedly": (
        [E(PointFaultFired(fault=0, fault_kind="host_interrupt", firing=1, point="host.wait")),
         E(FrontendTurnFailed(agent="main", error="RuntimeError: can't release lock: this task does not own it"))],
        [E(PointFaultFired(fault=0, fault_kind="host_interrupt", firing=1, point="host.wait")),
         E(FrontendTurnFailed(agent="main", error="ExceptionGroup: Exceptions from nursery (1 sub-exception)")),
         E(FrontendTurnFailed(agent="main", error="PersistenceFailed: session 'D' was closed by compression"))],
        None, None),
    "worker_raises_only_after_fault": (
        [E(StallFired(fault=0, fault_kind="stall", firing=1, point="provider.progress", duration_s=75.0)),
         E(CompactionError(attempt=A1, error="ExceptionGroup('Exceptions from nursery', [TypeError('cannot unpack')])"))],
        [E(StoreFaultFired(fault=0, fault_kind="db_write_failure", firing=1, op="archive_and_compact", phase="before_commit")),
         E(CompactionError(attempt=A1, error="OperationalError('disk I/O error (injected)')"))],
        None, None),
    "stale_attempt_writes_no_state": (
        [E(timed_out(A1)), E(CooldownCleared(session=S, attempt=A1))],
        [E(CooldownCleared(session=S, attempt=A1))],
        None, None),
    "would_grow_latches_breaker": (
        [E(CompactionRefused(session=S, attempt=AttemptId.of("p1", i), reason="would_grow")) for i in range(3)],
        [E(CompactionRefused(session=S, attempt=A1, reason="would_grow")),
         E(CompactionCommitted(session=S, attempt=A2, tokens=5, tokens_before=9)),
         E(CompactionRefused(session=S, attempt=A3, reason="would_grow")), E(CompactionRefused(session=S, attempt=A4, reason="would_grow")),
         E(HostStarted(attempt=A5, session=S, mode="forced")), E(CompactionRefused(session=S, attempt=A5, reason="would_grow"))],
        None, None),
    "idle_timeout_within_bounds": (
        [E(HostStarted(attempt=A1, session=S, mode="automatic"), 0), E(CompactionSummaryProgress(attempt=A1), 1),
         E(timed_out(A1, "idle", 19.0), 20)],
        [E(HostStarted(attempt=A1, session=S, mode="automatic"), 0), E(CompactionSummaryProgress(attempt=A1), 1),
         E(timed_out(A1, "idle", 10.0), 11)],
        None, None),
    "hung_commit_reported": (
        [E(FenceBeginOk(attempt=A1), 0), E(timed_out(A1), 1), E(FenceFinish(attempt=A1), 20)],
        [E(FenceBeginOk(attempt=A1), 0), E(timed_out(A1), 1), E(HostCommitOverrun(attempt=A1, waited_s=5.0), 6),
         E(FenceFinish(attempt=A1), 20), E(FenceBeginOk(attempt=A2), 30), E(timed_out(A2), 31), E(FenceFinish(attempt=A2), 33),
         E(persisted(1), 500)],
        None, None),
    "stale_job_never_runs": (
        [E(timed_out(A1)), E(CompactionSummaryStarted(attempt=A1, generation=1))],
        [E(CompactionSummaryStarted(attempt=A1, generation=1)), E(timed_out(A1))],
        None, None),
    "next_turn_persists_after_ctrl_c": (
        [E(grace_expired()), E(FrontendTurnSubmitted(agent="main", text="hi")), E(FrontendTurnFailed(agent="main", error="x"))],
        [E(grace_expired()), E(FrontendTurnSubmitted(agent="main", text="hi")), E(persisted(1)),
         E(FrontendTurnSubmitted(agent="main", text="later")), E(FrontendTurnFailed(agent="main", error="x"))],
        None, None),
    "hard_cancel_frees_lease": (
        [E(HostStarted(attempt=A1, session=S, mode="automatic"), 0), E(LeaseAcquired(session=S, holder=H1), 0),
         E(HardCancelRequested(session=S), 1), E(cancel_returned(), 3)],
        [E(HostStarted(attempt=A1, session=S, mode="automatic"), 0), E(LeaseAcquired(session=S, holder=H1), 0),
         E(HardCancelRequested(session=S), 1), E(LeaseReleased(session=S, holder=H1, held=True), 1), E(cancel_returned(), 3)],
        None, None),
    "deliberate_end_is_final": (
        [E(FrontendSessionEnded(session=S, reason="session_reset")), E(CommitPublished(parent=S, child=CHILD, attempt=A1))],
        [E(FrontendSessionEnded(session=S, reason="session_reset")),
         E(CompactionCommitFailed(session=S, attempt=A1, error="ParentEndedError('parent ended')"))],
        ended_as("compression"), ended_as("session_reset")),
    "closed_write_adopts_live_tip": (
        [E(AppendFailed(session=S, error="SessionClosedByCompression")), E(FrontendTurnFailed(agent="main", error="PersistenceFailed"))],
        [E(AppendFailed(session=S, error="SessionClosedByCompression")), E(FrontendTurnFailed(agent="main", error="PersistenceFailed"))],
        two_hops(tip_live=True), two_hops(tip_live=False)),
    "rewind_slots_stay_under_watermark": (
        [E(CompactionWatermark(session=S, attempt=A1, watermark=2)), E(CommitArchived(session=S, attempt=A1, rows=3))],
        [E(CompactionWatermark(session=S, attempt=A1, watermark=2)), E(CommitArchived(session=S, attempt=A1, rows=3))],
        archived_with_tail(0), archived_with_tail(1)),
    "durable_messages_match_rows": (
        [E(returned("timeout"))],
        [E(returned("timeout"))],
        holding("hel"), holding("hello")),
}


def lease_held_by(holder: str) -> Callable[[SessionStore], None]:
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.try_acquire_lease("s", holder, now=0, ttl_s=60)
    return arrange


CASES.update({
    "no_progress_after_give_up": (
        [E(timed_out(A1), 5), E(CompactionSummaryProgress(attempt=A1), 6)],
        [E(CompactionSummaryProgress(attempt=A1), 4), E(timed_out(A1), 5)],
        None, None),
    "late_contender_adopts": (
        [E(LeaseAcquired(session=S, holder=H1)), E(CompactionSummaryStarted(attempt=A1, generation=1))],
        [E(LeaseAcquired(session=S, holder=H1)), E(SessionAdopted(from_session=S, to_session=SessionId("s/c0"), attempt=A1))],
        rotated(1), rotated(1)),
    "current_attempt_owns_compressor": (
        [E(AttemptClaimed(attempt=A1, generation=1)), E(AttemptClaimed(attempt=A2, generation=2)),
         E(CompactionSummaryStarted(attempt=A2, generation=2)), E(FenceBeginOk(attempt=A1))],
        [E(AttemptClaimed(attempt=A1, generation=1)), E(AttemptClaimed(attempt=A2, generation=2)),
         E(CompactionSummaryStarted(attempt=A2, generation=2)), E(CooldownClearSkipped(session=S, attempt=A1)),
         E(CompactionRefused(session=S, attempt=A1, reason="superseded")), E(FenceBeginOk(attempt=A2))],
        None, None),
    "refresher_tolerates_blips": (
        [E(LeaseRefreshFailed(session=S, holder=H1, failures=1)), E(LeaseExpiredGiveup(session=S, holder=H1))],
        [E(LeaseRefreshFailed(session=S, holder=H1, failures=1)), E(LeaseRefreshFailed(session=S, holder=H1, failures=2)),
         E(LeaseExpiredGiveup(session=S, holder=H1))],
        None, None),
    "refresh_extends_own_row": (
        [E(LeaseAcquired(session=S, holder=H1), 0), E(LeaseAcquired(session=S, holder=H2), 70), E(LeaseRefreshed(session=S, holder=H1), 75)],
        [E(LeaseAcquired(session=S, holder=H1), 0), E(LeaseRefreshed(session=S, holder=H1), 30),
         E(LeaseReleased(session=S, holder=H1, held=True), 40), E(LeaseAcquired(session=S, holder=H2), 50),
         E(LeaseRefreshed(session=S, holder=H2), 60)],
        None, None),
    "commit_holds_lease": (
        [E(CommitArchived(session=S, attempt=A2, rows=2), 1)],
        [E(CommitArchived(session=S, attempt=A1, rows=2), 1)],
        lease_held_by(H1), lease_held_by(H1)),
    "retry_never_overlaps_live_worker": (
        [E(LeaseAcquired(session=S, holder=H1), 0), E(LeaseRefreshed(session=S, holder=H1), 90),
         E(timed_out(A1, "ceiling", 100.0), 100), E(LeaseAcquired(session=S, holder=H2), 110)],
        # lawful: the worker finished first; or its lease lapsed a TTL after its last renewal (a suspended process)
        [E(LeaseAcquired(session=S, holder=H1), 0), E(timed_out(A1, "ceiling", 100.0), 100),
         E(finished(A1, "unchanged", "fence_cancelled"), 120), E(LeaseAcquired(session=S, holder=H2), 121),
         E(LeaseAcquired(session=T, holder=P2_H1), 200), E(timed_out(P2_A1, "ceiling", 100.0), 300),
         E(LeaseAcquired(session=T, holder=P2_H2), 310)],
        None, None),
})


def titled(source: str) -> Callable[[SessionStore], None]:
    """`s` rotated into `s/c`, which shows the title "T" set by `source`."""
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.create_session("s/c", now=1, parent="s", title="T", title_source=source)
        store.end_session("s", now=1, reason="compression")
    return arrange


def shown_by(titles: dict[str, str]) -> Callable[[SessionStore], None]:
    """One conversation per session named, each showing its title."""
    def arrange(store: SessionStore) -> None:
        for sid, title in titles.items():
            store.create_session(sid, now=0, title=title, title_source="user")
    return arrange


RESET = SessionAutoReset(from_session=S, to_session=SessionId("s/r"), reason="x")
OVERFLOWED = TurnContextOverflow(session=S, tokens=900)
RECOVERY_RETURNED = HostReturned(attempt=A1, status="unchanged", session=S, caller_session=S, transcript_before="",
                                 transcript_after="")
CASES.update({
    "title_follows_conversation": (
        [E(SessionTitled(session=S, title="T", source="derived", stored="T"), 0), E(CommitPublished(parent=S, child=CHILD, attempt=A1), 1)],
        [E(SessionTitled(session=S, title="T", source="derived", stored="T"), 0), E(CommitPublished(parent=S, child=CHILD, attempt=A1), 1)],
        titled("user"), titled("derived")),
    "title_names_one_conversation": (
        [E(SessionTitled(session=S, title="T", source="user", stored="T"), 0)],
        [E(SessionTitled(session=S, title="T", source="user", stored="T"), 0)],
        shown_by({"s": "T", "t": "T"}), shown_by({"s": "T", "t": "U"})),
    "no_false_auto_reset": (
        [E(finished(A1, "unchanged", "cooldown"), 0), E(RESET, 1)],
        [E(finished(A1, "unchanged", "ineffective"), 0), E(RESET, 1)],
        None, None),
    "overflow_recovery_ignores_cooldown": (
        [E(OVERFLOWED, 0), E(CompactionBlocked(session=S, attempt=A1, reason="cooldown"), 0, "w"), E(RECOVERY_RETURNED, 1)],
        [E(OVERFLOWED, 0), E(CompactionBlocked(session=S, attempt=A1, reason="structural_backoff"), 0, "w"), E(RECOVERY_RETURNED, 1)],
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
        [E(FenceBeginOk(attempt=A1), 0), E(FenceFinish(attempt=A1), 10), E(FenceCancelWon(attempt=A1, hard=True), 10)],
        [E(FenceBeginOk(attempt=A1), 0), E(FenceFinish(attempt=A1), 10), E(FenceCancelWon(attempt=A2, hard=True), 11)],
        None, None),
    "summary_starts_under_lease": (
        [E(LeaseContended(session=S, holder=H2), 0), E(LeaseReleased(session=S, holder=H2, held=False), 0),
         E(CompactionSummaryStarted(attempt=A2, generation=2), 1)],
        [E(LeaseAcquired(session=S, holder=H1), 0), E(CompactionSummaryStarted(attempt=A1, generation=1), 1),
         E(LeaseReleased(session=S, holder=H1, held=True), 5)],
        None, None),
    "message_count_matches_active_rows": ([], [], with_rows(True), with_rows(False)),
    "completed_turn_persists_user_message": (
        [E(FrontendTurnSubmitted(agent="main", text="hi"), 0, "cli"), E(persisted(1, "assistant"), 1, "cli")],
        [E(FrontendTurnSubmitted(agent="main", text="hi"), 0, "cli"), E(persisted(1, "user"), 1, "cli"), E(persisted(2, "assistant"), 1, "cli")],
        answered_only, with_rows(False)),
    "no_summary_inside_cooldown": (
        [E(OTHER_FAILED, 1), E(LeaseAcquired(session=S, holder=H1), 5), E(CompactionSummaryStarted(attempt=A1, generation=1), 5)],
        [E(OTHER_FAILED, 1), E(LeaseAcquired(session=S, holder=H1), 5), lambda store: store.clear_cooldown("s"),
         E(CooldownCleared(session=S, attempt=A1), 5), E(CompactionSummaryStarted(attempt=A1, generation=1), 5)],
        cooling_until(60.0), cooling_until(60.0)),
    "abandoned_attempt_frees_lease": (
        [E(finished(A1, "unchanged", "lock_contended"), 1), E(LeaseContended(session=S, holder=H2), 2)],
        [E(LeaseReleaseFailed(session=S, holder=H1, error="OperationalError"), 1),
         E(finished(A1, "unchanged", "fence_cancelled"), 1), E(LeaseContended(session=S, holder=H2), 2)],
        lease_held_by(H1), lease_held_by(H1)),
    "timeout_backs_off": (
        [E(LeaseAcquired(session=S, holder=H1), 0), E(timed_out(A1, "idle"), 10), E(FenceCancelWon(attempt=A1, hard=False), 10),
         E(LeaseAcquired(session=S, holder=H2), 20), E(CompactionSummaryStarted(attempt=A2, generation=2), 20)],
        [E(LeaseAcquired(session=S, holder=H1), 0), E(timed_out(A1, "idle"), 10),
         E(LeaseAcquired(session=S, holder=H2), 20), E(CooldownCleared(session=S, attempt=A2), 20),
         E(CompactionSummaryStarted(attempt=A2, generation=2), 20)],
        None, None),
    "commit_below_threshold_clears_strikes": (
        [E(CompactionStrike(session=S, attempt=A1, strikes=1), 0), E(LeaseAcquired(session=S, holder=H2), 5),
         E(CompactionCommitted(session=S, attempt=A2, tokens=5, tokens_before=9), 6)],
        [E(CompactionStrike(session=S, attempt=A1, strikes=1), 0), E(LeaseAcquired(session=S, holder=H2), 5),
         lambda store: store.reset_ineffective("s"), E(CompactionCommitted(session=S, attempt=A2, tokens=5, tokens_before=9), 6)],
        struck, struck),
})


PROVIDER_FAILED = [E(LeaseAcquired(session=S, holder=H1), 0), E(TaskExit(error="InterruptedError"), 1, "summary:p1.1")]
NEXT_SUMMARY = [E(LeaseAcquired(session=S, holder=H2), 20), E(CompactionSummaryStarted(attempt=A2, generation=2), 20)]

CASES.update({
    "failed_summary_backs_off": (
        PROVIDER_FAILED + NEXT_SUMMARY,
        PROVIDER_FAILED + [E(FenceCancelWon(attempt=A1, hard=True), 2)] + NEXT_SUMMARY,  # the user's stop rolled it back
        None, None),
})


def latched(store: SessionStore) -> None:
    """Session `s` whose ineffective count reached the default breaker threshold (2)."""
    struck(store)
    store.bump_ineffective("s")


COMMIT_FAILED = [E(LeaseAcquired(session=S, holder=H1), 0), E(CompactionCommitFailed(session=S, attempt=A1, error="OperationalError()"), 1)]
AUTOMATIC_START = E(HostStarted(attempt=A1, session=S, mode="automatic"), 0)

CASES.update({
    "failed_summary_never_commits": (
        [E(TaskExit(error="ProviderError"), 1, "summary:p1.1"), E(CompactionCommitted(session=S, attempt=A1, tokens=5, tokens_before=9), 2)],
        [E(TaskExit(error="ProviderError"), 1, "summary:p1.1"), E(CompactionCommitted(session=S, attempt=A2, tokens=5, tokens_before=9), 2)],
        None, None),
    "failed_commit_backs_off": (
        COMMIT_FAILED + NEXT_SUMMARY,
        COMMIT_FAILED + [E(LeaseAcquired(session=S, holder=H2), 61), E(CompactionSummaryStarted(attempt=A2, generation=2), 61)],
        None, None),
    "breaker_blocks_only_when_latched": (
        [AUTOMATIC_START, E(CompactionBlocked(session=S, attempt=A1, reason="ineffective"), 0)],
        [AUTOMATIC_START, E(CompactionBlocked(session=S, attempt=A1, reason="ineffective"), 0)],
        one_head, latched),
})


HARD_CANCEL_IN_SUMMARY = E(FenceCancelWon(attempt=A1, hard=True), 5)

CASES.update({
    "hard_cancel_abandons_summary": (
        [HARD_CANCEL_IN_SUMMARY, E(TaskExit(), 20, "summary:p1.1")],
        [HARD_CANCEL_IN_SUMMARY, E(IsolatedAbandoned(call="summary:p1.1"), 5), E(TaskExit(), 20, "summary:p1.1")],
        None, None),
})


def test_a_summary_call_ending_at_the_moment_of_the_hard_cancel_may_beat_its_delivery():
    assert check("hard_cancel_abandons_summary", [HARD_CANCEL_IN_SUMMARY, E(TaskExit(), 5, "summary:p1.1")]) == []


def test_only_the_failures_own_record_binds_another_process_not_the_hosts_timeout_record():
    other_process = [E(LeaseAcquired(session=S, holder=P2_H2), 20), E(CompactionSummaryStarted(attempt=AttemptId.of("p2", 2), generation=2), 20)]
    def record(error: str) -> tuple[Event, float, str]:
        return E(CooldownSet(session=S, until_s=69.0, attempt=A1, error=error), 9)
    assert check("failed_summary_backs_off", PROVIDER_FAILED + [record("timeout:idle")] + other_process) == []
    assert check("failed_summary_backs_off", PROVIDER_FAILED + [record("summary_failed: ProviderError")] + other_process)


def test_a_clear_that_raised_after_its_commit_lifts_the_failures_record_for_another_process():
    recorded = E(CooldownSet(session=S, until_s=69.0, attempt=A1, error="summary_failed: ProviderError"), 9)
    forced = E(LeaseAcquired(session=S, holder=P2_H1), 15)
    def clear_failed(phase: str) -> tuple[Event, float, str]:
        return E(StoreFaultFired(fault=0, fault_kind="db_write_failure", firing=1, op="clear_cooldown", phase=phase), 15, "compress:p2.1")
    other_process = [E(LeaseAcquired(session=S, holder=P2_H2), 20), E(CompactionSummaryStarted(attempt=AttemptId.of("p2", 2), generation=2), 20)]
    assert check("failed_summary_backs_off", PROVIDER_FAILED + [recorded, forced, clear_failed("after_commit")] + other_process) == []
    assert check("failed_summary_backs_off", PROVIDER_FAILED + [recorded, forced, clear_failed("before_commit")] + other_process)
    assert check("failed_summary_backs_off", PROVIDER_FAILED + [recorded, forced, clear_failed("after_commit")] + NEXT_SUMMARY)


def test_a_strike_that_latched_the_breaker_after_the_start_explains_the_refusal_though_a_commit_reset_it():
    assert check("breaker_blocks_only_when_latched", [
        AUTOMATIC_START, lambda store: [store.bump_ineffective("s") for _ in range(2)], E(CompactionStrike(session=S, attempt=A2, strikes=2), 1),
        lambda store: store.reset_ineffective("s"),
        E(CompactionRefused(session=S, attempt=A1, reason="ineffective"), 2),
    ], one_head) == []


def routed_after(reason: str) -> Callable[[SessionStore], dict[str, Any]]:
    """Session `s`, ended with `reason` before the run's turn, still routed by the agent `main`."""
    def arrange(store: SessionStore) -> dict[str, Any]:
        ended_as(reason)(store)
        return {"main": SimpleNamespace(agent=SimpleNamespace(session_id="s"))}
    return arrange


def reopen(store: SessionStore) -> None:
    store.reopen_if_explicitly_closed("s")


TURN_STARTS = E(FrontendTurnSubmitted(agent="main", text="hi"), 2)

CASES.update({
    "explicit_close_cleared_at_turn_start": (
        [TURN_STARTS, E(persisted(1), 2)],
        [TURN_STARTS, reopen, E(persisted(1), 2)],
        routed_after("tui_close"), routed_after("tui_close")),
})


def labeled(attempt: AttemptId, label: str, *, terminal: bool = False) -> ActivityLabeled:
    return ActivityLabeled(session=S, attempt=attempt, label=label, terminal=terminal)


CASES.update({
    "no_relabel_after_terminal": (
        [E(labeled(A1, "started"), 0), E(labeled(A1, "timed_out", terminal=True), 5), E(labeled(A1, "in_progress"), 6)],
        [E(labeled(A1, "started"), 0), E(labeled(A1, "timed_out", terminal=True), 5), E(labeled(A2, "started"), 70)],
        None, None),
    "running_summary_labelled": (
        [E(labeled(A1, "started"), 0), E(labeled(A1, "timed_out", terminal=True), 5),
         E(CompactionSummaryStarted(attempt=A2, generation=2), 70), E(labeled(A2, "in_progress"), 72)],
        [E(labeled(A1, "started"), 0), E(labeled(A1, "timed_out", terminal=True), 5), E(labeled(A2, "started"), 70),
         E(CompactionSummaryStarted(attempt=A2, generation=2), 70)],
        None, None),
})

def gateway_in_p1(received: bool) -> Callable[[SessionStore], dict[str, Any]]:
    """The gateway agent `bot` runs in process p1; its platform message tg:1 has a user row if `received`."""
    def arrange(store: SessionStore) -> dict[str, Any]:
        store.create_session("s", now=0)
        if received:
            message = {"role": "user", "content": "hi", "timestamp": 0.0, "platform_message_id": "tg:1"}
            store.append_messages("s", [message], now=0)
        return {"bot": SimpleNamespace(spec=SimpleNamespace(process="p1"))}
    return arrange


GATEWAY_COMPACTS_THEN_DIES = [E(GatewayTurnStarted(agent="bot", platform_message_id="tg:1"), 0, "agent:bot"),
                              E(HostStarted(attempt=A1, session=S, mode="automatic"), 0, "agent:bot"),
                              E(ProcessCrashed(process="p1", pid=100), 5)]

CASES.update({
    "received_message_survives_gateway_crash": (
        GATEWAY_COMPACTS_THEN_DIES, GATEWAY_COMPACTS_THEN_DIES, gateway_in_p1(False), gateway_in_p1(True)),
})


def test_a_failed_receipt_write_leaves_the_message_to_the_flush():
    """Fail-open (#104653): a receipt write that raised promises nothing; the turn's flush is the only writer."""
    failed = [GATEWAY_COMPACTS_THEN_DIES[0], E(AppendFailed(session=S, error="OperationalError"), 0, "agent:bot"),
              *GATEWAY_COMPACTS_THEN_DIES[1:]]
    assert check("received_message_survives_gateway_crash", failed, gateway_in_p1(False)) == []


def test_a_turn_still_writing_on_receipt_when_the_gateway_dies_promised_nothing():
    assert check("received_message_survives_gateway_crash", GATEWAY_COMPACTS_THEN_DIES[::2], gateway_in_p1(False)) == []


def test_a_close_made_during_the_turn_must_outlive_the_turn():
    """hermes O: a close that lands mid-turn fails that turn's rotation; nothing but the next turn's start clears it."""
    closed_mid_turn = [reopen, TURN_STARTS, lambda store: store.end_session("s", now=3, reason="webhook_complete"),
                       E(FrontendSessionEnded(session=S, reason="webhook_complete"), 3)]
    assert check("explicit_close_cleared_at_turn_start", closed_mid_turn + [reopen, E(persisted(1), 4)], routed_after("tui_close"))
    assert check("explicit_close_cleared_at_turn_start", closed_mid_turn + [E(persisted(1), 4)], routed_after("tui_close")) == []


def test_a_boundary_is_no_explicit_close():
    assert check("explicit_close_cleared_at_turn_start", [TURN_STARTS, E(persisted(1), 2)], routed_after("session_switch")) == []

def test_a_users_stop_after_the_host_timeout_keeps_the_timeout_backoff():
    """hermes A: the host's timeout record wins over the same attempt's later rollback (row 7)."""
    timed_out_then_stopped = [E(LeaseAcquired(session=S, holder=H1), 0), E(timed_out(A1, "idle"), 10),
                              E(FenceCancelWon(attempt=A1, hard=True), 11)]
    assert check("timeout_backs_off", timed_out_then_stopped + NEXT_SUMMARY)


def test_a_timeout_binds_its_own_compressor_only_once_its_host_has_won_the_fence():
    """R2 orders the cancel's win before the record: while a worker stalled in lease setup holds the fence lock,
    nothing of the timeout is written, and a next attempt that took the expired lease owes it nothing yet."""
    waiting = [E(LeaseAcquired(session=S, holder=H1), 0), E(timed_out(A1, "idle"), 10)]
    assert check("timeout_backs_off", waiting + NEXT_SUMMARY) == []
    assert check("timeout_backs_off", waiting + [E(FenceCancelWon(attempt=A1, hard=False), 15)] + NEXT_SUMMARY)


def test_overflow_recovery_runs_past_the_timeout_backoff():
    """R23: the provider proved the overflow, so the one attempt that can fix it runs inside the backoff."""
    timed_out_then = [E(HostStarted(attempt=A1, session=S, mode="automatic"), 0, "agent:main"),
                      E(LeaseAcquired(session=S, holder=H1), 0), E(timed_out(A1, "idle"), 10),
                      E(FenceCancelWon(attempt=A1, hard=False), 10)]
    recovery = [E(HostStarted(attempt=A2, session=S, mode="overflow"), 20, "agent:main")]
    assert check("timeout_backs_off", timed_out_then + recovery + NEXT_SUMMARY) == []
    automatic = [E(HostStarted(attempt=A2, session=S, mode="automatic"), 20, "agent:main")]
    assert check("timeout_backs_off", timed_out_then + automatic + NEXT_SUMMARY)


def test_a_ctrl_c_pressed_before_the_timeout_is_a_stop_though_its_cancel_lands_after():
    """swarm seed 0 run 4983: the stop queued behind a stalled lease setup; the press, not the landing, orders it."""
    started = [E(HostStarted(attempt=A1, session=S, mode="forced"), 0, "agent:main"),
               E(LeaseAcquired(session=S, holder=H1), 0)]
    press = [E(FrontendCtrlC(agent="main", turn_running=False), 2, "ctrl_c"), E(HardCancelRequested(session=S), 2, "ctrl_c")]
    stop_lands = [E(FenceCancelWon(attempt=A1, hard=True), 30, "ctrl_c"), E(LeaseReleased(session=S, holder=H1, held=True), 30, "ctrl_c")]
    timeout = [E(timed_out(A1, "idle"), 5)]
    next_turn = [E(HostStarted(attempt=A2, session=S, mode="automatic"), 20, "agent:main")] + NEXT_SUMMARY
    assert check("timeout_backs_off", started + press + timeout + stop_lands + next_turn) == []
    assert check("timeout_backs_off", started + timeout + press + stop_lands + next_turn)


def test_a_timeout_on_an_admitted_commit_arms_no_backoff():
    """swarm seed 0 run 77455: the host joins the admitted commit, which refused (would grow); nothing is recorded."""
    admitted = [E(LeaseAcquired(session=S, holder=H1), 0), E(FenceBeginOk(attempt=A1), 2)]
    waited_out = [E(timed_out(A1, "idle"), 7), E(LeaseReleased(session=S, holder=H1, held=True), 47)]
    assert check("timeout_backs_off", admitted + waited_out + NEXT_SUMMARY) == []
    assert check("timeout_backs_off", [admitted[0], waited_out[0], admitted[1], waited_out[1]] + NEXT_SUMMARY)

def test_a_newer_claim_alone_does_not_excuse_a_skipped_rollback():
    """#198 F1: the owner's rollback was skipped because a lock loser claimed later; only a newer writer excuses it."""
    owner_cleared = [E(LeaseAcquired(session=S, holder=H1), 0), lambda store: store.clear_cooldown("s"),
                     E(CooldownCleared(session=S, attempt=A1), 0),
                     E(AttemptClaimed(attempt=A2, generation=2), 1), E(LeaseContended(session=S, holder=H2), 1),
                     E(FenceCancelWon(attempt=A1, hard=True), 2),
                     E(AttemptRestoreSkippedStale(attempt=A1, generation=1, current=2), 2)]
    rolled_back = E(finished(A1, "unchanged", "hard_cancelled"), 2)
    newer_wrote = [lambda store: store.record_cooldown("s", 90.0, "summary_failed"),
                   E(CooldownSet(session=S, until_s=90.0, attempt=A2, error="summary_failed"), 2)]
    assert check("hard_cancel_restores_cooldown", owner_cleared + [rolled_back], cooling_until(60.0))
    assert check("hard_cancel_restores_cooldown", owner_cleared + newer_wrote + [rolled_back], cooling_until(60.0)) == []


def test_only_a_host_timeout_before_the_users_stop_excuses_the_rollback():
    acquired = [E(LeaseAcquired(session=S, holder=H1), 0)]
    stop = [E(FenceCancelWon(attempt=A1, hard=True), 1)]
    timeout = [E(timed_out(A1, "idle"), 20), lambda store: store.record_cooldown("s", 80.0, "timeout:idle"),
               E(CooldownSet(session=S, until_s=80.0, attempt=A1, error="timeout:idle"), 20)]
    rolled_back = [E(finished(A1, "unchanged", "hard_cancelled"), 60)]
    assert check("hard_cancel_restores_cooldown", acquired + stop + timeout + rolled_back, one_head)
    assert check("hard_cancel_restores_cooldown", acquired + timeout + stop + rolled_back, one_head) == []


def test_a_rollback_after_the_hosts_timeout_writes_no_cooldown_row():
    """R2 (hermes #7): the host reported the timeout, so the cooldown is its record's; the rollback is inert for it,
    whether it runs before the record lands or after (here it put back the longer cooldown a /compress lifted)."""
    acquired = [E(LeaseAcquired(session=S, holder=H1), 0), lambda store: store.clear_cooldown("s"),
                E(CooldownCleared(session=S, attempt=A1), 0), E(timed_out(A1, "idle"), 5)]
    stop = [E(FenceCancelWon(attempt=A1, hard=True), 6)]
    rewrote = [lambda store: store.record_cooldown("s", 600.0, "summary_failed"), E(CooldownRestored(session=S, attempt=A1), 6)]
    recorded = [lambda store: store.record_cooldown("s", 65.0, "timeout:idle"),
                E(CooldownSet(session=S, until_s=65.0, attempt=A1, error="timeout:idle"), 8), E(returned("timeout"), 8)]
    inert = [E(AttemptRestored(attempt=A1, generation=1), 6)]
    ended = [E(finished(A1, "unchanged", "hard_cancelled"), 6)]
    assert check("hard_cancel_restores_cooldown", acquired + stop + rewrote + ended + recorded, one_head)
    assert check("hard_cancel_restores_cooldown", acquired + recorded + stop + rewrote + ended, one_head)
    assert check("hard_cancel_restores_cooldown", acquired + stop + inert + ended + recorded, one_head) == []
    user_stop = [E(returned("unchanged"), 8)]  # the stop came first: no timeout, the rollback is the attempt's
    assert check("hard_cancel_restores_cooldown", acquired + stop + rewrote + ended + user_stop, one_head) == []


def test_a_stop_reaching_an_attempt_that_already_refused_keeps_its_failure_cooldown():
    """The summary failed and its cooldown was recorded before the press: the stop has nothing left to undo."""
    acquired = [E(LeaseAcquired(session=S, holder=H1), 0)]
    failed = [lambda store: store.record_cooldown("s", 60.0, "summary_failed"),
              E(CooldownSet(session=S, until_s=60.0, attempt=A1, error="summary_failed"), 0)]
    refused = [E(CompactionRefused(session=S, attempt=A1, reason="summary_failed"), 0)]
    stop = [E(FenceCancelWon(attempt=A1, hard=True), 1)]
    ended = [E(finished(A1, "unchanged", "summary_failed"), 20)]
    assert check("hard_cancel_restores_cooldown", acquired + failed + refused + stop + ended, one_head) == []
    assert check("hard_cancel_restores_cooldown", acquired + stop + failed + refused + ended, one_head)
    hard_refusal = [E(FenceBeginRefused(attempt=A1, reason="hard_cancel"), 0)]
    assert check("hard_cancel_restores_cooldown", acquired + failed + hard_refusal + refused + stop + ended, one_head)


def test_a_rollback_made_stale_by_a_newer_lease_is_not_judged():
    """R21: once a newer claim of the compressor took a lease (on any session), the older rollback writes nothing."""
    stopped = [E(AttemptClaimed(attempt=A1, generation=1), 0), E(LeaseAcquired(session=S, holder=H1), 0),
               lambda store: store.clear_cooldown("s"), E(CooldownCleared(session=S, attempt=A1), 0),
               E(FenceCancelWon(attempt=A1, hard=True), 1)]
    newer_took_lease = [E(AttemptClaimed(attempt=A2, generation=2), 8), E(LeaseAcquired(session=T, holder=H2), 8)]
    restored = [E(AttemptRestored(attempt=A1, generation=1), 9)]
    ended = [E(finished(A1, "unchanged", "superseded"), 9)]
    assert check("hard_cancel_restores_cooldown", stopped + newer_took_lease + ended, cooling_until(60.0)) == []
    assert check("hard_cancel_restores_cooldown", stopped + restored + newer_took_lease + ended, cooling_until(60.0))
    other_agent = [E(AttemptClaimed(attempt=A2, generation=2), 8, "agent:b"), E(LeaseAcquired(session=T, holder=H2), 8)]
    assert check("hard_cancel_restores_cooldown", [E(HostStarted(attempt=A1, mode="automatic", session=S), 0, "agent:a")]
                 + stopped + [E(HostStarted(attempt=A2, mode="automatic", session=T), 8, "agent:b")] + other_agent + ended,
                 cooling_until(60.0))


def test_only_a_newer_attempt_that_took_the_lease_supersedes_a_rollback():
    claims = [E(AttemptClaimed(attempt=A1, generation=1), 0), E(LeaseAcquired(session=S, holder=H1), 0),
              E(AttemptClaimed(attempt=A2, generation=2), 1)]
    restored = E(AttemptRestored(attempt=A1, generation=1), 2)
    newer_took_lease = [E(LeaseReleased(session=S, holder=H1, held=True), 1), E(LeaseAcquired(session=S, holder=H2), 1)]
    newer_sat_out = [E(LeaseContended(session=S, holder=H2), 1)]
    assert check("stale_attempt_writes_no_state", claims + newer_took_lease + [restored])
    assert check("stale_attempt_writes_no_state", claims + newer_sat_out + [restored]) == []


def test_a_worker_that_unwinds_after_admission_may_release_its_lease_but_not_commit_after():
    """R6: the worker's own release is a violation only if a commit transaction of its attempt follows it."""
    worker = "compress:p1.1"
    admitted_then_released = [E(FenceBeginOk(attempt=A1), 0, worker), E(LeaseReleased(session=S, holder=H1, held=True), 1, worker)]
    assert check("lease_held_across_commit", admitted_then_released + [E(finished(A1, "error", "OperationalError"), 1, worker)]) == []
    assert check("lease_held_across_commit", admitted_then_released + [E(CommitArchived(session=S, attempt=A1, rows=2), 2, worker)])


def test_a_failed_release_is_resolved_by_the_store():
    """R25: a release that raised may have committed first; if the row is gone, the next acquire takes a free lease."""
    def taken(store: SessionStore) -> None:
        one_head(store)
        assert store.try_acquire_lease("s", H1, now=0.0, ttl_s=60.0, holder_is_dead=lambda holder: False)

    acquired = [E(LeaseAcquired(session=S, holder=H1), 0)]
    failed = [E(LeaseReleaseFailed(session=S, holder=H1, error="OperationalError"), 1)]
    next_holder = [lambda store: store.try_acquire_lease("s", H2, now=2.0, ttl_s=60.0, holder_is_dead=lambda holder: True),
                   E(LeaseAcquired(session=S, holder=H2), 2)]
    committed_first = [lambda store: store.release_lease("s", H1)]
    assert check("lease_mutual_exclusion", acquired + committed_first + failed + next_holder, taken) == []
    assert check("lease_mutual_exclusion", acquired + failed + next_holder, taken)


def test_an_unwinding_hosts_revoke_frees_the_lease_itself():
    """R5: past its lease setup, an attempt whose host unwound holds nothing; a sit-out behind its row is the
    store's delay when the host's own release frees it, and the lease outliving its attempt when only the worker
    frees it later."""
    set_up = [E(LeaseAcquired(session=S, holder=H1), 0), E(CompactionWatermark(session=S, attempt=A1, watermark=2), 0),
              E(FenceRevoked(attempt=A1, commit_in_flight=False), 1, "turn"), E(LeaseContended(session=S, holder=P2_H1), 2)]

    def released_by(task: str) -> list[tuple]:
        return [lambda store: store.release_lease("s", H1), E(LeaseReleased(session=S, holder=H1, held=True), 20, task)]

    assert check("abandoned_attempt_frees_lease", set_up + released_by("turn"), lease_held_by(H1)) == []
    assert "whose unwinding host had revoked it" in check(
        "abandoned_attempt_frees_lease", set_up + released_by("compress:p1.1"), lease_held_by(H1))[0]
    assert check("abandoned_attempt_frees_lease", set_up, lease_held_by(H1))


def test_a_rollback_is_judged_against_its_own_agents_generations():
    """main's A2 (its generation 3) took the lease; a2's A1 (its own generation 1) then rolls back: generations
    count per agent, so that is no stale write; the same claims by one agent are."""
    def rolled_back(second_caller: str) -> list[tuple]:
        return [E(HostStarted(attempt=A2, session=S, mode="automatic"), 0, "agent:main"),
                E(AttemptClaimed(attempt=A2, generation=3), 0), E(LeaseAcquired(session=S, holder=H2), 0),
                E(LeaseReleased(session=S, holder=H2, held=True), 1),
                E(HostStarted(attempt=A1, session=S, mode="forced"), 2, f"agent:{second_caller}"),
                E(AttemptClaimed(attempt=A1, generation=1), 2), E(LeaseAcquired(session=S, holder=H1), 2),
                E(AttemptRestored(attempt=A1, generation=1), 3)]
    assert check("stale_attempt_writes_no_state", rolled_back("a2")) == []
    assert check("stale_attempt_writes_no_state", rolled_back("main"))


def test_only_the_overflow_recovery_may_summarize_inside_a_cooldown():
    """R23: the recovery of a provider-proven overflow bypasses the failure cooldown; no other automatic attempt does."""
    cooling = [E(OTHER_FAILED, 1)]
    summary = [E(LeaseAcquired(session=S, holder=H1), 5), E(CompactionSummaryStarted(attempt=A1, generation=1), 5)]
    automatic = [E(HostStarted(attempt=A1, session=S, mode="automatic"), 5)]
    overflow = [E(HostStarted(attempt=A1, session=S, mode="overflow"), 5)]
    assert check("no_summary_inside_cooldown", cooling + automatic + summary, cooling_until(60.0))
    assert check("no_summary_inside_cooldown", cooling + overflow + summary, cooling_until(60.0)) == []


def test_a_cooldown_recorded_after_the_attempt_read_the_row_under_its_lease_is_not_its_to_honour():
    """A displaced attempt's split-failure cooldown, written after a forced attempt cleared the row under its
    lease, is not blamed on it; the same cooldown already live when an automatic attempt took its lease is."""
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
    displaced = [lambda store: store.record_cooldown("s", 60.0, "session_split_failed"), E(OTHER_FAILED, 1)]
    forced = [E(HostStarted(attempt=A1, session=S, mode="forced"), 0), E(LeaseAcquired(session=S, holder=H1), 0),
              lambda store: store.clear_cooldown("s"), E(CooldownCleared(session=S, attempt=A1), 0)]
    automatic = [E(HostStarted(attempt=A1, session=S, mode="automatic"), 5), E(LeaseAcquired(session=S, holder=H1), 5)]
    summary = [E(CompactionSummaryStarted(attempt=A1, generation=1), 5)]
    assert check("no_summary_inside_cooldown", forced + displaced + summary, arrange) == []
    assert check("no_summary_inside_cooldown", displaced + automatic + summary, arrange)


def test_an_overflow_recovery_refused_under_the_lease_for_a_cooldown_is_caught():
    """The recheck under the lease is a second place a cooldown can block the recovery; it counts like the gate."""
    events = [E(OVERFLOWED, 0), E(CompactionRefused(session=S, attempt=A1, reason="cooldown"), 0, "w"), E(RECOVERY_RETURNED, 1)]
    assert check("overflow_recovery_ignores_cooldown", events)


def test_an_overflow_recovery_with_no_host_is_judged_when_its_attempt_finishes_on_the_turns_task():
    """hermes-agent compacts on the turn's own thread and has no host to return: the recovery's attempt is over at
    its `compaction.finished` on the overflowing turn's task; an attempt finishing on another task is not it."""
    blocked = [E(OVERFLOWED, 0, "turn"), E(CompactionBlocked(session=S, attempt=A1, reason="cooldown"), 0, "turn")]
    assert check("overflow_recovery_ignores_cooldown", blocked + [E(finished(A1, "unchanged", "cooldown"), 0, "turn")])
    assert check("overflow_recovery_ignores_cooldown", blocked + [E(finished(A1, "unchanged", "cooldown"), 0, "worker")]) == []
    recovered = [E(OVERFLOWED, 0, "turn"), E(finished(A1, "committed"), 0, "turn")]
    assert check("overflow_recovery_ignores_cooldown", recovered) == []


def test_an_auto_reset_with_no_host_is_judged_by_the_sessions_last_attempt():
    """With no `host.returned` (hermes-agent's gateway resets after the turn), the reset is judged by the last attempt
    that finished on the session."""
    assert check("no_false_auto_reset", [E(finished(A1, "unchanged", "cooldown"), 0, "turn"), E(RESET, 1, "gateway")])
    assert check("no_false_auto_reset", [E(finished(A1, "unchanged", "no_progress"), 0, "turn"), E(RESET, 1, "gateway")]) == []


def three_rows_leased(store: SessionStore) -> None:
    store.create_session("s", now=0)
    store.append_messages("s", [{"role": "user", "content": f"m{i}", "timestamp": float(i)} for i in range(3)], now=1)
    store.try_acquire_lease("s", H1, now=1, ttl_s=60)


def archive_all(store: SessionStore) -> None:
    store.archive_and_compact("s", [{"role": "user", "content": "summary", "timestamp": 5.0}], holder=H1, watermark=3, now=5)


CASES.update({
    "archived_rows_were_in_input": (
        [E(CompactionWatermark(session=S, attempt=A1, watermark=3), 1), E(CompactionInput(session=S, attempt=A1, rows=[1, 2]), 1),
         archive_all, E(CommitArchived(session=S, attempt=A1, rows=1), 5)],
        [E(CompactionWatermark(session=S, attempt=A1, watermark=3), 1), E(CompactionInput(session=S, attempt=A1, rows=[1, 2, 3]), 1),
         archive_all, E(CommitArchived(session=S, attempt=A1, rows=1), 5)],
        three_rows_leased, three_rows_leased),
})


CASES.update({
    "ctrl_c_sees_idle_prompt": (
        [TURN_STARTS, E(persisted(1), 2), E(persisted(2, "assistant"), 2), E(FrontendCtrlC(agent="main", turn_running=True), 5, "ctrl_c")],
        [TURN_STARTS, E(persisted(1), 2), E(FrontendCtrlC(agent="main", turn_running=True), 2, "ctrl_c"),
         E(persisted(2, "assistant"), 3), E(FrontendCtrlC(agent="main", turn_running=False), 5, "ctrl_c")],
        None, None),
})


GIVEN_UP = E(FrontendCtrlCGraceExpired(agent="main", turn_abandoned=True), 4, "ctrl_c")

CASES.update({
    "abandoned_turn_stays_silent": (
        [TURN_STARTS, E(persisted(1), 2), GIVEN_UP, E(persisted(2, "assistant"), 9)],
        [TURN_STARTS, E(persisted(1), 2), GIVEN_UP, E(FrontendTurnSubmitted(agent="main", text="next"), 5),
         E(persisted(2), 5)],
        None, None),
})


PRESSED = E(FrontendCtrlC(agent="main", turn_running=True), 2, "ctrl_c")

CASES.update({
    "ctrl_c_abandons_only_the_pressed_turn": (
        [TURN_STARTS, PRESSED, E(FrontendTurnSubmitted(agent="main", text="next"), 2, "typed"), GIVEN_UP],
        [TURN_STARTS, PRESSED, GIVEN_UP, E(FrontendTurnSubmitted(agent="main", text="next"), 4, "typed")],
        None, None),
})


def test_a_ctrl_c_at_an_idle_prompt_abandons_no_turn_typed_after_it():
    idle = E(FrontendCtrlC(agent="main", turn_running=False), 1, "ctrl_c")
    assert check("ctrl_c_abandons_only_the_pressed_turn", [idle, TURN_STARTS, GIVEN_UP])
    assert check("ctrl_c_abandons_only_the_pressed_turn",
                 [idle, TURN_STARTS, E(FrontendCtrlCGraceExpired(agent="main", turn_abandoned=False), 4, "ctrl_c")]) == []


def grace_ended(at: float, abandoned: bool) -> tuple:
    return E(FrontendCtrlCGraceExpired(agent="main", turn_abandoned=abandoned), at, "grace:ctrl_c")


CASES.update({
    "ctrl_c_grace_counted_from_press": (
        [TURN_STARTS, PRESSED, grace_ended(7, False)],
        [TURN_STARTS, PRESSED, grace_ended(4, True)],
        None, None),
})


def test_a_turn_is_abandoned_only_once_the_grace_has_passed_since_the_press():
    assert check("ctrl_c_grace_counted_from_press", [TURN_STARTS, PRESSED, grace_ended(3, True)])
    assert check("ctrl_c_grace_counted_from_press", [TURN_STARTS, PRESSED, grace_ended(3, False)]) == []


PRESSED_THEN_COMPACTED = [TURN_STARTS, PRESSED, E(HostStarted(attempt=A1, session=S, mode="automatic"), 10)]

CASES.update({
    "ctrl_c_stops_the_turns_later_compactions": (
        PRESSED_THEN_COMPACTED + [E(FenceBeginOk(attempt=A1), 12)],
        PRESSED_THEN_COMPACTED + [E(FenceBeginRefused(attempt=A1, reason="hard_cancel"), 12)],
        None, None),
})


def test_a_press_at_the_prompt_or_on_another_turn_stops_no_later_compaction():
    idle = [E(FrontendCtrlC(agent="main", turn_running=False), 1, "ctrl_c"), TURN_STARTS,
            E(HostStarted(attempt=A1, session=S, mode="automatic"), 10), E(FenceBeginOk(attempt=A1), 12)]
    assert check("ctrl_c_stops_the_turns_later_compactions", idle) == []
    next_turn_same_task = PRESSED_THEN_COMPACTED[:2] + [TURN_STARTS] + PRESSED_THEN_COMPACTED[2:] + [E(FenceBeginOk(attempt=A1), 12)]
    assert check("ctrl_c_stops_the_turns_later_compactions", next_turn_same_task) == []
    # A terminal that reads /compress in the task its pressed turn ran in, once the turn has ended (the stress
    # worker's typist): the forced attempt has a stop of its own.
    compress_same_task = [TURN_STARTS, PRESSED, E(HostStarted(attempt=A1, session=S, mode="forced"), 10),
                          E(FenceBeginOk(attempt=A1), 12)]
    assert check("ctrl_c_stops_the_turns_later_compactions", compress_same_task) == []


DELIVERED = [E(GatewayDelivered(agent="bot", platform_message_id=f"tg:{n}"), n) for n in (1, 2)]


def taken(n: int, at: float, task: str = "gateway.bot") -> tuple:
    return E(GatewayTurnStarted(agent="bot", platform_message_id=f"tg:{n}"), at, task)


CASES.update({
    "gateway_turns_in_arrival_order": (
        DELIVERED + [taken(2, 3), taken(1, 4)],
        DELIVERED + [taken(1, 3), E(persisted(1), 3, "gateway.bot"), taken(2, 4)],
        None, None),
})


def test_an_earlier_gateway_turn_works_on_only_until_the_next_one_starts():
    overlapping = DELIVERED + [taken(1, 3, "turn.1"), taken(2, 4, "turn.2"), E(persisted(1), 5, "turn.1")]
    assert check("gateway_turns_in_arrival_order", overlapping)
    assert check("gateway_turns_in_arrival_order", DELIVERED + [taken(1, 3), taken(2, 4), E(persisted(1), 5, "gateway.bot")]) == []
    assert check("gateway_turns_in_arrival_order", [taken(1, 3)]), "a turn for a message never delivered"


def test_a_grace_that_found_the_turn_ended_abandons_nothing():
    """The turn replied within the grace: the expiry gave nothing up, so what the turn wrote is not judged."""
    ended = E(FrontendCtrlCGraceExpired(agent="main", turn_abandoned=False), 4, "ctrl_c")
    assert check("abandoned_turn_stays_silent", [TURN_STARTS, ended, E(persisted(2, "assistant"), 4)]) == []


FAILED = CooldownSet(session=S, until_s=60.0, attempt=A1, error="summary_failed")
BLOCKED_A3 = [E(AttemptClaimed(attempt=A3, generation=3), 20), E(CompactionBlocked(session=S, attempt=A3, reason="cooldown"), 20)]

CASES.update({
    "cooldown_blocks_only_while_in_force": (
        [E(FAILED, 1), E(CooldownCleared(session=S, attempt=A2), 10)] + BLOCKED_A3,
        [E(FAILED, 1)] + BLOCKED_A3,
        None, None),
})


def test_a_clear_by_another_agent_leaves_the_local_deadline_in_force():
    """Each agent's compressor keeps its own deadline: another agent's clear empties the row, not that deadline."""
    started = [E(HostStarted(attempt=A1, session=S, mode="automatic"), 0, "agent:a"),
               E(HostStarted(attempt=A2, session=S, mode="forced"), 5, "agent:b"),
               E(HostStarted(attempt=A3, session=S, mode="automatic"), 20, "agent:a")]
    history = [started[0], E(FAILED, 1), started[1], E(CooldownCleared(session=S, attempt=A2), 10), started[2]] + BLOCKED_A3
    assert check("cooldown_blocks_only_while_in_force", history) == []


def test_a_failure_recorded_after_a_block_of_its_compressor_explains_it():
    """A failure sets its compressor's deadline a step before its record: a sibling attempt may be blocked between."""
    history = [E(AttemptClaimed(attempt=A1, generation=1), 0)] + BLOCKED_A3 + [E(FAILED, 20)]
    assert check("cooldown_blocks_only_while_in_force", history) == []
    assert check("cooldown_blocks_only_while_in_force", BLOCKED_A3 + [E(AttemptClaimed(attempt=A1, generation=4), 21), E(FAILED, 21)])

def test_a_deadline_that_ran_out_before_the_claim_blocks_nothing():
    late = [E(AttemptClaimed(attempt=A3, generation=3), 61), E(CompactionBlocked(session=S, attempt=A3, reason="cooldown"), 61)]
    assert check("cooldown_blocks_only_while_in_force", [E(FAILED, 1)] + late)


def archive_unchanged(store: SessionStore) -> None:
    store.archive_and_compact("s", [{"role": "user", "content": f"m{i}", "timestamp": float(i)} for i in range(3)],
                              holder=H1, watermark=3, now=5)


CASES.update({
    "commit_changes_transcript": (
        [E(CompactionInput(session=S, attempt=A1, rows=[1, 2, 3]), 1), archive_unchanged, E(CommitArchived(session=S, attempt=A1, rows=3), 5)],
        [E(CompactionInput(session=S, attempt=A1, rows=[1, 2, 3]), 1), archive_all, E(CommitArchived(session=S, attempt=A1, rows=1), 5)],
        three_rows_leased, three_rows_leased),
})


def test_a_row_above_the_watermark_marked_summarized_was_not_seen_by_the_summary():
    """The commit marks row 3, above the attempt's watermark and outside its input, as summarized."""
    def archive_everything(store: SessionStore) -> None:
        store.archive_and_compact("s", [{"role": "user", "content": "summary", "timestamp": 5.0}], holder=H1, watermark=None, now=5)

    history = [E(CompactionWatermark(session=S, attempt=A1, watermark=2), 1), E(CompactionInput(session=S, attempt=A1, rows=[1, 2]), 1),
               archive_everything, E(CommitArchived(session=S, attempt=A1, rows=1), 5)]
    assert check("archived_rows_were_in_input", history, three_rows_leased)


def commit_returned(transcript_after: str) -> HostReturned:
    return HostReturned(attempt=A1, status="committed", session=S, caller_session=S, transcript_before="",
                        transcript_after=transcript_after)


SUMMARY_ONLY = transcript_fingerprint([("user", "summary", 5.0)])

CASES.update({
    "commit_reaches_caller": (
        [archive_all, E(CommitArchived(session=S, attempt=A1, rows=1), 5), E(commit_returned("not-what-was-left"), 5)],
        [archive_all, E(CommitArchived(session=S, attempt=A1, rows=1), 5), E(commit_returned(SUMMARY_ONLY), 5)],
        three_rows_leased, three_rows_leased),
})


def test_a_lease_another_process_took_after_the_ctrl_c_is_not_the_stopped_attempts():
    """The Ctrl+C stopped main's attempt, which released; a second process's /compress then took the lease in the
    same instant, before the cancel returned: that lease is lawfully held."""
    other = HolderId.of("extra1", 101, 1)
    history = [E(HostStarted(attempt=A1, session=S, mode="automatic"), 0), E(LeaseAcquired(session=S, holder=H1), 0),
               E(FrontendCtrlC(agent="main", turn_running=True), 1, "ctrl_c"), E(HardCancelRequested(session=S), 1, "ctrl_c"),
               E(LeaseReleased(session=S, holder=H1, held=True), 1),
               E(HostStarted(attempt=AttemptId.of("extra1", 1), session=S, mode="forced"), 1), E(LeaseAcquired(session=S, holder=other), 1),
               E(cancel_returned(), 1, "ctrl_c")]
    assert check("hard_cancel_frees_lease", history) == []
    assert check("hard_cancel_frees_lease", [event for event in history if not isinstance(event[0], LeaseReleased)])


def test_a_ctrl_c_that_lost_to_a_finished_commit_frees_no_lease():
    """The commit of a1 finished, then a Ctrl+C's cancel took the fence: it lost, so it frees nothing. The same
    release made by the host's own task (its revoke after the turn was abandoned), or after the cancel returned,
    is lawful."""
    def released_by(task: str, at: float) -> list[tuple]:
        return [E(FenceBeginOk(attempt=A1), 0), E(FenceFinish(attempt=A1), 2),
                E(FrontendCtrlC(agent="main", turn_running=True), 3, "ctrl_c"), E(HardCancelRequested(session=S), 3, "ctrl_c"),
                E(cancel_returned(False), 8, "ctrl_c"), E(LeaseReleased(session=S, holder=H1, held=True), at, task)]
    assert check("cancel_never_beats_admitted_commit", sorted(released_by("ctrl_c", 3), key=lambda step: step[1]))
    assert check("cancel_never_beats_admitted_commit", released_by("turn", 8)) == []
    assert check("cancel_never_beats_admitted_commit", released_by("ctrl_c", 9)) == []


def test_a_ctrl_c_stops_only_the_attempts_its_own_agent_started():
    """a3's /compress and a1's terminal share process p1 and session s; a1's Ctrl+C does not stop a3's attempt."""
    def pressed_during_attempt_of(caller: str) -> list[tuple]:
        return [E(HostStarted(attempt=A1, session=S, mode="forced"), 0, f"agent:{caller}"), E(LeaseAcquired(session=S, holder=H1), 0),
                E(FrontendCtrlC(agent="a1", turn_running=False), 1, "ctrl_c"), E(HardCancelRequested(session=S), 1, "ctrl_c"),
                E(cancel_returned(), 1, "ctrl_c")]
    assert check("hard_cancel_frees_lease", pressed_during_attempt_of("a3")) == []
    assert check("hard_cancel_frees_lease", pressed_during_attempt_of("a1"))


def test_a_ctrl_c_stops_only_its_own_agents_active_attempt_from_the_press():
    """main's /compress a2, typed beside the turn whose compaction a1 still runs, is the active attempt: main's
    press stops a2 alone (a1 is judged by the turn's stop, not here), and another terminal's press stops neither."""
    def admitted_after_press(by: str, admitted: AttemptId) -> list[tuple]:
        return [E(HostStarted(attempt=A1, session=S, mode="automatic"), 0, "agent:main"),
                E(HostStarted(attempt=A2, session=S, mode="forced"), 1, "agent:main"),
                E(FrontendCtrlC(agent=by, turn_running=True), 2, "ctrl_c"), E(HardCancelRequested(session=S), 2, "ctrl_c"),
                E(FenceBeginOk(attempt=admitted), 3)]
    assert check("no_admission_after_ctrl_c", admitted_after_press("main", A2))
    assert check("no_admission_after_ctrl_c", admitted_after_press("main", A1)) == []
    assert check("no_admission_after_ctrl_c", admitted_after_press("a1", A2)) == []


def test_a_ctrl_c_is_judged_when_its_own_hard_cancel_returns_not_another_terminals():
    """main's Ctrl+C stopped its attempt; an idle terminal's press returns from its hard cancel at once, before
    main's cancel freed the lease: only main's own cancel's return judges main's attempt."""
    history = [E(HostStarted(attempt=A1, session=S, mode="forced"), 0, "agent:main"), E(LeaseAcquired(session=S, holder=H1), 0),
               E(FrontendCtrlC(agent="main", turn_running=False), 1, "ctrl_c"), E(HardCancelRequested(session=S), 1, "ctrl_c"),
               E(FrontendCtrlC(agent="a1", turn_running=False), 2, "other"), E(HardCancelRequested(session=S), 2, "other"),
               E(cancel_returned(False), 2, "other"),
               E(LeaseReleased(session=S, holder=H1, held=True), 3), E(cancel_returned(), 3, "ctrl_c")]
    assert check("hard_cancel_frees_lease", history) == []
    assert check("hard_cancel_frees_lease", [event for event in history if not isinstance(event[0], LeaseReleased)])


RELEASE_FAILED = E(LeaseReleaseFailed(session=S, holder=H1, error="OperationalError('database is locked')"), 7, "ctrl_c")

CASES.update({
    "failed_release_retried": (
        [E(LeaseAcquired(session=S, holder=H1), 0, "compress:p1.1"), RELEASE_FAILED, E(finished(A1, "unchanged"), 12, "compress:p1.1")],
        [E(LeaseAcquired(session=S, holder=H1), 0, "compress:p1.1"), RELEASE_FAILED,
         E(LeaseReleased(session=S, holder=H1, held=True), 12, "compress:p1.1"), E(finished(A1, "unchanged"), 12, "compress:p1.1")],
        None, None),
})


def test_a_release_that_failed_at_the_workers_own_exit_or_after_it_owes_no_retry():
    own = E(LeaseReleaseFailed(session=S, holder=H1, error="OperationalError('database is locked')"), 12, "compress:p1.1")
    assert check("failed_release_retried", [own, E(finished(A1, "unchanged"), 12, "compress:p1.1")]) == []
    assert check("failed_release_retried", [E(finished(A1, "unchanged"), 12, "compress:p1.1"), RELEASE_FAILED]) == []


def test_a_host_that_unwinds_before_its_hang_report_is_due_owes_none():
    """The commit slice is 5s: an unwind 3s after the timeout leaves nobody waiting; one 9s after it is late."""
    def unwound_at(at: float) -> list[tuple]:
        return [E(FenceBeginOk(attempt=A1), 0), E(timed_out(A1), 1), E(HostUnwind(attempt=A1), at), E(FenceFinish(attempt=A1), 20)]
    assert check("hung_commit_reported", unwound_at(4)) == []
    assert check("hung_commit_reported", unwound_at(10))


def test_a_refresher_is_judged_by_the_refreshes_it_missed_not_by_its_own_count():
    """The refresher's count says the budget (2) was spent, but the history shows one missed refresh."""
    claims_budget = [E(LeaseRefreshFailed(session=S, holder=H1, failures=2)), E(LeaseExpiredGiveup(session=S, holder=H1))]
    recovered_between = [E(LeaseRefreshFailed(session=S, holder=H1, failures=1)), E(LeaseRefreshed(session=S, holder=H1)),
                         E(LeaseRefreshFailed(session=S, holder=H1, failures=2)), E(LeaseExpiredGiveup(session=S, holder=H1))]
    assert check("refresher_tolerates_blips", claims_budget)
    assert check("refresher_tolerates_blips", recovered_between)


SILENT = [E(HostStarted(attempt=A1, session=S, mode="automatic"), 0, "host"), E(CompactionSummaryProgress(attempt=A1), 2)]

CASES.update({
    "idle_timeout_fires_when_due": (
        SILENT + [E(HostTimeout(attempt=A1, budget="ceiling", since_progress_s=98.0), 100, "host")],
        SILENT + [E(HostTimeout(attempt=A1, budget="idle", since_progress_s=10.0), 12, "host"),
                  E(HostReturned(attempt=A1, status="timeout", session=S, caller_session=S, transcript_before="a",
                                 transcript_after="a"), 100, "host")],
        None, None),
})


def test_a_silence_is_judged_where_it_ends_and_a_stalled_host_is_given_half_an_idle_after_it_resumes():
    assert check("idle_timeout_fires_when_due", SILENT + [E(CompactionSummaryProgress(attempt=A1), 17)])
    assert check("idle_timeout_fires_when_due", SILENT + [E(CompactionSummaryProgress(attempt=A1), 16)]) == []
    stalled = [E(StallFired(fault=0, fault_kind="stall", firing=1, point="host.wait", duration_s=30.0), 1, "host")]
    assert check("idle_timeout_fires_when_due", SILENT + stalled + [E(CompactionSummaryProgress(attempt=A1), 34)]) == []


def test_an_idle_timeout_is_timed_from_the_history_not_from_the_hosts_own_count():
    """The host says 10s of silence, but the summary ticked 3s before the timeout."""
    history = [E(HostStarted(attempt=A1, session=S, mode="automatic"), 0), E(CompactionSummaryProgress(attempt=A1), 8),
               E(timed_out(A1, "idle", 10.0), 11)]
    assert check("idle_timeout_within_bounds", history)


def test_an_idle_timeout_is_owed_half_an_idle_after_the_host_resumes_from_a_stall():
    """Idle is 10s; the host stalls 30s at the top of its wait: it can time out only once it resumes, then promptly."""
    def stalled_host_times_out_at(fired: float) -> list[tuple]:
        return [E(HostStarted(attempt=A1, session=S, mode="automatic"), 0, "host"),
                E(StallFired(fault=0, fault_kind="stall", firing=1, point="host.wait", duration_s=30.0), 0, "host"),
                E(timed_out(A1, "idle", fired), fired, "host")]
    assert check("idle_timeout_within_bounds", stalled_host_times_out_at(30.005)) == []
    assert check("idle_timeout_within_bounds", stalled_host_times_out_at(40.0))


def ended_automatically(store: SessionStore) -> None:
    store.create_session("s", now=0)
    store.end_session("s", reason="tui_shutdown", now=1)


def ended_on_purpose(store: SessionStore) -> None:
    store.create_session("s", now=0)
    store.end_session("s", reason="session_reset", now=1)


REFUSED_AS_ENDED = CompactionCommitFailed(session=S, attempt=A1, error="ParentEndedError(\"parent 's' already ended\")")

CASES.update({
    "automatic_end_never_refuses_rotation": ([E(REFUSED_AS_ENDED, 2)], [E(REFUSED_AS_ENDED, 2)], ended_automatically, ended_on_purpose),
})


def conversation(*messages: tuple[str, str]) -> Callable[[SessionStore], None]:
    """A session holding these (role, text) messages, in this order."""
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.append_messages("s", [{"role": role, "content": text, "timestamp": 1.0} for role, text in messages], now=1)
    return arrange


TOLD_TURN = [E(FrontendTurnSubmitted(agent="main", text="hi")), E(persisted(2, "assistant"))]

CASES.update({
    "told_messages_kept_once_in_order": (
        TOLD_TURN, TOLD_TURN, conversation(("assistant", "earlier"), ("assistant", "ack: hi")),
        conversation(("user", "hi"), ("assistant", "ack: hi"))),
})


def test_a_told_message_is_kept_once_and_in_the_order_it_was_typed():
    assert check("told_messages_kept_once_in_order", TOLD_TURN, conversation(("user", "hi"), ("assistant", "ack: hi"), ("user", "hi")))
    assert check("told_messages_kept_once_in_order", TOLD_TURN[:1] + [E(persisted(1, "assistant"))],
                 conversation(("assistant", "ack: hi"), ("user", "hi")))


def test_a_turn_that_first_saves_a_failed_turns_messages_is_told_its_own_reply():
    """The flush writes the failed turn's question and reply first (rows 1, 2), then this turn's (rows 3, 4)."""
    flush = [E(persisted(1, "user")), E(persisted(2, "assistant")), E(persisted(3, "user")), E(persisted(4, "assistant"))]
    rows = conversation(("user", "lost"), ("assistant", "ack: lost"), ("user", "hi"), ("assistant", "ack: hi"))
    assert check("told_messages_kept_once_in_order", TOLD_TURN[:1] + flush, rows) == []
    reply_first = conversation(("user", "lost"), ("assistant", "ack: lost"), ("user", "x"), ("assistant", "ack: hi"), ("user", "hi"))
    assert check("told_messages_kept_once_in_order", TOLD_TURN[:1] + flush, reply_first)


def receipt_summarized(store: SessionStore) -> None:
    """A platform message's receipt row (1), summarized by an in-place commit (summary row 2)."""
    store.create_session("s", now=0)
    store.append_messages("s", [{"role": "user", "content": "hi", "timestamp": 1.0, "platform_message_id": "tg:1"}], now=1)
    store.try_acquire_lease("s", H1, now=1, ttl_s=60)
    store.archive_and_compact("s", [{"role": "user", "content": "summary", "timestamp": 2.0, "is_summary": True}],
                              holder=H1, watermark=1, now=2)


def written_again(store: SessionStore) -> None:
    """Row 3: the message written live again, as a store that looks only for its live row does."""
    store._db.execute("INSERT INTO messages (session_id, role, content, timestamp, platform_message_id)"
                      " VALUES ('s', 'user', 'hi', 1.0, 'tg:1')")


SUMMARIZED_RECEIPT = [E(CompactionInput(session=S, attempt=A1, rows=[1]), 1), E(CommitArchived(session=S, attempt=A1, rows=1), 2)]

CASES.update({
    "received_message_written_once": (
        SUMMARIZED_RECEIPT + [written_again, E(AppendOk(session=S, ids=[3]), 3)],
        SUMMARIZED_RECEIPT + [E(AppendOk(session=S, ids=[1]), 3)],
        receipt_summarized, receipt_summarized),
})


FLUSH_FAILED = [E(FrontendTurnSubmitted(agent="main", text="hi"), 0, "agent:main"),
                E(AppendFailed(session=S, error="OperationalError"), 1, "agent:main"),
                E(FrontendTurnFailed(agent="main", error="OperationalError: disk I/O error"), 1, "agent:main")]


def failed_flush(*rows: tuple[str, str], reply: bool = True) -> Callable[[SessionStore], dict[str, Any]]:
    """A session holding `rows`; main still holds, unsaved, the question "hi" and (with `reply`) its reply."""
    def arrange(store: SessionStore) -> dict[str, Any]:
        conversation(*rows)(store)
        unsaved = [{"role": "user", "content": "hi"}] + ([{"role": "assistant", "content": "ack: hi"}] if reply else [])
        return {"main": SimpleNamespace(agent=SimpleNamespace(messages=unsaved, session_id=S))}
    return arrange


CASES.update({
    "turn_append_all_or_nothing": (
        FLUSH_FAILED, FLUSH_FAILED, failed_flush(("assistant", "earlier"), ("user", "hi")),
        failed_flush(("assistant", "earlier"), ("user", "hi"), ("assistant", "ack: hi"))),
})


def holding_rows(*held: dict[str, Any]) -> Callable[[SessionStore], dict[str, Any]]:
    """Row 1 archived (summarized), rows 2 and 3 live; main holds `held`."""
    def arrange(store: SessionStore) -> dict[str, Any]:
        store.create_session("s", now=0)
        store.append_messages("s", [{"role": "user", "content": text, "timestamp": 1.0} for text in ("old", "summary", "new")], now=1)
        store._db.execute("UPDATE messages SET active = 0, compacted = 1 WHERE id = 1")
        return {"main": SimpleNamespace(agent=SimpleNamespace(messages=list(held), session_id=S))}
    return arrange


def durable(row: int | None, content: str) -> dict[str, Any]:
    return {"role": "user", "content": content, "timestamp": 1.0, "_db_persisted": True, "_row_id": row}


COMPACTING = [E(HostStarted(attempt=A1, session=S, mode="automatic"), 5, "agent:main")]

CASES.update({
    "held_rows_are_live": (
        COMPACTING, COMPACTING, holding_rows(durable(1, "old"), durable(2, "summary")),
        holding_rows(durable(2, "summary"), durable(3, "new"))),
})


def test_a_durable_message_names_its_row_and_a_commit_since_the_last_load_excuses_a_stale_one():
    assert check("held_rows_are_live", COMPACTING, holding_rows(durable(None, "summary")))
    stale = [E(CommitArchived(session=S, attempt=P2_A1, rows=2), 2)] + COMPACTING
    assert check("held_rows_are_live", stale, holding_rows(durable(1, "old"), durable(2, "summary"))) == []


def test_a_turn_that_failed_elsewhere_than_at_its_flush_is_not_judged_by_its_flush():
    failed_before_flush = [FLUSH_FAILED[0], FLUSH_FAILED[2]]
    assert check("turn_append_all_or_nothing", failed_before_flush, failed_flush(("user", "hi"))) == []
    assert check("turn_append_all_or_nothing", FLUSH_FAILED, failed_flush(("assistant", "earlier"))) == []
    compacted_since = FLUSH_FAILED + [E(CommitArchived(session=S, attempt=A1, rows=2), 5)]
    assert check("turn_append_all_or_nothing", compacted_since, failed_flush(("user", "summary"), ("user", "hi"))) == []
    rotated_during = FLUSH_FAILED[:1] + [E(CommitPublished(parent=S, child=CHILD, attempt=A1), 1)] + FLUSH_FAILED[1:]
    assert check("turn_append_all_or_nothing", rotated_during, failed_flush(("user", "summary"), ("user", "hi"))) == []
    no_reply = failed_flush(("user", "hi"), reply=False)  # stopped by Ctrl+C, or its overflow recovery deferred it
    assert check("turn_append_all_or_nothing", FLUSH_FAILED, no_reply) == []


def test_a_question_typed_twice_may_be_live_twice_once_a_later_turn_saved_the_failed_one():
    """Turn 1's "hi" is saved (rows 1, 2); turn 2's "hi" fails to save; turn 3's flush writes it (rows 3, 4)
    before its own question and reply (rows 5, 6): the session holds what the user sent."""
    def turns(second: str) -> list[tuple]:
        return [E(FrontendTurnSubmitted(agent="main", text="hi"), 0, "d1"), E(persisted(2, "assistant"), 0, "d1"),
                E(FrontendTurnSubmitted(agent="main", text=second), 1, "d2"),
                E(FrontendTurnFailed(agent="main", error="OperationalError: disk I/O error"), 1, "d2"),
                E(FrontendTurnSubmitted(agent="main", text="bye"), 2, "d3")] + [
                E(persisted(row, role), 2, "d3") for row, role in ((3, "user"), (4, "assistant"), (5, "user"), (6, "assistant"))]
    rows = conversation(("user", "hi"), ("assistant", "ack: hi"), ("user", "hi"), ("assistant", "ack: hi"),
                        ("user", "bye"), ("assistant", "ack: bye"))
    assert check("told_messages_kept_once_in_order", turns("hi"), rows) == []
    assert check("told_messages_kept_once_in_order", turns("hello"), rows), "typed once, yet live twice"


def carried(*order: str) -> Callable[[SessionStore], None]:
    """Another writer's "first" and "second" (rows 1, 2), then a commit that carried them in `order`."""
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.append_messages("s", [{"role": "user", "content": text, "timestamp": t} for t, text in enumerate(("first", "second"))], now=1)
        store.try_acquire_lease("s", H1, now=1, ttl_s=60)
        store.archive_and_compact("s", [{"role": "user", "content": text, "timestamp": 5.0} for text in order],
                                  holder=H1, watermark=None, now=2)
    return arrange


def test_another_writers_messages_keep_their_order_among_themselves():
    appended = [E(TurnPersisted(session=S, caller_session=S, turn=0, role="user", row=row, writer="external"), row)
                for row in (1, 2)]
    assert check("told_messages_kept_once_in_order", appended, carried("second", "first"))
    assert check("told_messages_kept_once_in_order", appended, carried("first", "second")) == []


def test_a_failed_read_of_the_carried_rows_leaves_them_to_the_next_attempt():
    unread = [archive_all, E(CommitArchived(session=S, attempt=A1, rows=1), 5),
              E(CompactionCarriedUnread(session=S, attempt=A1, error="OperationalError('disk I/O error')"), 5),
              E(commit_returned("without-the-carried-rows"), 5)]
    assert check("commit_reaches_caller", unread, three_rows_leased) == []


def test_the_current_attempt_is_never_refused_its_own_clear():
    own_check_removed = [E(AttemptClaimed(attempt=A2, generation=2)), E(CompactionSummaryStarted(attempt=A2, generation=2)),
                         E(CooldownClearSkipped(session=S, attempt=A2))]
    stopped = [E(AttemptClaimed(attempt=A2, generation=2)), E(CompactionSummaryStarted(attempt=A2, generation=2)),
               E(timed_out(A2)), E(CooldownClearSkipped(session=S, attempt=A2))]
    assert check("current_attempt_owns_compressor", own_check_removed)
    assert check("current_attempt_owns_compressor", stopped) == []

def test_two_agents_of_a_restarted_process_keep_their_own_generations():
    """`p1r1` is `p1` restarted; it runs two agents, so a1's generation 2 says nothing about a2's generation 1."""
    agents = {name: SimpleNamespace(spec=SimpleNamespace(process="p1")) for name in ("a1", "a2")}
    system = FakeSystem(agents=agents, restarted={"p1r1": "p1"})
    invariant = INVARIANTS["current_attempt_owns_compressor"](system)
    a1_second, a2_first = AttemptId.of("p1r1", 2), AttemptId.of("p1r1", 3)
    events = [AttemptClaimed(attempt=a1_second, generation=2), CompactionSummaryStarted(attempt=a1_second, generation=2),
              AttemptClaimed(attempt=a2_first, generation=1), FenceBeginOk(attempt=a2_first)]
    assert [invariant.on_event(HistoryEvent(seq, 0.0, "t", event)) for seq, event in enumerate(events)] == [None] * 4


def tip_of_two(held: list[dict[str, Any]]) -> Callable[[SessionStore], dict[str, Any]]:
    """Session `s` holds two live rows (ids 1 and 2); agent `main` holds `held`."""
    def arrange(store: SessionStore) -> dict[str, Any]:
        store.create_session("s", now=0)
        store.append_messages("s", [{"role": "user", "content": "hi", "timestamp": 1.0},
                                    {"role": "assistant", "content": "hello", "timestamp": 2.0}], now=2)
        agent = SimpleNamespace(messages=held, session_id=S)
        return {"main": SimpleNamespace(spec=SimpleNamespace(name="main", process="p1"), agent=agent)}
    return arrange


# An attempt of `main` adopts `s`, then its host returns: the agent must hold the tip's rows 1 and 2.
ADOPTED = [E(SessionAdopted(from_session=T, to_session=S, attempt=A1), 5),
           E(HostReturned(attempt=A1, status="adopted", session=S, caller_session=S, transcript_before="a",
                          transcript_after="b"), 5, "agent:main")]
UNSAVED = {"role": "user", "content": "new", "timestamp": 3.0}
TIP_ROWS = [{"role": "user", "content": "hi", "timestamp": 1.0, "_row_id": 1},
            {"role": "assistant", "content": "hello", "timestamp": 2.0, "_row_id": 2}]
CASES.update({
    "adopted_tip_reaches_agent": (ADOPTED, ADOPTED, tip_of_two([UNSAVED]), tip_of_two(TIP_ROWS + [UNSAVED])),
})


# A probe turn after more than ceiling + TTL (100s + 60s) of quiet: it must end with its reply persisted.
QUIET_TURN = E(FrontendTurnSubmitted(agent="main", text="probe"), 300, "probe")
CASES.update({
    "turn_after_quiet_persists": (
        [E(persisted(1), 10), QUIET_TURN, E(FrontendTurnFailed(agent="main", error="PersistenceFailed: closed"), 300, "probe")],
        [E(persisted(1), 10), QUIET_TURN, E(persisted(2), 300, "probe"), E(persisted(3, "assistant"), 300, "probe"),
         E(FrontendTurnSubmitted(agent="main", text="soon after"), 301, "next"), E(FrontendTurnFailed(agent="main", error="x"), 301, "next")],
        None, None),
})


def test_a_quiet_turn_whose_overflow_recovery_deferred_owes_no_reply():
    """R23: one compression left the context over the window; the design defers the turn without a reply."""
    deferred = E(TurnOverflowDeferred(session=S, reason="in_place"), 300, "probe")
    assert check("turn_after_quiet_persists", [E(persisted(1), 10), QUIET_TURN, deferred]) == []
    assert check("turn_after_quiet_persists", [E(persisted(1), 10), QUIET_TURN])


def started(attempt: AttemptId, task: str) -> tuple[Event, float, str]:
    return E(HostStarted(attempt=attempt, session=S, mode="automatic"), 0, task)


def saturated(admitted: int, task: str) -> tuple[Event, float, str]:
    return E(PoolSaturated(admitted=admitted, cap=4), 0, task)


def compacted_into_child(*messages: tuple[str, str, bool]) -> Callable[[SessionStore], None]:
    """The rotation's child, holding these (role, text, is_summary) rows."""
    def write(store: SessionStore) -> None:
        store.create_session("s/c", now=2, parent="s")
        rows = [{"role": role, "content": text, "timestamp": 2.0, "is_summary": summary} for role, text, summary in messages]
        store.append_messages("s/c", rows, now=2)
    return write


# A /compress of [user, assistant] that kept one message: the kept reply alone, or the user's message anchored.
COMPACTED = [E(CompactionInput(session=S, attempt=A1, rows=[1, 2]), 1)]
PUBLISHED = E(CommitPublished(parent=S, child=CHILD, attempt=A1), 2)
CASES.update({
    # four jobs of p1 in flight, a fifth refused; refused while one of the four had finished
    "pool_refuses_only_when_full": (
        [started(a, f"h{n}") for n, a in enumerate((A1, A2, A3, A4))] + [E(finished(A1, "committed"), 1),
                                                                         started(A5, "h5"), saturated(3, "h5")],
        [started(a, f"h{n}") for n, a in enumerate((A1, A2, A3, A4))] + [started(A5, "h5"), saturated(4, "h5"),
                                                                         started(P2_A1, "h6")],
        None, None),
    "admitted_job_runs": (
        [started(A1, "h1"), E(returned("timeout"), 10, "h1")],
        [started(A1, "h1"), E(TaskSpawn(), 0, "compress:p1.1"), E(returned("timeout"), 10, "h1"),
         started(A2, "h2"), saturated(4, "h2"), E(HostReturned(attempt=A2, status="saturated", session=S, caller_session=S,
                                                               transcript_before="a", transcript_after="a"), 0, "h2")],
        None, None),
    "caught_errors_are_not_bugs": (
        [E(LeaseAcquireFailed(session=S, holder=H1, error="AttributeError(\"'NoneType' object has no attribute 'holder'\")"))],
        [E(LeaseAcquireFailed(session=S, holder=H1, error="OperationalError('disk I/O error')")),
         E(AppendFailed(session=S, error="SessionClosedByCompression"))],
        None, None),
    "old_messages_get_summarized": (
        [E(CompactionInput(session=S, attempt=A1, rows=[1, 2, 3])), E(CompactionRefused(session=S, attempt=A1, reason="no_progress"))],
        [E(CompactionInput(session=S, attempt=A1, rows=[1, 2, 3])), E(CompactionSummaryStarted(attempt=A1, generation=1)),
         E(CompactionRefused(session=S, attempt=A1, reason="no_progress")),
         E(CompactionInput(session=S, attempt=A2, rows=[1, 2, 3])), E(CompactionRefused(session=S, attempt=A2, reason="hard_cancelled")),
         E(CompactionInput(session=S, attempt=A3, rows=[1, 2])), E(CompactionRefused(session=S, attempt=A3, reason="no_progress"))],
        None, None),
    # a window of 100 tokens: a 400-character question is 101 tokens of context for its reply (row 2)
    "reply_fits_context": (
        [E(persisted(2, "assistant"), task="agent:main")], [E(persisted(2, "assistant"), task="agent:main")],
        asked("q" * 400), asked("q" * 396)),
    # idle timeout at 10s, the fence won at once: back at 10s (+3s its own stall), not when the worker ends at 40s
    "timed_out_host_returns_promptly": (
        [E(timed_out(A1), 10, "h1"), E(FenceCancelWon(attempt=A1, hard=False), 10, "h1"), E(finished(A1, "unchanged"), 40),
         E(returned("timeout"), 40, "h1")],
        [E(timed_out(A1), 10, "h1"), E(FenceCancelWon(attempt=A1, hard=False), 10, "h1"),
         E(StallFired(fault=0, fault_kind="stall", firing=1, point="db.record_cooldown", duration_s=3.0), 10, "h1"),
         E(returned("timeout"), 13, "h1"), E(finished(A1, "unchanged"), 40)],
        None, None),
    "commit_keeps_a_user_turn": (
        COMPACTED + [compacted_into_child(("user", "[summary]", True), ("assistant", "a", False)), PUBLISHED],
        COMPACTED + [compacted_into_child(("user", "[summary]", True), ("user", "q", False), ("assistant", "a", False)), PUBLISHED],
        conversation(("user", "q"), ("assistant", "a")), conversation(("user", "q"), ("assistant", "a"))),
})


def child_created(store: SessionStore) -> None:
    """The rotation's child made with no row yet: a target that writes the handoff after (hermes's `create_session`,
    then `replace_messages` in 0.19.0, or the next flush in 0.16.0-0.18.2)."""
    store.create_session("s/c", now=2, parent="s")


def handoff_written(*messages: tuple[str, str, bool]) -> Callable[[SessionStore], None]:
    def write(store: SessionStore) -> None:
        rows = [{"role": role, "content": text, "timestamp": 3.0, "is_summary": summary} for role, text, summary in messages]
        store.append_messages("s/c", rows, now=3)
    return write


ANCHORED = (("user", "[summary]", True), ("user", "q", False), ("assistant", "a", False))
ROTATED = E(finished(A1, "rotated"), 4)


def test_a_rotation_is_judged_when_its_attempt_ends_not_when_its_child_is_made():
    """hermes publishes the child before it writes the child's rows: the commit is whole when the attempt ends."""
    written_in_attempt = COMPACTED + [child_created, PUBLISHED, handoff_written(*ANCHORED), ROTATED]
    assert check("commit_keeps_a_user_turn", written_in_attempt, conversation(("user", "q"), ("assistant", "a"))) == []
    dropped = COMPACTED + [child_created, PUBLISHED, handoff_written(*ANCHORED[:1], ANCHORED[2]), ROTATED]
    assert check("commit_keeps_a_user_turn", dropped, conversation(("user", "q"), ("assistant", "a")))


def test_a_rotation_is_judged_before_a_later_attempt_compacts_its_child():
    """An attempt whose worker stalls after publishing ends after a newer attempt took the child as its input and
    rotated it again: the first commit is judged on its child as the newer attempt found it, not as it left it."""
    def recompacted(store: SessionStore) -> None:  # the newer attempt's commit: the child's rows summarized away
        store.try_acquire_lease("s/c", "h2", now=5, ttl_s=60)
        store.archive_and_compact("s/c", [{"role": "user", "content": "[summary]", "is_summary": True}], holder="h2",
                                  watermark=None, now=5)
    later = [E(CompactionInput(session=CHILD, attempt=A2, rows=[3, 4, 5]), 5), recompacted]
    stalled = COMPACTED + [child_created, PUBLISHED, handoff_written(*ANCHORED)] + later + [ROTATED]
    assert check("commit_keeps_a_user_turn", stalled, conversation(("user", "q"), ("assistant", "a"))) == []


def test_a_question_merged_into_an_unanswered_one_is_persisted_and_kept():
    """hermes repairs two user messages in a row by merging the new one into the row before, after a blank line
    (`repair_message_sequence`): the question is durable and live, as the merged row's last paragraph."""
    turn = [E(FrontendTurnSubmitted(agent="main", text="hi")), E(persisted(2, "assistant"))]
    merged = conversation(("user", "unanswered\n\nhi"), ("assistant", "ack: hi"))
    assert check("completed_turn_persists_user_message", turn, merged) == []
    assert check("told_messages_kept_once_in_order", turn, merged) == []
    elsewhere = conversation(("user", "hi\n\nunanswered"), ("assistant", "ack: hi"))
    assert check("completed_turn_persists_user_message", turn, elsewhere)
    assert check("told_messages_kept_once_in_order", turn, elsewhere)


def test_a_row_a_rotation_took_as_input_is_summarized_though_it_stays_active_in_the_ended_parent():
    """hermes leaves a rotated parent's rows as they were (active) and writes the carried tail into the child with
    new timestamps: the row was in the commit's input, so the commit summarized it."""
    def asked(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.append_messages("s", [{"role": "user", "content": "q", "timestamp": 1.0}], now=1)
    def rotated(store: SessionStore) -> None:
        store.create_session("s/c", now=2, parent="s")
        store.append_messages("s/c", [{"role": "user", "content": "q", "timestamp": 2.0}], now=2)
        store.end_session("s", now=2, reason="compression")
    took = [E(persisted(1)), E(CompactionInput(session=S, attempt=A1, rows=[1]), 1), rotated, PUBLISHED]
    assert check("acknowledged_appends_survive", took, asked) == []
    not_taken = [E(persisted(1)), E(CompactionInput(session=S, attempt=A1, rows=[]), 1), rotated, PUBLISHED]
    assert check("acknowledged_appends_survive", not_taken, asked)


def test_a_child_still_without_rows_when_its_attempt_ends_is_judged_at_the_end():
    """0.16.0-0.18.2 write the handoff at the next flush: judged then (here, at the end); never written, it is lost."""
    flushed_later = COMPACTED + [child_created, PUBLISHED, ROTATED, handoff_written(*ANCHORED)]
    assert check("commit_keeps_a_user_turn", flushed_later, conversation(("user", "q"), ("assistant", "a"))) == []
    never_written = COMPACTED + [child_created, PUBLISHED, ROTATED]
    assert check("commit_keeps_a_user_turn", never_written, conversation(("user", "q"), ("assistant", "a")))
    rotated_on = never_written + [lambda store: store.create_session("s/c/d", now=3, parent="s/c"),
                                  lambda store: store.end_session("s/c", now=3, reason="compression")]
    assert check("commit_keeps_a_user_turn", rotated_on, conversation(("user", "q"), ("assistant", "a"))) == []


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


def test_a_failed_rotation_may_flush_the_turn_into_a_live_parent():
    """The pre-publish flush of a live parent is the turn's own write, made once; only an ended parent grows."""
    flushed_then_failed = [E(AttemptClaimed(attempt=A1, generation=1), task="w1"),
                           E(AppendOk(session=S, ids=[7]), task="w1"), E(finished(A1, "failed"), task="w1")]
    assert check("aborted_attempt_leaves_parent_unchanged", flushed_then_failed,
                 lambda store: store.create_session("s", now=0)) == []


def test_a_lease_less_writer_may_leave_the_title_on_the_parent_it_rotated():
    """The older writer's copy is its doing; the same state after a rotation of the reference's is not."""
    def arrange(store: SessionStore) -> None:
        store.create_session("s", now=0)
        store.set_session_title("s", "T")
        store.rotate_without_lease("s", "s/x", [], now=1, model_config={}, title="T", title_source="user")

    rotated = E(ExternalRotated(parent=S, child=SessionId("s/x")), 1)
    assert check("title_follows_conversation", [rotated], arrange) == []
    published = E(CommitPublished(parent=S, child=SessionId("s/x"), attempt=A1), 1)
    assert "s, closed by compression, still shows the title 'T'" in check("title_follows_conversation", [published], arrange)


def test_a_store_that_keeps_no_title_source_is_held_to_the_title_alone():
    """hermes stores a title with no source: what it shows is the title, and only the title can be wrong."""
    def sourceless(store: SessionStore) -> None:
        store.keeps_title_source = False  # type: ignore[misc]  # the one store of this check, told it is such a store
        store.create_session("s", now=0, title="T")
    given = [E(SessionTitled(session=S, title="T", source="user", stored="T"), 0)]
    assert check("title_follows_conversation", given, sourceless) == []
    renamed = given + [lambda store: store.create_session("s/c", now=1, parent="s", title="U"),
                       E(CommitPublished(parent=S, child=CHILD, attempt=A1), 1)]
    assert check("title_follows_conversation", renamed, sourceless)


def test_a_lease_less_writers_copy_is_cleared_when_the_reference_carries_its_title_on():
    """The carry moves the title off the one ancestor holding it; of several copies only the first moves."""
    def copies_then_published(copies: int) -> tuple[list[tuple], Callable[[SessionStore], None]]:
        chain = ["s", "s/x0", "s/x0/x1"][:copies + 2]  # the last lease-less child holds no copy
        def arrange(store: SessionStore) -> None:
            store.create_session("s", now=0, title="T", title_source="user")
            for n, (parent, child) in enumerate(zip(chain, chain[1:])):
                keeps = n + 1 < copies
                store.rotate_without_lease(parent, child, [], now=1, model_config={}, title="T" if keeps else None,
                                           title_source="user" if keeps else None)
            store.create_session(f"{chain[-1]}/c", now=2, parent=chain[-1], title="T", title_source="user")
            store.end_session(chain[-1], now=2, reason="compression")
        rotated = [E(ExternalRotated(parent=SessionId(p), child=SessionId(c)), 1) for p, c in zip(chain, chain[1:])]
        published = E(CommitPublished(parent=SessionId(chain[-1]), child=SessionId(f"{chain[-1]}/c"), attempt=A1), 2)
        return rotated + [published], arrange

    assert "s, closed by compression, still shows the title 'T'" in check("title_follows_conversation", *copies_then_published(1))
    assert check("title_follows_conversation", *copies_then_published(2)) == []


def test_an_automatic_title_yields_to_equal_or_higher_authority_and_improves_a_lower_one():
    """Judged against the title last given to the conversation: here the world's, then the one just given."""
    def given(source: str, stored: str | None, title: str = "U") -> tuple:
        return E(SessionTitled(session=S, title=title, source=source, stored=stored), 0)

    def world(source: str) -> Callable[[SessionStore], None]:
        return lambda store: store.create_session("s", now=0, title="T", title_source=source)

    assert "replaced 'T' (user)" in check("title_follows_conversation", [given("llm", "U")], world("user"))[0]
    assert "replaced 'T' (llm)" in check("title_follows_conversation", [given("llm", "U")], world("llm"))[0]
    assert "was refused" in check("title_follows_conversation", [given("llm", None)], world("derived"))[0]
    assert check("title_follows_conversation", [given("llm", None)], world("user")) == []
    assert check("title_follows_conversation", [given("llm", None)], world("llm")) == []
    renamed = [lambda store: store.set_session_title("s", "V"), given("user", "V", "V"), given("llm", None)]
    assert check("title_follows_conversation", renamed, world("derived")) == []


def test_a_title_in_use_takes_its_lowest_free_number_and_only_when_another_conversation_shows_it():
    """s2's own old "T #2" is free for its new title only because it gives it up; "T #3", another's, is not."""
    def numbered(stored: str) -> list[tuple]:
        return [E(persisted(1), 0), lambda store: store.set_session_title("s2", stored, source="llm"),
                E(SessionTitled(session=SessionId("s2"), title="T", source="llm", stored=stored), 0)]

    def world(store: SessionStore) -> None:
        shown_by({"s1": "T", "s3": "T #3"})(store)
        store.create_session("s2", now=0, title="T #2", title_source="derived")

    assert check("title_follows_conversation", numbered("T #4"), world) == []
    def others_only(store: SessionStore) -> None:
        shown_by({"s1": "T", "s3": "T #3"})(store)
        store.create_session("s2", now=0)
    assert "yet 'T' #2 was free" in check("title_follows_conversation", numbered("T #4"), others_only)[0]
    assert check("title_names_one_conversation", numbered("T #4"), world) == []
    alone = shown_by({"s2": "T"})
    assert "yet no other conversation shows it" in check("title_names_one_conversation", numbered("T #2"), alone)[0]


def test_a_users_title_is_refused_only_when_another_conversation_shows_it():
    """A rename to the conversation's own title is no conflict; one another conversation shows is."""
    refused = E(FrontendTitleFailed(session=S, title="T", error="title 'T' is already in use"), 0)
    assert "yet no other conversation shows it" in check("title_names_one_conversation", [refused], shown_by({"s": "T"}))[0]
    assert check("title_names_one_conversation", [refused], shown_by({"s": "U", "t": "T"})) == []


def test_a_job_started_after_its_host_gave_up_does_no_work():
    started_stale = [E(FenceCancelWon(attempt=A1, hard=True), 0), E(TaskSpawn(), 0, "compress:p1.1"),
                     E(AttemptClaimed(attempt=A1, generation=1), 0)]
    started_first = [E(TaskSpawn(), 0, "compress:p1.1"), E(FenceCancelWon(attempt=A1, hard=True), 0),
                     E(AttemptClaimed(attempt=A1, generation=1), 0)]
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
        E(CompactionWatermark(session=S, attempt=A1, watermark=2), 0),
        late, E(AppendOk(session=S, ids=[3]), 1), E(persisted(3), 1),
        archive_everything, E(CommitArchived(session=S, attempt=A1, rows=1), 2),
        E(CompactionWatermark(session=S, attempt=A2, watermark=4), 3),
        E(CommitArchived(session=S, attempt=A2, rows=1), 4),
    ]
    assert check("acknowledged_appends_survive", events, arrange), "a later commit's watermark hid the loss"


def test_only_a_commit_by_another_attempt_of_the_agent_excuses_a_changed_transcript():
    def started(attempt: AttemptId, session: SessionId = S) -> tuple:
        return E(HostStarted(attempt=attempt, session=session, mode="automatic"))

    def committed(attempt: AttemptId, session: SessionId = S) -> tuple:
        return E(CompactionCommitted(session=session, attempt=attempt, tokens=1, tokens_before=2))

    changed = E(returned("unchanged", before="a", after="b"))
    overtaken = [started(A1), started(A2), committed(A2), changed]
    elsewhere = [started(A1), started(A2, SessionId("other")), committed(A2, SessionId("other")), changed]
    other_process = [started(A1), started(AttemptId.of("p2", 1)), committed(AttemptId.of("p2", 1)), changed]
    assert check("caller_transcript_only_through_commit", overtaken) == []
    assert check("caller_transcript_only_through_commit", elsewhere)
    assert check("caller_transcript_only_through_commit", other_process)


def test_a_repeat_appended_to_a_session_found_clean_before_is_caught():
    """A session found clean is read again once a new row is active there; a repeat of a retired row is no repeat."""
    hello = {"role": "user", "content": "hello", "timestamp": 1.0}

    def append(store: SessionStore) -> None:
        store.append_messages("s", [hello], now=1)

    def compact(store: SessionStore) -> None:
        store.try_acquire_lease("s", "h", now=2, ttl_s=60)
        store.archive_and_compact("s", [{"role": "assistant", "content": "summary", "timestamp": 2.0}], holder="h", watermark=1, now=2)

    steps = [append, E(AppendOk(session=S, ids=[1])), compact, E(CommitArchived(session=S, attempt=A1, rows=1)),
             append, E(AppendOk(session=S, ids=[3])), append, E(AppendOk(session=S, ids=[4]))]
    assert check("no_duplicate_persisted_turn", steps, one_head) == [
        "session s holds 2 active copies of the user message 'hello'", "session s holds 2 active copies of the user message 'hello'"]


def test_repeats_among_the_rows_written_since_a_session_was_found_clean_are_caught():
    """Rows read on from those found clean are judged among themselves too, not only against the rows before."""

    def write(*messages: dict[str, Any]) -> Callable[[SessionStore], None]:
        return lambda store: store.append_messages("s", list(messages), now=1)

    twice = {"role": "assistant", "content": "twice", "timestamp": 2.0}
    steps = [write({"role": "user", "content": "first", "timestamp": 1.0}), E(AppendOk(session=S, ids=[1])),
             write(twice, twice), E(AppendOk(session=S, ids=[2, 3]))]
    assert check("no_duplicate_persisted_turn", steps, one_head) == ["session s holds 2 active copies of the assistant message 'twice'"] * 2


def test_a_row_held_after_the_last_check_is_read_and_judged():
    """Rows met once are kept; a row written later is read when an agent first holds it."""
    held: list[dict[str, Any]] = []

    def arrange(store: SessionStore) -> dict[str, Any]:
        store.create_session("s", now=0)
        store.append_messages("s", [{"role": "user", "content": "hello", "timestamp": 1.0}], now=1)
        held.append({"role": "user", "content": "hello", "timestamp": 1.0, "_row_id": 1})
        return {"main": SimpleNamespace(agent=SimpleNamespace(messages=held))}

    def write_and_hold(store: SessionStore) -> None:
        store.append_messages("s", [{"role": "assistant", "content": "hi", "timestamp": 2.0}], now=2)
        held.append({"role": "assistant", "content": "hi!", "timestamp": 2.0, "_row_id": 2})

    found = check("durable_messages_match_rows", [E(returned("timeout")), write_and_hold, E(returned("timeout"))], arrange)
    assert [explanation.split(", but ")[0] for explanation in found] == ["agent main holds a assistant message of 3 chars at t=2.0 as durable row 2"] * 2


def test_the_store_never_edits_a_message_row():
    """What durable_messages_match_rows's kept rows rest on: message rows are only inserted (ids never reused),
    never deleted, and an update only clears their `active` and `compacted` flags."""
    sql = "\n".join(path.read_text(encoding="utf-8") for path in sorted(Path("reference/store").glob("*.py")))
    assert "id                  INTEGER PRIMARY KEY AUTOINCREMENT" in sql
    assert re.findall(r"UPDATE messages SET [^\"]*", sql) == [
        "UPDATE messages SET active = 0, compacted = 0 WHERE id = ? AND session_id = ? AND active = 1",
        "UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ? AND active = 1"]
    assert not re.search(r"DELETE FROM messages|REPLACE INTO messages|INSERT OR REPLACE|ON CONFLICT", sql)


def test_a_summarized_attempt_refused_for_no_named_cause_is_caught():
    summarized = [E(HostStarted(attempt=A1, session=S, mode="forced"), 0), E(CompactionSummaryDone(attempt=A1, chars=10), 5)]
    name = "summarized_attempt_refused_only_for_a_cause"
    assert check(name, summarized + [E(CompactionRefused(session=S, attempt=A1, reason=None), 6)])
    assert check(name, summarized + [E(CompactionRefused(session=S, attempt=A1, reason="would_grow"), 6)])
    assert check(name, summarized + [E(CompactionStrike(session=S, attempt=A1, strikes=1), 6),
                                     E(CompactionRefused(session=S, attempt=A1, reason="would_grow"), 6)]) == []
    assert check(name, summarized + [E(CompactionRefused(session=S, attempt=A1, reason="no_progress"), 6)]) == []


def test_a_fence_refusal_is_judged_by_what_reached_its_attempt():
    name = "summarized_attempt_refused_only_for_a_cause"
    begun = [E(HostStarted(attempt=A1, session=S, mode="forced"), 0)]
    assert check(name, begun + [E(FenceBeginRefused(attempt=A1, reason="cancelled"), 1)])
    assert check(name, begun + [E(FenceCancelWon(attempt=A2, hard=False), 1), E(FenceBeginRefused(attempt=A1, reason="cancelled"), 1)])
    assert check(name, begun + [E(FenceCancelWon(attempt=A1, hard=False), 1), E(FenceBeginRefused(attempt=A1, reason="cancelled"), 1)]) == []
    assert check(name, begun + [E(FenceBeginRefused(attempt=A1, reason="superseded"), 1)])
    assert check(name, [E(CompactionSummaryStarted(attempt=A2, generation=2), 0)] + begun
                 + [E(FenceBeginRefused(attempt=A1, reason="superseded"), 1)])
    assert check(name, begun + [E(CompactionSummaryStarted(attempt=A2, generation=2), 0),
                                E(FenceBeginRefused(attempt=A1, reason="superseded"), 1)]) == []
    assert check(name, begun + [E(FenceBeginRefused(attempt=A1, reason="hard_cancel"), 1)])
    assert check(name, begun + [E(HardCancelRequested(session=S), 1), E(FenceBeginRefused(attempt=A1, reason="hard_cancel"), 1)]) == []


def test_a_platform_message_delivered_after_quiet_must_be_taken_by_its_gateway():
    def on_p1(store: SessionStore) -> dict[str, Any]:
        return {"bot": SimpleNamespace(spec=SimpleNamespace(process="p1"))}

    delivered = [E(persisted(1), 10), E(GatewayDelivered(agent="bot", platform_message_id="tg:1"), 300, "drive")]
    taken = E(GatewayTurnStarted(agent="bot", platform_message_id="tg:1"), 300, "gateway")
    assert check("turn_after_quiet_persists", delivered, on_p1)
    assert check("turn_after_quiet_persists", delivered + [taken, E(persisted(2), 300, "gateway"),
                                                           E(persisted(3, "assistant"), 300, "gateway")], on_p1) == []
    assert check("turn_after_quiet_persists", delivered + [E(ProcessCrashed(process="p1", pid=1), 301)], on_p1) == []
    down = [E(ProcessCrashed(process="p1", pid=1), 5)] + delivered
    assert check("turn_after_quiet_persists", down, on_p1) == []
    assert check("turn_after_quiet_persists", [E(ProcessRestarted(process="p1", pid=2), 6)] + down[:1] + delivered[1:], on_p1) == []
    assert check("turn_after_quiet_persists", down[:1] + [E(ProcessRestarted(process="p1", pid=2), 6)] + delivered, on_p1)



def test_an_adopted_tip_row_may_stand_in_memory_as_the_unsaved_message_that_owns_it():
    maybe_written = {"role": "assistant", "content": "hello", "timestamp": 2.0, "_maybe_written": True}
    assert check("adopted_tip_reaches_agent", ADOPTED, tip_of_two(TIP_ROWS[:1] + [maybe_written])) == []
    assert check("adopted_tip_reaches_agent", ADOPTED, tip_of_two(TIP_ROWS[:1] + [UNSAVED]))


def test_a_commit_fails_only_as_the_store_refuses_it():
    """A commit the worker caught failing is judged however the run was disturbed: a store refusal is a failure,
    a KeyError (a candidate built wrong) is a bug the worker hid as one."""
    assert check("caught_errors_are_not_bugs", [E(CompactionCommitFailed(session=S, attempt=A1, error="KeyError('role')"))])
    assert check("caught_errors_are_not_bugs", [E(CompactionCommitFailed(session=S, attempt=A1, error="ParentEndedError('s')"))]) == []


def test_a_committed_return_leaves_the_agent_only_rows_live_in_its_session():
    """The list handed back is what the commit left (row 4), but the agent also kept row 2, which it retired."""
    def holding(rows: list[int]) -> Callable[[SessionStore], dict[str, Any]]:
        def arrange(store: SessionStore) -> dict[str, Any]:
            three_rows_leased(store)
            held = [{"role": "user", "content": "x", "timestamp": 0.0, "_db_persisted": True, "_row_id": row} for row in rows]
            return {"main": SimpleNamespace(spec=SimpleNamespace(name="main", process="p1"),
                                            agent=SimpleNamespace(messages=held, session_id=S))}
        return arrange

    history = [archive_all, E(CommitArchived(session=S, attempt=A1, rows=1), 5), E(commit_returned(SUMMARY_ONLY), 5, "agent:main")]
    assert check("commit_reaches_caller", history, holding([4, 2]))
    assert check("commit_reaches_caller", history, holding([4])) == []


class _Counts(Invariant):
    name = "counts_events"
    races = ()
    description = "Counts what it is handed."

    def __init__(self, system: Any) -> None:
        super().__init__(system)
        self.seen = 0

    @handles(Event)
    def any_event(self, event: Event, record: HistoryEvent) -> None:
        self.seen += 1


class _RaisesOnSecond(_Counts):
    name = "raises_on_its_second_event"

    def any_event(self, event: Event, record: HistoryEvent) -> None:
        super().any_event(event, record)
        if self.seen == 2:
            raise KeyError("no such session")

    def at_end(self, history: Any) -> None:
        raise AssertionError("a check that raised is not asked again")


def test_a_check_that_raises_is_its_invariants_violation_and_is_off_for_the_rest_of_the_run():
    broken, healthy = _RaisesOnSecond(FakeSystem()), _Counts(FakeSystem())
    invariants = InvariantSet([broken, healthy])
    history = [HistoryEvent(seq, float(seq), "t", finished(A1, "ok")) for seq in range(4)]
    found = [violation for record in history for violation in invariants.on_event(record)]
    assert [(v.invariant, v.witnesses) for v in found] == [("raises_on_its_second_event", (1,))]
    assert found[0].explanation.startswith("the check itself raised KeyError: 'no such session' (test_invariants.py:")
    assert (broken.seen, healthy.seen) == (2, 4)
    assert invariants.at_end(history) == []


def test_a_check_that_raises_leaves_the_run_it_judges_alone(monkeypatch):
    """Raised into the task that emitted the event, the check's error became the reference's: a failed commit,
    reported as `caught_errors_are_not_bugs`, and a different run."""
    scenario = load_scenario(ROOT / "scenarios" / "adopted_tip_keeps_failed_turn_beside_its_copy.toml", registry())
    clean = run_once(scenario, scenario.explore.seed)
    written, calls = NoDuplicatePersistedTurn.written, []

    def raises_on_second(self: Any, event: Any, record: HistoryEvent) -> Any:
        calls.append(record.seq)
        if len(calls) == 2:
            raise KeyError("boom")
        return written(self, event, record)

    monkeypatch.setattr(NoDuplicatePersistedTurn, "written", raises_on_second)
    broken = run_once(scenario, scenario.explore.seed)
    assert broken.result.digest() == clean.result.digest()
    assert [(v.invariant, v.witnesses) for v in broken.violations] == [("no_duplicate_persisted_turn", (calls[1],))]


def test_an_auto_reset_is_judged_by_the_attempt_its_turn_decided_on():
    """The reset's writes may wait at the store while another attempt finishes (a /compress whose late worker
    is refused): the reset was decided on the attempt the turn's own recovery came back from."""
    decided_then_other_finished = [E(finished(A1, "unchanged", "ineffective"), 0, "w"), E(RECOVERY_RETURNED, 0, "turn"),
                                   E(finished(A2, "unchanged", "commit_fence_cancelled"), 5, "w2"), E(RESET, 9, "turn")]
    assert check("no_false_auto_reset", decided_then_other_finished) == []
    decided_on_a_block = [E(finished(A1, "unchanged", "cooldown"), 0, "w"), E(RECOVERY_RETURNED, 0, "turn"),
                          E(finished(A2, "unchanged", "ineffective"), 5, "w2"), E(RESET, 9, "turn")]
    assert check("no_false_auto_reset", decided_on_a_block) == [
        "s was auto-reset though its last compression was unchanged (cooldown), not exhausted"]


class _RemembersAttempts(Invariant):
    """Marks each attempt whose host started, and notes at a crash which of them it still held."""

    name = "remembers_attempts"
    learns = (ProcessCrashed,)

    def __init__(self, system: Any) -> None:
        super().__init__(system)
        self.started: AttemptSet = AttemptSet()
        self.held_at_crash: set[AttemptId] = set()

    @handles(HostStarted)
    def host_started(self, event: HostStarted, record: HistoryEvent) -> None:
        self.started.add(event.attempt)

    @handles(ProcessCrashed)
    def crashed(self, event: ProcessCrashed, record: HistoryEvent) -> None:
        self.held_at_crash = set(self.started)


def test_a_crash_is_judged_with_what_the_dead_process_had_then_forgotten_once():
    """The facts apply a crash's amnesia after every invariant judged the crash, to their own attempts and to the
    tables the invariants keep by attempt; the other process's attempts stay."""
    lone, shared, other = _RemembersAttempts(FakeSystem()), _RemembersAttempts(FakeSystem()), _Counts(FakeSystem())
    invariants = InvariantSet([shared, other])
    history = [HistoryEvent(0, 0.0, "t", HostStarted(attempt=A1, session=S, mode="automatic")),
               HistoryEvent(1, 0.0, "t", HostStarted(attempt=P2_A1, session=S, mode="automatic")),
               HistoryEvent(2, 1.0, "t", FenceBeginOk(attempt=A1)),
               HistoryEvent(3, 2.0, "t", ProcessCrashed(process="p1", pid=100))]
    for record in history:
        assert lone.on_event(record) is None and invariants.on_event(record) == []
    for invariant in (lone, shared):
        assert invariant.held_at_crash == {A1, P2_A1} and invariant.started == {P2_A1}
        assert invariant.facts.attempt(A1).admitted is None and P2_A1 in invariant.facts.waiting
    assert shared.facts is other.facts is invariants.facts and lone.facts is not shared.facts


def test_the_events_of_the_facts_an_invariant_reads_count_among_its_reads():
    """A target that does not emit what a fact is learnt from gets the invariant listed as not applicable."""
    assert "process.crashed" in _RemembersAttempts.reads()
    assert _RemembersAttempts.applicability(frozenset({"host.started"}), frozenset(), frozenset(), True) == (
        "needs process.crashed, which the target does not emit")


def test_a_commit_credits_what_its_attempt_took_as_input_where_no_watermark_was_captured():
    """A target without a watermark (a hermes release) says what an attempt works from by its input rows: a row
    among them was summarized, a row appended during the summary (above them) was swept away."""
    summarized = [E(persisted(1), 0), E(CompactionInput(session=S, attempt=A1, rows=[1]), 1),
                  E(CommitArchived(session=S, attempt=A1, rows=1), 2)]
    swept = [E(CompactionInput(session=S, attempt=A1, rows=[]), 0), E(persisted(1), 1),
             E(CommitArchived(session=S, attempt=A1, rows=1), 2)]
    assert check("acknowledged_appends_survive", summarized, lost_append) == []
    assert check("acknowledged_appends_survive", swept, lost_append)


def test_an_invariant_states_its_property_once_in_its_docstring():
    """Its description is its docstring's first paragraph, on one line; the paragraphs after it say why, for the
    reader of the code only. A description set in the class wins."""

    class _Stated(Invariant):
        """A session has
        one live head.

        Because two heads fork the conversation."""

        name = "stated"
        races = ()

    assert _Stated.description == "A session has one live head."
    assert _Counts.description == "Counts what it is handed."
    assert all(invariant.description and "\n" not in invariant.description for invariant in INVARIANTS.values())


class _KeepsPerRun(Invariant):
    """Keeps per-run state declared on its class."""

    name = "keeps_per_run"
    races = ()
    _started: AttemptSet = per_run(AttemptSet)
    _times: dict[AttemptId, float] = per_run(dict)

    @handles(HostStarted)
    def host_started(self, event: HostStarted, record: HistoryEvent) -> None:
        self._started.add(event.attempt)
        self._times[event.attempt] = record.time


def test_state_declared_per_run_is_each_instances_own_and_forgotten_at_a_crash_as_any():
    first, second = _KeepsPerRun(FakeSystem()), _KeepsPerRun(FakeSystem())
    invariants = InvariantSet([first])
    invariants.on_event(HistoryEvent(0, 1.0, "t", HostStarted(attempt=A1, session=S, mode="automatic")))
    assert (first._times, second._times, set(second._started)) == ({A1: 1.0}, {}, set())
    invariants.on_event(HistoryEvent(1, 2.0, "t", ProcessCrashed(process="p1", pid=100)))
    assert set(first._started) == set() and first._times == {A1: 1.0}  # the set by attempt forgets, a plain dict keeps
