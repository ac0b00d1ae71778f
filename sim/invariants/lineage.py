"""Invariants of compression lineage in the store: one live head, one continuation, no orphan parent."""

from __future__ import annotations

from collections.abc import Sequence

from contract.events import (
    AppendFailed,
    AppendOk,
    CommitPublished,
    CompactionCommitFailed,
    CompactionSummaryStarted,
    Event,
    ExternalRotated,
    FaultFired,
    FrontendSessionEnded,
    FrontendTurnFailed,
    FrontendTurnSubmitted,
    GatewayTurnStarted,
    HostReturned,
    HostStarted,
    LeaseAcquired,
    PointFaultFired,
    ProcessCrashed,
    SessionAdopted,
    SessionCloseCleared,
    SessionReopened,
    StoreFaultFired,
    TurnPersisted,
)
from contract.history import HistoryEvent
from contract.ids import AttemptId, SessionId
from contract.vocabulary import COMPRESSION_END, DELIBERATE_END_REASONS, EXPLICIT_CLOSE_REASONS
from sim.invariants.facts import CRASHES, AttemptTable
from sim.invariants.invariant import Invariant, Violation, handles, per_run
from sim.invariants.lineage_reads import continuations, lineage_roots, session_row

# Events after which the lineage in the store may have changed.
LINEAGE_EVENTS = (CommitPublished, SessionReopened, SessionAdopted, ProcessCrashed, FrontendSessionEnded, ExternalRotated)


class _LineageCheck(Invariant):
    """Run a store check after each lineage-changing event and at the end."""

    @handles(*LINEAGE_EVENTS)
    def lineage_changed(self, event: Event, record: HistoryEvent[Event]) -> Violation | None:
        return self.check(record)

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        return self.check(history[-1] if history else None)

    def check(self, record: HistoryEvent[Event] | None) -> Violation | None:
        raise NotImplementedError


class SingleLiveHead(_LineageCheck):
    """Each compression lineage has at most one live (open) session."""

    name = "single_live_head"
    needs = frozenset({'commit.published'})  # the rest only refines
    races = ("R16", "R19", "R20")

    def check(self, record: HistoryEvent[Event] | None) -> Violation | None:
        store = self.system.store
        live: dict[str, list[str]] = {}
        for sid, root in lineage_roots(store).items():
            if session_row(store, sid).ended_at is None:
                live.setdefault(root, []).append(sid)
        for root, heads in sorted(live.items()):
            if len(heads) > 1:
                return self.violation(f"lineage of {root} has {len(heads)} live heads: {', '.join(sorted(heads))}", record)
        return None


class OneContinuationPerParent(_LineageCheck):
    """A session closed by compression has exactly one continuation child, never two."""

    name = "one_continuation_per_parent"
    needs = frozenset({'commit.published'})  # the rest only refines
    races = ("R19",)

    def check(self, record: HistoryEvent[Event] | None) -> Violation | None:
        store = self.system.store
        for sid in store.session_ids():
            children = continuations(store, sid)
            if len(children) > 1:
                return self.violation(f"{sid} has {len(children)} continuations: {', '.join(sorted(children))}", record)
        return None


class NoOrphanParent(_LineageCheck):
    """No reader ever sees a session closed by compression without a continuation child."""

    name = "no_orphan_parent"
    needs = frozenset({'commit.published'})  # the rest only refines
    races = ("R20",)

    def check(self, record: HistoryEvent[Event] | None) -> Violation | None:
        store = self.system.store
        for sid in store.session_ids():
            row = session_row(store, sid)
            if row.end_reason == COMPRESSION_END and not continuations(store, sid):
                return self.violation(f"{sid} is closed by compression but has no continuation", record)
        return None


class CallerSessionFollowsRotation(Invariant):
    """When a compression returns to the host, the host's own session binding equals the agent's session."""

    name = "caller_session_follows_rotation"
    races = ("R18",)

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> Violation | None:
        if event.caller_session != event.session:
            return self.violation(
                f"after attempt {event.attempt} the host is still bound to {event.caller_session} "
                f"but the agent moved to {event.session}", record,
            )
        return None


class DeliberateEndIsFinal(_LineageCheck):
    """A session ended on purpose (a reset, a switch, ...) stays ended for that reason; no rotation heals or
    re-closes it."""

    name = "deliberate_end_is_final"
    races = ("R11",)

    _ended: dict[str, tuple[str, HistoryEvent[Event] | None]] = per_run(dict)

    @handles(FrontendSessionEnded)
    def session_ended(self, event: FrontendSessionEnded, record: HistoryEvent[FrontendSessionEnded]) -> Violation | None:
        reason = event.reason
        if reason is None:  # the frontend's default stamp: read what it wrote
            row = self.system.store.get_session(event.session)
            reason = None if row is None else row.end_reason
        if reason in DELIBERATE_END_REASONS:
            self._ended.setdefault(event.session, (reason, record))
        return self.check(record)

    def at_start(self) -> None:
        """Sessions the world starts with already ended on purpose."""
        store = self.system.store
        for sid in store.session_ids():
            row = session_row(store, sid)
            if row.end_reason in DELIBERATE_END_REASONS:
                self._ended.setdefault(sid, (row.end_reason, None))

    def check(self, record: HistoryEvent[Event] | None) -> Violation | None:
        store = self.system.store
        for sid, (reason, ended) in sorted(self._ended.items()):
            row = session_row(store, sid)
            if row.ended_at is None or row.end_reason != reason:
                now = "live again" if row.ended_at is None else f"ended as {row.end_reason}"
                return self.violation(f"{sid} was ended on purpose ({reason}) but is now {now}", ended, record)
        return None


class AutomaticEndNeverRefusesRotation(Invariant):
    """A rotation is refused as 'parent already ended' only for a deliberate end (a reset, a switch, ...) or an explicit
    close (tui_close, ...: final until a turn on the session clears it, reference/FIXES.md); a parent that only carries
    an automatic stamp (tui_shutdown, ...) while its agent works on is still rotated."""

    name = "automatic_end_never_refuses_rotation"
    races = ("R11",)

    @handles(CompactionCommitFailed)
    def commit_failed(self, event: CompactionCommitFailed, record: HistoryEvent[CompactionCommitFailed]) -> Violation | None:
        if not event.error.startswith("ParentEndedError"):
            return None
        row = self.system.store.get_session(event.session)
        if row is None or row.end_reason in DELIBERATE_END_REASONS | EXPLICIT_CLOSE_REASONS:
            return None
        return self.violation(
            f"attempt {event.attempt}'s rotation of {event.session} was refused as already ended, but its end stamp "
            f"({row.end_reason}) is automatic: every later compaction is wedged the same way", record,
        )


class ClosedWriteAdoptsLiveTip(Invariant):
    """A turn whose write hits a session closed by compression is persisted in its lineage's live head; it fails only if
    the lineage has none.

    The fixed design adopts once per flush: if the head it adopted is rotated in turn before the retry lands (a
    second closed write), the turn fails closed, naming compression. So the check forgets a closed write once the
    turn adopted the head that was live when the write was refused, or a continuation of it, and its retry there
    was refused again. A store error while adopting (the tip read or the retry failing, an injected fault raising
    in the turn's task) makes the turn's failure that error's, which turn_fails_only_expectedly judges.
    """

    name = "closed_write_adopts_live_tip"
    races = ("R15",)

    _closed: dict[str, tuple[HistoryEvent[AppendFailed], str]] = per_run(dict)  # task -> its failed append, and the live head
    _adopted: dict[str, str] = per_run(dict)  # task -> the head its flush adopted after a closed write

    @handles(AppendFailed)
    def append_failed(self, event: AppendFailed, record: HistoryEvent[AppendFailed]) -> None:
        if event.writer is not None:
            return
        if event.error != "SessionClosedByCompression" or self._adopted.get(record.task) == event.session:
            # the retry in the tip met the store failing (an injected busy or failed write), or met the tip rotated
            # in turn, which fails closed by design: the turn's failure is not a closed write left unadopted
            self._forget(record.task)
            return
        head = self._live_head(event.session)
        if head is not None:
            self._closed[record.task] = (record, head)

    @handles(SessionAdopted)
    def adopted(self, event: SessionAdopted, record: HistoryEvent[SessionAdopted]) -> None:
        pending = self._closed.get(record.task)
        if pending is not None and self._continues(event.to_session, pending[1]):
            self._adopted[record.task] = event.to_session

    @handles(PointFaultFired, StoreFaultFired)
    def fault_raised(self, event: FaultFired, record: HistoryEvent[FaultFired]) -> None:
        self._forget(record.task)  # the store failed under the adoption: the turn fails with the store's error

    @handles(AppendOk)
    def appended(self, event: AppendOk, record: HistoryEvent[AppendOk]) -> None:
        self._forget(record.task)

    @handles(FrontendTurnFailed)
    def turn_failed(self, event: FrontendTurnFailed, record: HistoryEvent[FrontendTurnFailed]) -> Violation | None:
        self._adopted.pop(record.task, None)
        if record.task not in self._closed:
            return None
        closed, head = self._closed.pop(record.task)
        return self.violation(
            f"the turn failed writing to {closed.event.session}, closed by compression, although its lineage "
            f"continues live in {head}", closed, record,
        )

    def _forget(self, task: str) -> None:
        self._closed.pop(task, None)
        self._adopted.pop(task, None)

    def _continues(self, sid: str, head: str) -> bool:
        """`sid` is `head` or a continuation of it: a head the lineage had at or after the refusal."""
        store, seen = self.system.store, set()
        current: str | None = sid
        while current is not None and current not in seen:
            if current == head:
                return True
            seen.add(current)
            row = store.get_session(current)
            current = None if row is None else row.parent_id
        return False

    def _live_head(self, session: SessionId | None) -> str | None:
        """The live session of `session`'s lineage other than itself, found by walking parents (not the store's tip walk)."""
        store = self.system.store
        roots = lineage_roots(store)
        if session not in roots:
            return None
        heads = [sid for sid, root in roots.items() if root == roots[session] and sid != session and session_row(store, sid).ended_at is None]
        return heads[0] if len(heads) == 1 else None


class LateContenderAdopts(Invariant):
    """An attempt that wins the lease of a session already closed by compression adopts its live tip and sits out; it
    never summarizes the closed session."""

    name = "late_contender_adopts"
    holder_names_attempt = True
    races = ("R19",)
    learns = CRASHES

    _on_closed: AttemptTable[AttemptId, HistoryEvent[LeaseAcquired]] = per_run(AttemptTable)

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        row = self.system.store.get_session(event.session)
        attempt = event.holder.attempt
        if attempt is not None and row is not None and row.end_reason == COMPRESSION_END:
            self._on_closed[attempt] = record

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent[CompactionSummaryStarted]) -> Violation | None:
        acquired = self._on_closed.get(event.attempt)
        if acquired is None:
            return None
        return self.violation(
            f"attempt {event.attempt} took the lease of {acquired.event.session}, already closed by compression, "
            "and went on to summarize it instead of adopting its tip", acquired, record,
        )


Stamp = tuple[str, float | None]  # an explicit close as the row carries it: (end reason, ended at)


class ExplicitCloseClearedAtTurnStart(Invariant):
    """An explicit close (tui_close, cli_close, webhook_complete) that a turn finds on its session when it starts, with
    no continuation, is gone before that turn persists there: the host that routes the session clears it (#106459). A
    close made during a turn stays until the next turn starts on that session (a turn starts, for the store, at its
    first read: a close that read finds, however late it came, was made before the turn)."""

    name = "explicit_close_cleared_at_turn_start"
    races = ("R11",)

    _stale: dict[str, tuple[Stamp, HistoryEvent[Event]]] = per_run(dict)  # session -> the close a turn found, that turn's start
    _fresh: dict[str, tuple[Stamp, HistoryEvent[Event]]] = per_run(dict)  # session -> a close made since its last turn start
    _starting: set[str] = per_run(set)  # turn tasks that have done nothing yet past their first read of the session

    def _stamp(self, sid: str) -> Stamp | None:
        row = self.system.store.get_session(sid)
        return None if row is None or row.end_reason not in EXPLICIT_CLOSE_REASONS else (row.end_reason, row.ended_at)

    @handles(FrontendTurnSubmitted, GatewayTurnStarted)
    def turn_started(self, event: FrontendTurnSubmitted | GatewayTurnStarted, record: HistoryEvent[FrontendTurnSubmitted | GatewayTurnStarted]) -> None:
        slot = self.system.agents.get(event.agent)
        if slot is None:
            return
        sid = slot.agent.session_id
        self._starting.add(record.task)
        self._fresh.pop(sid, None)
        stamp = self._stamp(sid)
        if stamp is not None and not continuations(self.system.store, sid):
            self._stale[sid] = (stamp, record)

    @handles(HostStarted, AppendOk, AppendFailed, SessionReopened, SessionAdopted)
    def turn_went_on(self, event: Event, record: HistoryEvent[Event]) -> None:
        self._starting.discard(record.task)

    @handles(SessionCloseCleared)
    def cleared(self, event: SessionCloseCleared, record: HistoryEvent[SessionCloseCleared]) -> None:
        if record.task in self._starting:
            self._fresh.pop(event.session, None)

    @handles(FrontendSessionEnded)
    def session_ended(self, event: FrontendSessionEnded, record: HistoryEvent[FrontendSessionEnded]) -> None:
        self._stale.pop(event.session, None)  # closed again during the turn: now the close is the user's
        stamp = self._stamp(event.session)
        if stamp is not None:
            self._fresh.setdefault(event.session, (stamp, record))

    @handles(TurnPersisted)
    def persisted(self, event: TurnPersisted, record: HistoryEvent[TurnPersisted]) -> Violation | None:
        found = self._stale.pop(event.session, None)
        if event.writer is None and found is not None and self._stamp(event.session) == found[0]:
            return self.violation(
                f"a turn persisted to {event.session}, which still carries the {found[0][0]} close it found when it "
                "started: no one cleared the stale close, so no rotation can ever publish there", found[1], record,
            )
        return self.check(record)

    @handles(CommitPublished)
    def published(self, event: CommitPublished, record: HistoryEvent[CommitPublished]) -> Violation | None:
        return self.check(record)

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        return self.check(None)

    def check(self, record: HistoryEvent[Event] | None) -> Violation | None:
        for sid, (stamp, closed) in sorted(self._fresh.items()):
            if self._stamp(sid) != stamp:
                return self.violation(f"{sid}'s {stamp[0]} close, made during a turn, was undone before its next turn started", closed, record)
        return None
