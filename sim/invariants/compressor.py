"""Invariants of compressor state: stale attempts write nothing; refusals feed the breaker."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from contract.events import (
    AttemptClaimed,
    AttemptRestored,
    CompactionBlocked,
    CompactionCommitted,
    CompactionFinished,
    CompactionInput,
    CompactionRefused,
    CompactionStrike,
    CompactionStrikeResetFailed,
    CompactionSummaryStarted,
    CooldownCleared,
    CooldownClearSkipped,
    CooldownPersistFailed,
    CooldownRestored,
    CooldownSet,
    Event,
    FenceBeginOk,
    FenceBeginRefused,
    FenceCancelWon,
    HostReturned,
    HostStarted,
    HostTimeout,
    LeaseAcquired,
    ProcessCrashed,
    StoreFaultFired,
)
from contract.history import HistoryEvent
from contract.ids import AttemptId, SessionId
from contract.store import CooldownRow
from sim.invariants.facts import CRASHES, HOST_GAVE_UP, AttemptTable, ProcessTable, RunFacts
from sim.invariants.invariant import Invariant, SystemView, Violation, handles, per_run

# Events by which an attempt writes a session's cooldown row (or its breaker counters).
COOLDOWN_WRITES = (CooldownSet, CooldownCleared, CooldownRestored, CompactionStrike, CompactionCommitted)
CooldownWrite = CooldownSet | CooldownCleared | CooldownRestored | CompactionStrike | CompactionCommitted
HOST_STARTS = (HostStarted,)  # the facts of each attempt's start (RunFacts.attempt): its agent, its mode


def compressor_of(facts: RunFacts, attempt: AttemptId) -> tuple[str, str | None]:
    """The compressor an attempt claims from: its agent's in its process incarnation (the agent whose user's task
    started it; where none is known, the incarnation's)."""
    return attempt.process, facts.attempt(attempt).agent


def started_as(facts: RunFacts, attempt: AttemptId, mode: str) -> bool:
    """Whether `attempt`'s host started it in `mode` (`forced`, `overflow`, ...)."""
    host = facts.attempt(attempt).host
    return host is not None and host.event.mode == mode


class JudgesClaims(Invariant):
    """An invariant that judges an attempt against the newer claims of its compressor that took a lease.

    Generations are numbered per compressor, and each agent has its own: two agents of one process claim 1,
    2, ... each, so an attempt is superseded only by its own agent's newer claims. The agent is the one whose
    user's task started the attempt (a terminal's drive, a gateway agent's queue); where the task says nothing
    (a real worker's log, one agent per process), the process incarnation stands for it.

    A newer claim supersedes once its attempt took the lease (a loser that sat out owned nothing, #198 F1), unless
    it finished with no state written for it: an attempt that won the lease and then sat out before any work (its
    watermark read failed) owned nothing either, so the older attempt's rollback is still the current claim's (R1).
    That is judged from what the attempt observably did, not from its giving the claim back (attempt.retired), which
    is the reference's own account. A state write for the attempt (its own, or its host's timeout record, even after
    it finished) makes it an owner: an older rollback would erase that write.
    """

    learns = HOST_STARTS

    _generation: dict[AttemptId, int] = per_run(dict)  # attempt -> its claimed generation
    _lease_takers: dict[tuple[str, str | None], list[tuple[AttemptId, HistoryEvent[Event]]]] = per_run(dict)  # compressor -> attempts that took the lease
    _finished: set[AttemptId] = per_run(set)  # attempts that finished
    _wrote: set[AttemptId] = per_run(set)  # attempts some compressor state was written for

    @handles(AttemptClaimed)
    def claimed(self, event: AttemptClaimed, record: HistoryEvent[AttemptClaimed]) -> None:
        self._generation[event.attempt] = event.generation

    @handles(LeaseAcquired)
    def took_lease(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        attempt = event.holder.attempt
        if attempt in self._generation:
            self._lease_takers.setdefault(compressor_of(self.facts, attempt), []).append((attempt, record))

    @handles(CompactionFinished)
    def claim_finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> None:
        self._finished.add(event.attempt)

    @handles(*COOLDOWN_WRITES)
    def state_written(self, event: CooldownWrite, record: HistoryEvent[Event]) -> None:
        if event.attempt is not None:
            self._wrote.add(event.attempt)

    def superseding(self, attempt: AttemptId, generation: int | None = None) -> tuple[int, HistoryEvent[Event]] | None:
        """The newest owning claim of `attempt`'s compressor that took a lease, if newer than `attempt` (or `generation`)."""
        mine = self._generation.get(attempt) if generation is None else generation
        if mine is None:
            return None
        owners = [
            (self._generation[taker], acquired) for taker, acquired in self._lease_takers.get(compressor_of(self.facts, attempt), [])
            if taker not in self._finished or taker in self._wrote
        ]
        newest = max(owners, key=lambda owner: owner[0], default=None)
        return newest if newest is not None and newest[0] > mine else None


class StaleAttemptWritesNoState(JudgesClaims):
    """An attempt its host gave up on never clears the cooldown; a superseded attempt (a newer attempt of its agent's
    compressor has taken the lease) never restores compressor state.

    A restore is judged against its own agent's newer claims that took a lease (see JudgesClaims).
    """

    name = "stale_attempt_writes_no_state"
    holder_names_attempt = True
    races = ("R2", "R21")

    _given_up: dict[AttemptId, HistoryEvent[Event]] = per_run(dict)

    @handles(FenceCancelWon, HostTimeout)
    def given_up(self, event: FenceCancelWon | HostTimeout, record: HistoryEvent[FenceCancelWon | HostTimeout]) -> None:
        self._given_up.setdefault(event.attempt, record)

    @handles(CooldownCleared)
    def cleared(self, event: CooldownCleared, record: HistoryEvent[CooldownCleared]) -> Violation | None:
        self.state_written(event, record)
        if event.attempt in self._given_up:
            return self.violation(f"attempt {event.attempt} cleared the cooldown after its host gave up on it", self._given_up[event.attempt], record)
        return None

    @handles(AttemptRestored)
    def restored(self, event: AttemptRestored, record: HistoryEvent[AttemptRestored]) -> Violation | None:
        newest = self.superseding(event.attempt, event.generation)
        if newest is not None:
            return self.violation(
                f"attempt {event.attempt} (generation {event.generation}) restored compressor state over "
                f"generation {newest[0]}, which had taken the lease", newest[1], record,
            )
        return None


class WouldGrowLatchesBreaker(Invariant):
    """A committed compaction never grows the transcript, and at most two would-grow refusals happen in a row before the
    breaker blocks the next automatic attempt.

    The breaker blocks automatic attempts only: a /compress is the user's explicit request and runs past it. Every
    would-grow refusal counts toward the streak (a forced one strikes too), but only an attempt the breaker gates can
    show it failed to latch; a third refusal of a /compress only shows the user asked again.
    """

    name = "would_grow_latches_breaker"
    races = ("R13",)
    learns = HOST_STARTS

    _streak: dict[SessionId, list[HistoryEvent[Event]]] = per_run(dict)

    @handles(CompactionCommitted)
    def committed(self, event: CompactionCommitted, record: HistoryEvent[CompactionCommitted]) -> Violation | None:
        self._streak.pop(event.session, None)
        if event.tokens > event.tokens_before:
            return self.violation(f"attempt {event.attempt} committed {event.tokens} tokens over {event.tokens_before}", record)
        return None

    @handles(CompactionRefused)
    def refused(self, event: CompactionRefused, record: HistoryEvent[CompactionRefused]) -> Violation | None:
        if event.reason != "would_grow":
            return None
        streak = self._streak.setdefault(event.session, [])
        streak.append(record)
        if len(streak) > 2 and not started_as(self.facts, event.attempt, "forced"):
            return self.violation(f"{len(streak)} would-grow refusals in a row on {event.session}: the breaker never latched", *streak)
        return None


class HardCancelRestoresCooldown(JudgesClaims):
    """A hard-cancelled attempt that never began a commit leaves its session's cooldown row exactly as it found it (a
    Ctrl+C that wins the fence only after the attempt refused on its own stops nothing); one its host reported timed out
    leaves the row to the host's timeout record: its rollback writes no row.

    Only a stop that could still undo something is judged, by a rollback the design lets run. Not judged: an attempt
    that began its commit or whose rollback failed; a row another attempt wrote meanwhile (the rollback puts back what
    its attempt read); a Ctrl+C that won the fence after the attempt refused (the cooldown is the real failure's,
    recorded before the press); a rollback made stale by a newer claim of the same compressor that took a lease, on any
    session, before it ran (R21: it must write nothing, stale_attempt_writes_no_state). A claim that sat out without a
    lease, or finished before any state was written for it, excuses nothing (#198 F1, see JudgesClaims).

    A host timeout before the stop excuses the row from being as found, not the rollback from writing it: the cooldown
    is the host's record (hermes: a late same-generation rollback is inert), and a rollback that writes the row anyway
    (before the record lands or after it) puts back whatever the attempt found, e.g. the longer cooldown a /compress
    had lifted, which then outlives the timeout's backoff. A timeout after the stop excuses nothing: a stop is not a
    timeout, and must leave no timeout cooldown behind.
    """

    name = "hard_cancel_restores_cooldown"
    holder_names_attempt = True
    races = ("R1",)

    _found: dict[AttemptId | None, tuple[SessionId, CooldownRow, HistoryEvent[Event]]] = per_run(dict)
    _hard: dict[AttemptId | None, HistoryEvent[Event]] = per_run(dict)
    _excused: set[AttemptId | None] = per_run(set)
    _settled: set[AttemptId | None] = per_run(set)  # refused before any stop reached them
    _restored: set[AttemptId | None] = per_run(set)  # their rollback ran: a later claim excuses nothing
    _timed_out: dict[AttemptId, HistoryEvent[Event]] = per_run(dict)  # attempt -> its host's return as a timeout
    _rewrote: dict[AttemptId, HistoryEvent[Event]] = per_run(dict)  # attempt -> its rollback's write of the cooldown row

    @handles(HostReturned)
    def host_returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> Violation | None:
        if event.status != "timeout":
            return None
        self._timed_out[event.attempt] = record
        return self._rollback_over_timeout(event.attempt)

    @handles(LeaseAcquired)
    def took_lease(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        attempt = event.holder.attempt
        self._found[attempt] = (event.session, self.system.store.cooldown_row(event.session), record)
        self._hard.pop(attempt, None)
        self._excused.discard(attempt)
        self._settled.discard(attempt)
        self._restored.discard(attempt)
        super().took_lease(event, record)

    @handles(CompactionRefused)
    def refused(self, event: CompactionRefused, record: HistoryEvent[CompactionRefused]) -> None:
        if event.attempt not in self._hard:
            self._settled.add(event.attempt)

    @handles(FenceBeginRefused)
    def refused_at_door(self, event: FenceBeginRefused, record: HistoryEvent[FenceBeginRefused]) -> None:
        if event.reason == "hard_cancel":  # the press reached the fence before its cancel did: a stop all the same
            self._hard.setdefault(event.attempt, record)

    @handles(AttemptRestored)
    def restored(self, event: AttemptRestored, record: HistoryEvent[AttemptRestored]) -> None:
        self._restored.add(event.attempt)

    @handles(FenceCancelWon)
    def cancel_won(self, event: FenceCancelWon, record: HistoryEvent[FenceCancelWon]) -> None:
        if event.hard and event.attempt not in self._settled:
            self._hard.setdefault(event.attempt, record)

    @handles(FenceBeginOk)
    def began_commit(self, event: FenceBeginOk, record: HistoryEvent[FenceBeginOk]) -> None:
        self._excused.add(event.attempt)

    @handles(HostTimeout)
    def timed_out(self, event: HostTimeout, record: HistoryEvent[HostTimeout]) -> None:
        if event.attempt not in self._hard:
            self._excused.add(event.attempt)

    @handles(*COOLDOWN_WRITES)
    def cooldown_written(self, event: CooldownWrite, record: HistoryEvent[Event]) -> Violation | None:
        self.state_written(event, record)
        # another attempt wrote the row meanwhile: the rollback restores what its attempt read, not this
        self._excused.update(a for a, (session, _, _) in self._found.items() if session == event.session and a != event.attempt)
        if not isinstance(event, CooldownRestored):
            return None
        self._rewrote[event.attempt] = record
        return self._rollback_over_timeout(event.attempt)

    def _rollback_over_timeout(self, attempt: AttemptId) -> Violation | None:
        """The attempt's rollback wrote the cooldown row although its host reported it timed out (either order:
        the host may still be writing its record when the rollback runs)."""
        if attempt not in self._timed_out or attempt not in self._rewrote:
            return None
        return self.violation(
            f"attempt {attempt}'s rollback wrote the cooldown row although its host had timed it out: the cooldown "
            f"is the host's timeout record, not the attempt's to roll back",
            self._timed_out.pop(attempt), self._rewrote.pop(attempt),
        )

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> Violation | None:
        self.claim_finished(event, record)
        if event.attempt not in self._found:
            return None
        session, before, acquired = self._found.pop(event.attempt)
        self._settled.discard(event.attempt)
        stale = event.attempt not in self._restored and self.superseding(event.attempt) is not None
        self._restored.discard(event.attempt)
        hard = self._hard.pop(event.attempt, None)
        if hard is None or stale or event.attempt in self._excused or event.status == "error":
            return None
        after = self.system.store.cooldown_row(session)
        if after != before:
            return self.violation(
                f"attempt {event.attempt} was hard-cancelled before its commit but left {session}'s cooldown row as {after}, "
                f"not as it found it ({before})", acquired, hard, record,
            )
        return None


class CooldownNeverShortened(Invariant):
    """Recording a failure cooldown never moves the session's durable deadline earlier; only a clear or a rollback
    may."""

    name = "cooldown_never_shortened"
    races = ("R2",)

    # Injected failures around these writes may change the row without their event: forget what was recorded.
    UNSEEN_WRITES = ("clear_cooldown", "restore_cooldown_row")

    _deadline: dict[SessionId, tuple[float, HistoryEvent[Event]]] = per_run(dict)

    @handles(CooldownCleared, CooldownRestored)
    def lifted(self, event: CooldownCleared | CooldownRestored, record: HistoryEvent[CooldownCleared | CooldownRestored]) -> None:
        self._deadline.pop(event.session, None)

    @handles(StoreFaultFired)
    def store_fault(self, event: StoreFaultFired, record: HistoryEvent[StoreFaultFired]) -> None:
        if event.op in self.UNSEEN_WRITES:
            self._deadline.clear()

    @handles(CooldownSet)
    def recorded(self, event: CooldownSet, record: HistoryEvent[CooldownSet]) -> Violation | None:
        stored = self.system.store.cooldown_row(event.session).until
        before = self._deadline.get(event.session)
        if before is not None and (stored is None or stored < before[0] - 1e-9):
            return self.violation(
                f"attempt {event.attempt} recorded a cooldown until {event.until_s:g}s and {event.session}'s deadline moved "
                f"from {before[0]:g}s back to {stored if stored is None else format(stored, 'g')}", before[1], record,
            )
        latest = max(event.until_s, stored if stored is not None else event.until_s)
        if before is None or latest > before[0]:
            self._deadline[event.session] = (latest, record)
        return None


class NoSummaryInsideCooldown(Invariant):
    """An attempt starts its summary only while its session's durable failure cooldown is not live: an automatic
    attempt is held off by it, a forced one clears it first (also when another agent or process recorded it). The one
    exception is the recovery of a provider-proven context overflow, which bypasses the cooldown (R23).

    The attempt reads the row once, under its lease (step 9), or a forced one clears it there: all it can know. An
    attempt whose lease was lost meanwhile may still record its split-failure cooldown (#97948) after that; no lease
    holder is told of it, and nothing is re-read before the summary. So the deadline judged is the row as it stood
    when the attempt took its lease (none once it cleared it), and only while the row still holds it.
    """

    name = "no_summary_inside_cooldown"
    holder_names_attempt = True
    races = ("R2", "R13")
    learns = HOST_STARTS

    _session_of: dict[AttemptId, SessionId] = per_run(dict)  # attempt -> the session whose lease it took
    _seen: dict[AttemptId, float | None] = per_run(dict)  # attempt -> the deadline live when it took the lease
    _recorded: dict[SessionId, HistoryEvent[Event]] = per_run(dict)  # session -> its latest cooldown.set

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        attempt = event.holder.attempt
        if attempt is None:
            return  # a holder id that names no attempt: nothing of it is judged here
        self._session_of[attempt] = event.session
        self._seen[attempt] = self.system.store.cooldown_row(event.session).until

    @handles(CooldownSet)
    def recorded(self, event: CooldownSet, record: HistoryEvent[CooldownSet]) -> None:
        self._recorded[event.session] = record

    @handles(CooldownCleared)
    def cleared(self, event: CooldownCleared, record: HistoryEvent[CooldownCleared]) -> None:
        if self._session_of.get(event.attempt) == event.session:
            self._seen[event.attempt] = None

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent[CompactionSummaryStarted]) -> Violation | None:
        if event.attempt not in self._session_of or started_as(self.facts, event.attempt, "overflow"):
            return None
        session = self._session_of[event.attempt]
        stored, seen = self.system.store.cooldown_row(session).until, self._seen.get(event.attempt)
        until = None if stored is None or seen is None else min(stored, seen)
        if until is not None and until > record.time:
            return self.violation(
                f"attempt {event.attempt} started its summary on {session} inside a failure cooldown that "
                f"lasts until {until:g}s", self._recorded.get(session), record,
            )
        return None


# What an unseen write may have left as a session's deadline: anything.
UNKNOWN_DEADLINE = math.inf
# Store writes of the cooldown row that an injected failure may make land without their event.
COOLDOWN_STORE_OPS = ("record_cooldown", "clear_cooldown", "restore_cooldown_row")


class _Deadlines:
    """A cooldown deadline per key (a session's row, a compressor) as it changed over a run (0.0: none)."""

    def __init__(self) -> None:
        self._changes: dict[Hashable, list[tuple[int, float]]] = {}  # key -> (seq, deadline) from that event on
        self._initial = 0.0  # the deadline of a key no event touched yet

    def set(self, key: Hashable, record: HistoryEvent[Event], deadline: float) -> None:
        self._changes.setdefault(key, []).append((record.seq, deadline))

    def raise_to(self, key: Hashable, record: HistoryEvent[Event], deadline: float) -> None:
        """The later of the current deadline and `deadline` (the durable row's merge-max)."""
        if deadline > self.current(key):
            self.set(key, record, deadline)

    def current(self, key: Hashable) -> float:
        changes = self._changes.get(key)
        return changes[-1][1] if changes else self._initial

    def max_since(self, key: Hashable, seq: int) -> float:
        """The latest deadline in force at any moment from event `seq` on."""
        changes = self._changes.get(key, [])
        before = [deadline for at, deadline in changes if at <= seq]
        return max([before[-1] if before else self._initial] + [deadline for at, deadline in changes if at > seq])

    def forget(self, record: HistoryEvent[Event]) -> None:
        """A write may have landed unseen: every deadline is unknown until its next reported change."""
        self._initial = UNKNOWN_DEADLINE
        for key in self._changes:
            self.set(key, record, UNKNOWN_DEADLINE)


class CooldownBlocksOnlyWhileInForce(Invariant):
    """An automatic attempt is blocked by a failure cooldown only while the cooldowns the system reported say one is
    in force: a recorded deadline (a failure's or a host timeout's cooldown.set) not lifted since by a reported clear
    of the session's row or of the attempt's own compressor; a reported clear really lifts it.

    The converse of no_summary_inside_cooldown, judged from events only (no store read): a model of the durable row
    (merge-max of cooldown.set, emptied by cooldown.cleared) and of each compressor's local deadline (its own records
    and clears, and the row a gate of it was blocked by). The gate reads both at some moment between its claim and its
    block, against the clock at its start, so a block is lawful when a deadline later than the claim was in force at
    any moment of that window. A rollback (cooldown.restored, attempt.restored) puts back a value captured after the
    attempt's claim: at most the largest its window saw. A durable write and its event share one step (so do the
    gate's read and its block); only a store fault around a cooldown write leaves the rows unknown (any deadline
    lawful) until their next reported clear. A failure's local deadline, though, is set a step before its record: a
    block the model cannot explain waits for a record by an attempt of the same compressor under way at the block (or
    for that process's crash, which may swallow the record), and is reported only if none comes.
    """

    name = "cooldown_blocks_only_while_in_force"
    races = ("R2",)
    learns = HOST_STARTS

    def __init__(self, system: SystemView) -> None:
        super().__init__(system)
        self._durable = _Deadlines()  # by session
        self._local = _Deadlines()  # by compressor
        self._claimed: dict[AttemptId, HistoryEvent[Event]] = {}  # attempt -> its attempt.claimed
        self._cleared: dict[SessionId, HistoryEvent[Event]] = {}  # session -> its latest reported clear
        # (claim, block and its record) that no reported cooldown explains
        self._unexplained: list[tuple[HistoryEvent[Event], CompactionBlocked, HistoryEvent[Event]]] = []

    @handles(AttemptClaimed)
    def claimed(self, event: AttemptClaimed, record: HistoryEvent[AttemptClaimed]) -> None:
        self._claimed[event.attempt] = record

    @handles(CooldownSet)
    def recorded(self, event: CooldownSet, record: HistoryEvent[CooldownSet]) -> None:
        self._durable.raise_to(event.session, record, event.until_s)
        self._local.raise_to(compressor_of(self.facts, event.attempt), record, event.until_s)
        self._explain(event.attempt, event.until_s)

    @handles(CooldownPersistFailed)
    def persist_failed(self, event: CooldownPersistFailed, record: HistoryEvent[CooldownPersistFailed]) -> None:
        self._local.raise_to(compressor_of(self.facts, event.attempt), record, UNKNOWN_DEADLINE)
        self._explain(event.attempt, UNKNOWN_DEADLINE)

    @handles(CooldownCleared)
    def cleared(self, event: CooldownCleared, record: HistoryEvent[CooldownCleared]) -> None:
        self._durable.set(event.session, record, 0.0)
        self._local.set(compressor_of(self.facts, event.attempt), record, 0.0)
        self._cleared[event.session] = record

    @handles(CooldownRestored)
    def row_restored(self, event: CooldownRestored, record: HistoryEvent[CooldownRestored]) -> None:
        claim = self._claimed.get(event.attempt)
        put_back = UNKNOWN_DEADLINE if claim is None else self._durable.max_since(event.session, claim.seq)
        self._durable.raise_to(event.session, record, put_back)

    @handles(AttemptRestored)
    def snapshot_restored(self, event: AttemptRestored, record: HistoryEvent[AttemptRestored]) -> None:
        compressor, claim = compressor_of(self.facts, event.attempt), self._claimed.get(event.attempt)
        put_back = UNKNOWN_DEADLINE if claim is None else self._local.max_since(compressor, claim.seq)
        self._local.raise_to(compressor, record, put_back)

    @handles(StoreFaultFired)
    def store_fault(self, event: StoreFaultFired, record: HistoryEvent[StoreFaultFired]) -> None:
        if event.op in COOLDOWN_STORE_OPS:
            self._durable.forget(record)

    @handles(ProcessCrashed)
    def crashed(self, event: ProcessCrashed, record: HistoryEvent[ProcessCrashed]) -> None:
        self._unexplained = [(claim, block, blocked) for claim, block, blocked in self._unexplained
                             if self.system.process_of(block.attempt.process) != event.process]

    @handles(CompactionBlocked)
    def blocked(self, event: CompactionBlocked, record: HistoryEvent[CompactionBlocked]) -> None:
        claim = self._claimed.get(event.attempt)
        if event.reason != "cooldown" or claim is None:
            return
        compressor = compressor_of(self.facts, event.attempt)
        durable = self._durable.max_since(event.session, claim.seq)
        local = self._local.max_since(compressor, claim.seq)
        self._local.raise_to(compressor, record, durable)  # the gate keeps the row's deadline locally
        if max(durable, local) <= claim.time - 1e-9:
            self._unexplained.append((claim, event, record))

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        if not self._unexplained:
            return None
        claim, block, blocked = self._unexplained[0]
        return self.violation(
            f"attempt {block.attempt} was blocked by a cooldown on {block.session} although every cooldown the "
            f"system reported had been cleared or had run out by its claim at {claim.time:g}s",
            self._cleared.get(block.session), claim, blocked,
        )

    def _explain(self, writer: AttemptId, until_s: float) -> None:
        """`writer`'s record explains its compressor's blocks that came while it was under way (claimed before)."""
        claimed, compressor = self._claimed.get(writer), compressor_of(self.facts, writer)
        self._unexplained = [
            (claim, block, blocked) for claim, block, blocked in self._unexplained
            if not (compressor_of(self.facts, block.attempt) == compressor and until_s > claim.time - 1e-9
                    and (claimed is None or claimed.seq < blocked.seq))
        ]


class CurrentAttemptOwnsCompressor(Invariant):
    """Only the compressor's current working attempt has its candidate admitted to commit, and that attempt, while not
    stopped, is never refused its own success-path cooldown clear (no other attempt removed its cancelled-check)."""

    name = "current_attempt_owns_compressor"
    races = ("R21",)
    learns = CRASHES + HOST_GAVE_UP

    # a restarted process has a new compressor and numbers its attempts from 1 again
    _generation: AttemptTable[AttemptId, int] = per_run(AttemptTable)  # attempt -> its claimed generation
    # incarnation -> the newest generation that started its summary
    _working: ProcessTable[tuple[int, HistoryEvent[CompactionSummaryStarted]]] = per_run(ProcessTable)

    @handles(AttemptClaimed)
    def claimed(self, event: AttemptClaimed, record: HistoryEvent[AttemptClaimed]) -> None:
        self._generation[event.attempt] = event.generation

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent[CompactionSummaryStarted]) -> None:
        process = event.attempt.process
        if event.generation > self._working.get(process, (0, record))[0]:
            self._working[process] = (event.generation, record)

    @handles(FenceBeginOk)
    def admitted(self, event: FenceBeginOk, record: HistoryEvent[FenceBeginOk]) -> Violation | None:
        newer = self._newer_working(event.attempt)
        if newer is not None:
            started = newer.event
            return self.violation(
                f"attempt {event.attempt} (generation {self._generation[event.attempt]}) was admitted to commit its candidate after "
                f"generation {started.generation} ({started.attempt}) had started its summary", newer, record,
            )
        return None

    @handles(CooldownClearSkipped)
    def clear_skipped(self, event: CooldownClearSkipped, record: HistoryEvent[CooldownClearSkipped]) -> Violation | None:
        attempt = event.attempt
        stopped = self.facts.attempt(attempt).given_up is not None  # its cancelled-check then rightly says "cancelled"
        if stopped or attempt not in self._generation:
            return None
        if self._newer_working(attempt) is None and self._single_agent(attempt):
            return self.violation(
                f"attempt {attempt}, the compressor's current attempt and not stopped, was refused its cooldown clear: "
                "its cancelled-check had been removed by another attempt", record,
            )
        return None

    def _newer_working(self, attempt: AttemptId) -> HistoryEvent[CompactionSummaryStarted] | None:
        """The summary start of a newer generation of `attempt`'s compressor, if any."""
        working = self._working.get(attempt.process)
        if working is None or attempt not in self._generation or not self._single_agent(attempt):
            return None
        return working[1] if working[0] > self._generation[attempt] else None

    def _single_agent(self, attempt: AttemptId) -> bool:
        """Generations count per agent, attempts per process: judge only processes that run one agent.

        An attempt id names the process incarnation (`p2r1` once `p2` restarted), while an agent's spec names
        the process; comparing the two unmapped counted no agent for a restarted process, so two agents'
        generations in it were compared as one compressor's.
        """
        process = self.system.process_of(attempt.process)
        return sum(1 for slot in self.system.agents.values() if slot.spec.process == process) <= 1


class BreakerBlocksOnlyWhenLatched(Invariant):
    """An automatic attempt is refused as ineffective (at its gate or under its lease) only when its session's persisted
    ineffective count reached breaker_threshold at some moment since its host started it.

    The breaker is that persisted count, so the refusal is judged on the store, not on what the gate says of itself:
    the count is read at both ends, the strikes reported between are seen, and a rollback's restore, or a store fault
    around a strike or a restore, may have moved it unseen. A breaker that latches with no strike stops automatic
    compaction for good, and the transcript only grows.
    """

    name = "breaker_blocks_only_when_latched"
    settings = frozenset({'breaker_threshold'})
    races = ("R13",)

    UNSEEN_WRITES = ("bump_ineffective", "restore_cooldown_row")

    def __init__(self, system: SystemView) -> None:
        super().__init__(system)
        self._started: dict[AttemptId, tuple[SessionId, int, bool]] = {}  # attempt -> session, host start seq, latched then
        self._latched_at: dict[SessionId, int] = {}  # session -> seq of the latest event that may have latched it
        self._unseen_at = -1  # seq of the latest store fault that may have moved a count unseen

    def _latched(self, session: SessionId) -> bool:
        return self.system.store.cooldown_row(session).ineffective_count >= self.system.config.breaker_threshold

    @handles(HostStarted)
    def started(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        self._started[event.attempt] = (event.session, record.seq, self._latched(event.session))

    @handles(CompactionStrike)
    def struck(self, event: CompactionStrike, record: HistoryEvent[CompactionStrike]) -> None:
        if event.strikes >= self.system.config.breaker_threshold:
            self._latched_at[event.session] = record.seq

    @handles(CooldownRestored)
    def restored(self, event: CooldownRestored, record: HistoryEvent[CooldownRestored]) -> None:
        self._latched_at[event.session] = record.seq

    @handles(StoreFaultFired)
    def store_fault(self, event: StoreFaultFired, record: HistoryEvent[StoreFaultFired]) -> None:
        if event.op in self.UNSEEN_WRITES:
            self._unseen_at = record.seq

    @handles(CompactionBlocked, CompactionRefused)
    def refused(self, event: CompactionBlocked | CompactionRefused, record: HistoryEvent[CompactionBlocked | CompactionRefused]) -> Violation | None:
        started = self._started.get(event.attempt)
        if event.reason != "ineffective" or started is None:
            return None
        session, since, latched = started
        if (session != event.session or latched or self._latched_at.get(session, -1) > since
                or self._unseen_at > since or self._latched(session)):
            return None
        return self.violation(
            f"attempt {event.attempt} was refused as ineffective although {session}'s ineffective count stayed under "
            f"{self.system.config.breaker_threshold} since its start", record,
        )


class CommitBelowThresholdClearsStrikes(Invariant):
    """A commit that ends below the threshold, by an attempt whose lease came after the session's last strike, leaves
    the ineffective count at 0."""

    name = "commit_below_threshold_clears_strikes"
    settings = frozenset({'threshold_tokens'})
    holder_names_attempt = True
    races = ("R13",)

    _acquired: dict[AttemptId | None, HistoryEvent[Event]] = per_run(dict)  # attempt -> its lease.acquired
    _last_strike: dict[SessionId, HistoryEvent[Event]] = per_run(dict)  # session -> its latest strike
    _last_restore: dict[SessionId, HistoryEvent[Event]] = per_run(dict)  # session -> its latest cooldown-row restore
    _reset_failed: set[AttemptId] = per_run(set)

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        self._acquired[event.holder.attempt] = record

    @handles(CompactionStrike)
    def struck(self, event: CompactionStrike, record: HistoryEvent[CompactionStrike]) -> None:
        self._last_strike[event.session] = record

    @handles(CooldownRestored)
    def restored(self, event: CooldownRestored, record: HistoryEvent[CooldownRestored]) -> None:
        self._last_restore[event.session] = record

    @handles(CompactionStrikeResetFailed)
    def reset_failed(self, event: CompactionStrikeResetFailed, record: HistoryEvent[CompactionStrikeResetFailed]) -> None:
        self._reset_failed.add(event.attempt)

    @handles(CompactionCommitted)
    def committed(self, event: CompactionCommitted, record: HistoryEvent[CompactionCommitted]) -> Violation | None:
        session, attempt = event.session, event.attempt
        acquired, strike = self._acquired.get(attempt), self._last_strike.get(session)
        restore = self._last_restore.get(session)
        if (acquired is None or strike is None or strike.seq > acquired.seq or attempt in self._reset_failed
                or (restore is not None and restore.seq > acquired.seq)
                or event.tokens >= self.system.config.threshold_tokens):
            return None
        count = self.system.store.cooldown_row(session).ineffective_count
        if count:
            return self.violation(
                f"attempt {attempt} committed below the threshold after strike(s) yet the ineffective count is {count}",
                strike, record,
            )
        return None


class OldMessagesGetSummarized(Invariant):
    """An attempt whose input holds more durable rows than keep_recent dispatches a summary before it commits or
    refuses, unless it was cancelled first (`hard_cancelled`, `fence_cancelled`).

    The input's durable rows (`compaction.input`) are a lower bound on the messages it works from (its own unsaved
    messages have no row yet), so more rows than the `keep_recent` kept verbatim prove there were old messages to
    summarize. A refusal as `no_progress` (nothing changed) or a commit with no summary dispatched then says
    compaction silently did nothing.
    """

    name = "old_messages_get_summarized"
    settings = frozenset({'keep_recent'})
    races = ("R13",)

    # attempt -> its input of old messages (and its record), no summary yet
    _unsummarized: dict[AttemptId, tuple[CompactionInput, HistoryEvent[Event]]] = per_run(dict)

    @handles(CompactionInput)
    def input(self, event: CompactionInput, record: HistoryEvent[CompactionInput]) -> None:
        if len(event.rows) > self.system.config.keep_recent:
            self._unsummarized[event.attempt] = (event, record)

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent[CompactionSummaryStarted]) -> None:
        self._unsummarized.pop(event.attempt, None)

    @handles(CompactionRefused, CompactionCommitted)
    def settled(self, event: CompactionRefused | CompactionCommitted, record: HistoryEvent[CompactionRefused | CompactionCommitted]) -> Violation | None:
        given = self._unsummarized.pop(event.attempt, None)
        if given is None or getattr(event, "reason", None) in ("hard_cancelled", "fence_cancelled"):
            return None
        keep = self.system.config.keep_recent
        given_input, given_record = given
        what = f"refused as {event.reason}" if isinstance(event, CompactionRefused) else "committed"
        return self.violation(
            f"attempt {event.attempt} {what} without a summary though its input held "
            f"{len(given_input.rows)} rows (keep_recent {keep})", given_record, record,
        )
