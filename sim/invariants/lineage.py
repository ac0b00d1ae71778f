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
from contract.store import SessionRow, StoreView
from contract.vocabulary import DELIBERATE_END_REASONS, EXPLICIT_CLOSE_REASONS
from sim.invariants.invariant import Invariant, SystemView, Violation, event_of, forget_process, handles

# Closes a terminal or a hook makes explicitly (#106459), named here rather than read from the store's taxonomy.
EXPLICIT_CLOSES = frozenset({"tui_close", "cli_close", "webhook_complete"})

# The model_config keys by which a branch, delegate or reset child names the session it forked from.
FORK_MARKERS = ("_branched_from", "_delegate_from", "_reset_from")

# Events after which the lineage in the store may have changed.
LINEAGE_EVENTS = (CommitPublished, SessionReopened, SessionAdopted, ProcessCrashed, FrontendSessionEnded, ExternalRotated)


def session_row(store: StoreView, sid: str) -> SessionRow:
    """The row of a session the store itself named (in `session_ids`, a lineage, a rotation): never missing."""
    row = store.get_session(sid)
    if row is None:
        raise LookupError(f"the store has no session {sid}, which it named")
    return row


def _is_fork(row: SessionRow) -> bool:
    return any(row.model_config.get(marker) == row.parent_id for marker in FORK_MARKERS)


def continuations(store: StoreView, sid: str) -> list[str]:
    """The children continuing `sid` (not forks of it), judged here rather than by the store's own lineage code."""
    return [child.id for child in store.children(sid) if not _is_fork(child)]


def lineage_roots(store: StoreView) -> dict[str, str]:
    """Each session's lineage root: follow compression parents; a fork (its marker names its parent) starts its own."""
    rows = {row.id: row for row in (session_row(store, sid) for sid in store.session_ids())}
    roots: dict[str, str] = {}
    for sid in rows:
        current, seen = sid, set()
        while (parent := rows[current].parent_id) in rows and not _is_fork(rows[current]) and current not in seen:
            seen.add(current)
            current = parent
        roots[sid] = current
    return roots


class _LineageCheck(Invariant):
    """Run a store check after each lineage-changing event and at the end."""

    @handles(*LINEAGE_EVENTS)
    def lineage_changed(self, event: Event, record: HistoryEvent) -> Violation | None:
        return self.check(record)

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        return self.check(history[-1] if history else None)

    def check(self, record: HistoryEvent | None) -> Violation | None:
        raise NotImplementedError


class SingleLiveHead(_LineageCheck):
    name = "single_live_head"
    needs = frozenset({'commit.published'})  # the rest only refines
    races = ("R16", "R19", "R20")
    description = "Each compression lineage has at most one live (open) session."

    def check(self, record: HistoryEvent | None) -> Violation | None:
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
    name = "one_continuation_per_parent"
    needs = frozenset({'commit.published'})  # the rest only refines
    races = ("R19",)
    description = "A session closed by compression has exactly one continuation child, never two."

    def check(self, record: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        for sid in store.session_ids():
            children = continuations(store, sid)
            if len(children) > 1:
                return self.violation(f"{sid} has {len(children)} continuations: {', '.join(sorted(children))}", record)
        return None


class NoOrphanParent(_LineageCheck):
    name = "no_orphan_parent"
    needs = frozenset({'commit.published'})  # the rest only refines
    races = ("R20",)
    description = "No reader ever sees a session closed by compression without a continuation child."

    def check(self, record: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        for sid in store.session_ids():
            row = session_row(store, sid)
            if row.end_reason == "compression" and not continuations(store, sid):
                return self.violation(f"{sid} is closed by compression but has no continuation", record)
        return None


class CallerSessionFollowsRotation(Invariant):
    name = "caller_session_follows_rotation"
    races = ("R18",)
    description = "When a compression returns to the host, the host's own session binding equals the agent's session."

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent) -> Violation | None:
        if event.caller_session != event.session:
            return self.violation(
                f"after attempt {event.attempt} the host is still bound to {event.caller_session} "
                f"but the agent moved to {event.session}", record,
            )
        return None




class JudgesRefusedTurns(Invariant):
    """An invariant that excuses a turn whose write was refused in a conversation the user ended on purpose.

    Such a turn fails closed by design: its session was closed by compression, no session of its conversation is
    live, and the last one has a deliberate end (a reset is final: deliberate_end_is_final) or an explicit close
    (cleared only by a turn of the host that routes it, #106459). No writer bound elsewhere may adopt either, so
    a terminal still bound to a closed ancestor has nowhere to write, and the reference fails that turn closed,
    naming compression, as R15's fix says. The store is read as the refusal happens: an explicit close may be
    cleared, and the conversation rotated on, before the run ends.
    """

    def __init__(self, system: SystemView) -> None:
        super().__init__(system)
        self._refused_ended: set[int] = set()  # seqs of the refusals that met a conversation ended on purpose

    @handles(AppendFailed)
    def write_refused(self, event: AppendFailed, record: HistoryEvent) -> None:
        if event.writer is None and event.error == "SessionClosedByCompression" and event.session is not None \
                and _ended_on_purpose(self.system.store, event.session):
            self._refused_ended.add(record.seq)

    def refused_in_ended_conversation(self, history: Sequence[HistoryEvent], start: HistoryEvent, failed: HistoryEvent) -> bool:
        """The turn from `start` to `failed` failed because its write was refused in a conversation ended on purpose."""
        return any(record.seq in self._refused_ended and record.task == failed.task
                   for record in history[start.seq + 1:failed.seq])


def _ended_on_purpose(store: StoreView, sid: str) -> bool:
    """`sid`'s continuations end in a session ended on purpose, and no session of its lineage is live."""
    current, seen = sid, set()
    row = store.get_session(current)
    while row is not None and row.end_reason == "compression" and current not in seen:
        seen.add(current)
        children = continuations(store, current)
        if len(children) != 1:
            return False
        current = children[0]
        row = store.get_session(current)
    if row is None or row.end_reason not in DELIBERATE_END_REASONS | EXPLICIT_CLOSE_REASONS:
        return False
    roots = lineage_roots(store)
    return all(session_row(store, other).ended_at is not None for other, root in roots.items() if root == roots[sid])


class DeliberateEndIsFinal(_LineageCheck):
    name = "deliberate_end_is_final"
    races = ("R11",)
    description = "A session ended on purpose (a reset, a switch, ...) stays ended for that reason; no rotation heals or re-closes it."

    def __init__(self, system: SystemView) -> None:
        super().__init__(system)
        self._ended: dict[str, tuple[str, HistoryEvent | None]] = {}

    @handles(FrontendSessionEnded)
    def session_ended(self, event: FrontendSessionEnded, record: HistoryEvent) -> Violation | None:
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

    def check(self, record: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        for sid, (reason, ended) in sorted(self._ended.items()):
            row = session_row(store, sid)
            if row.ended_at is None or row.end_reason != reason:
                now = "live again" if row.ended_at is None else f"ended as {row.end_reason}"
                return self.violation(f"{sid} was ended on purpose ({reason}) but is now {now}", ended, record)
        return None


class AutomaticEndNeverRefusesRotation(Invariant):
    name = "automatic_end_never_refuses_rotation"
    races = ("R11",)
    description = (
        "A rotation is refused as 'parent already ended' only for a deliberate end (a reset, a switch, ...) or an "
        "explicit close (tui_close, ...: final until a turn on the session clears it, reference/FIXES.md); a parent "
        "that only carries an automatic stamp (tui_shutdown, ...) while its agent works on is still rotated."
    )

    @handles(CompactionCommitFailed)
    def commit_failed(self, event: CompactionCommitFailed, record: HistoryEvent) -> Violation | None:
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
    """R15: a write refused because its session was rotated adopts the lineage's live head and is written there.

    The fixed design adopts once per flush: if the head it adopted is rotated in turn before the retry lands (a
    second closed write), the turn fails closed, naming compression. So the check forgets a closed write once the
    turn adopted the head that was live when the write was refused, or a continuation of it, and its retry there
    was refused again. A store error while adopting (the tip read or the retry failing, an injected fault raising
    in the turn's task) makes the turn's failure that error's, which turn_fails_only_expectedly judges.
    """

    name = "closed_write_adopts_live_tip"
    races = ("R15",)
    description = "A turn whose write hits a session closed by compression is persisted in its lineage's live head; it fails only if the lineage has none."

    def __init__(self, system: SystemView) -> None:
        super().__init__(system)
        self._closed: dict[str, tuple[HistoryEvent, str]] = {}  # task -> its failed append, and the live head
        self._adopted: dict[str, str] = {}  # task -> the head its flush adopted after a closed write

    @handles(AppendFailed)
    def append_failed(self, event: AppendFailed, record: HistoryEvent) -> None:
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
    def adopted(self, event: SessionAdopted, record: HistoryEvent) -> None:
        pending = self._closed.get(record.task)
        if pending is not None and self._continues(event.to_session, pending[1]):
            self._adopted[record.task] = event.to_session

    @handles(PointFaultFired, StoreFaultFired)
    def fault_raised(self, event: FaultFired, record: HistoryEvent) -> None:
        self._forget(record.task)  # the store failed under the adoption: the turn fails with the store's error

    @handles(AppendOk)
    def appended(self, event: AppendOk, record: HistoryEvent) -> None:
        self._forget(record.task)

    @handles(FrontendTurnFailed)
    def turn_failed(self, event: FrontendTurnFailed, record: HistoryEvent) -> Violation | None:
        self._adopted.pop(record.task, None)
        if record.task not in self._closed:
            return None
        closed, head = self._closed.pop(record.task)
        return self.violation(
            f"the turn failed writing to {event_of(closed, AppendFailed).session}, closed by compression, although its lineage "
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
    name = "late_contender_adopts"
    holder_names_attempt = True
    races = ("R19",)
    description = (
        "An attempt that wins the lease of a session already closed by compression adopts its live tip and sits "
        "out; it never summarizes the closed session."
    )

    def __init__(self, system: SystemView) -> None:
        super().__init__(system)
        self._on_closed: dict[AttemptId, HistoryEvent] = {}

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent) -> None:
        row = self.system.store.get_session(event.session)
        attempt = event.holder.attempt
        if attempt is not None and row is not None and row.end_reason == "compression":
            self._on_closed[attempt] = record

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent) -> Violation | None:
        acquired = self._on_closed.get(event.attempt)
        if acquired is None:
            return None
        return self.violation(
            f"attempt {event.attempt} took the lease of {event_of(acquired, LeaseAcquired).session}, already closed by compression, "
            "and went on to summarize it instead of adopting its tip", acquired, record,
        )

    @handles(ProcessCrashed)
    def crashed(self, event: ProcessCrashed, record: HistoryEvent) -> None:
        self._on_closed = forget_process(self._on_closed, event.process, self.system.process_of)


Stamp = tuple[str, float | None]  # an explicit close as the row carries it: (end reason, ended at)


class ExplicitCloseClearedAtTurnStart(Invariant):
    name = "explicit_close_cleared_at_turn_start"
    races = ("R11",)
    description = (
        "An explicit close (tui_close, cli_close, webhook_complete) that a turn finds on its session when it starts, "
        "with no continuation, is gone before that turn persists there: the host that routes the session clears it "
        "(#106459). A close made during a turn stays until the next turn starts on that session (a turn starts, for "
        "the store, at its first read: a close that read finds, however late it came, was made before the turn)."
    )

    def __init__(self, system: SystemView) -> None:
        super().__init__(system)
        self._stale: dict[str, tuple[Stamp, HistoryEvent]] = {}  # session -> the close a turn found, that turn's start
        self._fresh: dict[str, tuple[Stamp, HistoryEvent]] = {}  # session -> a close made since its last turn start
        self._starting: set[str] = set()  # turn tasks that have done nothing yet past their first read of the session

    def _stamp(self, sid: str) -> Stamp | None:
        row = self.system.store.get_session(sid)
        return None if row is None or row.end_reason not in EXPLICIT_CLOSES else (row.end_reason, row.ended_at)

    @handles(FrontendTurnSubmitted, GatewayTurnStarted)
    def turn_started(self, event: FrontendTurnSubmitted | GatewayTurnStarted, record: HistoryEvent) -> None:
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
    def turn_went_on(self, event: Event, record: HistoryEvent) -> None:
        self._starting.discard(record.task)

    @handles(SessionCloseCleared)
    def cleared(self, event: SessionCloseCleared, record: HistoryEvent) -> None:
        """A turn clears a close on its first read of the session, before anything else it does: a close that read
        found was made before it, however late the read came after the turn was typed (a stall, the same instant),
        so it is a close found at the turn's start, not one made during it."""
        if record.task in self._starting:
            self._fresh.pop(event.session, None)

    @handles(FrontendSessionEnded)
    def session_ended(self, event: FrontendSessionEnded, record: HistoryEvent) -> Violation | None:
        self._stale.pop(event.session, None)  # closed again during the turn: now the close is the user's
        stamp = self._stamp(event.session)
        if stamp is not None:
            self._fresh.setdefault(event.session, (stamp, record))
        return None

    @handles(TurnPersisted)
    def persisted(self, event: TurnPersisted, record: HistoryEvent) -> Violation | None:
        found = self._stale.pop(event.session, None)
        if event.writer is None and found is not None and self._stamp(event.session) == found[0]:
            return self.violation(
                f"a turn persisted to {event.session}, which still carries the {found[0][0]} close it found when it "
                "started: no one cleared the stale close, so no rotation can ever publish there", found[1], record,
            )
        return self.check(record)

    @handles(CommitPublished)
    def published(self, event: CommitPublished, record: HistoryEvent) -> Violation | None:
        return self.check(record)

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        return self.check(None)

    def check(self, record: HistoryEvent | None) -> Violation | None:
        for sid, (stamp, closed) in sorted(self._fresh.items()):
            if self._stamp(sid) != stamp:
                return self.violation(f"{sid}'s {stamp[0]} close, made during a turn, was undone before its next turn started", closed, record)
        return None
