"""Invariants of the host side: timeouts, hung commits, the bounded pool, and the turn after Ctrl+C."""

from __future__ import annotations

from typing import Sequence

from contract.events import (
    AttemptClaimed,
    CompactionCommitted,
    CompactionError,
    CompactionFinished,
    CompactionSummaryProgress,
    CompactionSummaryStarted,
    CooldownCleared,
    CooldownPersistFailed,
    FaultFired,
    FenceBeginOk,
    FenceCancelWon,
    FenceFinish,
    FenceRevoked,
    FrontendCtrlCGraceExpired,
    FrontendTurnFailed,
    FrontendTurnSubmitted,
    HardCancelRequested,
    HostCommitOverrun,
    HostTimeout,
    HostUnwind,
    LeaseAcquired,
    LeaseReleased,
    ProcessCrashed,
    TaskSpawn,
)
from contract.history import HistoryEvent
from contract.ids import AttemptId, HolderId, SessionId
from sim.invariants.base import Invariant, Violation, forget_process, handles


class IdleTimeoutWithinBounds(Invariant):
    name = "idle_timeout_within_bounds"
    races = ("R9",)
    description = "An idle timeout fires between idle and 1.5 x idle after the last progress."

    @handles(HostTimeout)
    def timed_out(self, event: HostTimeout, record: HistoryEvent) -> Violation | None:
        idle = self.system.config.idle_timeout_s
        silence = event.since_progress_s
        if event.budget == "idle" and not idle - 1e-9 <= silence < 1.5 * idle:
            return self.violation(f"the idle timeout fired after {silence:g}s of silence (idle is {idle:g}s)", record)
        return None


class HungCommitReported(Invariant):
    """At the end of the run only a commit still running can be hanging unreported.

    A commit that finished within one overrun slice of its host's timeout owes no report; judging it again at
    the end, against the end of the run, charged it with every second after it had finished. A commit whose
    process crashed has no host left to report it.
    """

    name = "hung_commit_reported"
    races = ("R7",)
    description = "A commit still running an overrun slice after its host timed out is reported exactly once, while it hangs."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._admitted: set[AttemptId] = set()  # admitted commits not yet finished
        self._timed_out: dict[AttemptId, HistoryEvent] = {}
        self._reported: dict[AttemptId, HistoryEvent] = {}

    @handles(FenceBeginOk)
    def admitted(self, event: FenceBeginOk, record: HistoryEvent) -> None:
        self._admitted.add(event.attempt)

    @handles(HostTimeout)
    def timed_out(self, event: HostTimeout, record: HistoryEvent) -> None:
        self._timed_out.setdefault(event.attempt, record)

    @handles(HostCommitOverrun)
    def overrun(self, event: HostCommitOverrun, record: HistoryEvent) -> Violation | None:
        if event.attempt in self._reported:
            return self.violation(f"the hung commit of {event.attempt} was reported twice", self._reported[event.attempt], record)
        self._reported[event.attempt] = record
        return None

    @handles(FenceFinish)
    def finished(self, event: FenceFinish, record: HistoryEvent) -> Violation | None:
        violation = self._check(event.attempt, record.time, record)
        self._admitted.discard(event.attempt)
        return violation

    @handles(ProcessCrashed)
    def crashed(self, event: ProcessCrashed, record: HistoryEvent) -> None:
        self._admitted = {attempt for attempt in self._admitted if self.system.process_of(attempt.process) != event.process}

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        end = history[-1].time if history else 0.0
        for attempt in sorted(self._admitted):
            violation = self._check(attempt, end, None)
            if violation is not None:
                return violation
        return None

    def _check(self, attempt: AttemptId, until: float, finish: HistoryEvent | None) -> Violation | None:
        timed_out = self._timed_out.get(attempt)
        if attempt not in self._admitted or timed_out is None or attempt in self._reported:
            return None
        slice_s = self.system.config.commit_overrun_slice_s
        if until - timed_out.time > slice_s + 1e-9:
            return self.violation(f"the commit of {attempt} ran {until - timed_out.time:g}s past its host's timeout unreported", timed_out, finish)
        return None


JOB_TASK = "compress:"  # the pooled job's task is named after its attempt


def job_attempt(task: str) -> AttemptId | None:
    """The attempt a pooled job's task runs, or None for any other task."""
    return AttemptId(task[len(JOB_TASK):]) if task.startswith(JOB_TASK) else None


class StaleJobNeverRuns(Invariant):
    name = "stale_job_never_runs"
    races = ("R8",)
    description = "A compression job whose host already gave up never dispatches a summary; one started after that does no work at all."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._given_up: dict[AttemptId, HistoryEvent] = {}
        self._started_stale: set[AttemptId] = set()

    @handles(HostTimeout, FenceCancelWon, HostUnwind)
    def given_up(self, event: HostTimeout | FenceCancelWon | HostUnwind, record: HistoryEvent) -> None:
        self._given_up.setdefault(event.attempt, record)

    @handles(TaskSpawn)
    def spawned(self, event: TaskSpawn, record: HistoryEvent) -> None:
        attempt = job_attempt(record.task)
        if attempt is not None and attempt in self._given_up:
            self._started_stale.add(attempt)

    @handles(AttemptClaimed)
    def claimed(self, event: AttemptClaimed, record: HistoryEvent) -> Violation | None:
        if event.attempt in self._started_stale:
            return self.violation(f"attempt {event.attempt}'s job started after its host gave up and still went to work",
                                  self._given_up[event.attempt], record)
        return None

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent) -> Violation | None:
        if event.attempt in self._given_up:
            return self.violation(f"attempt {event.attempt} dispatched its summary after its host gave up", self._given_up[event.attempt], record)
        return None

    @handles(ProcessCrashed)
    def crashed(self, event: ProcessCrashed, record: HistoryEvent) -> None:
        self._given_up = forget_process(self._given_up, event.process)
        self._started_stale = {attempt for attempt in self._started_stale if attempt.process != event.process}


class PoolAdmissionBounded(Invariant):
    name = "pool_admission_bounded"
    races = ("R8",)
    description = "A process never has more compression jobs admitted than its pool's cap; past the cap a compression fails fast instead of queueing."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._jobs: dict[str, dict[AttemptId, HistoryEvent]] = {}  # process -> its running jobs

    @handles(TaskSpawn)
    def spawned(self, event: TaskSpawn, record: HistoryEvent) -> Violation | None:
        attempt = job_attempt(record.task)
        if attempt is None:
            return None
        jobs = self._jobs.setdefault(attempt.process, {})
        jobs[attempt] = record
        cap = self.system.config.pool_cap
        if len(jobs) > cap:
            return self.violation(f"{len(jobs)} compression jobs were admitted at once in a pool capped at {cap}: {', '.join(jobs)}", *jobs.values())
        return None

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent) -> None:
        self._jobs.get(event.attempt.process, {}).pop(event.attempt, None)

    @handles(ProcessCrashed)
    def crashed(self, event: ProcessCrashed, record: HistoryEvent) -> None:
        self._jobs.pop(event.process, None)


class NextTurnPersistsAfterCtrlC(Invariant):
    """Judges the one turn that follows the grace period: its own failure, never a later turn's.

    A later turn of the same agent may fail for reasons Ctrl+C has no part in (an injected busy store on its
    own write, say); charging that to the turn after Ctrl+C blamed R1 for what the user saw turns later.
    """

    name = "next_turn_persists_after_ctrl_c"
    races = ("R1",)
    description = "After Ctrl+C and the grace period, the next turn the frontend accepts is persisted."

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        for index, expired in enumerate(history):
            if not isinstance(expired.event, FrontendCtrlCGraceExpired):
                continue
            agent = expired.event.agent
            submitted = next((r for r in history[index + 1:] if isinstance(r.event, FrontendTurnSubmitted) and r.event.agent == agent), None)
            if submitted is None:
                continue
            failed = _failure_of_turn(history, submitted)
            if failed is not None:
                return self.violation(f"the turn after Ctrl+C was not persisted: {failed.event.error}", expired, submitted, failed)  # type: ignore[attr-defined]
        return None


def _failure_of_turn(history: Sequence[HistoryEvent], submitted: HistoryEvent) -> HistoryEvent | None:
    """The failure of the turn `submitted` opened, if it failed.

    A frontend runs its turns one at a time, so that turn's failure, if any, comes before the agent's next
    submission; a failure after that belongs to a later turn, which Ctrl+C did not precede.
    """
    agent = submitted.event.agent  # type: ignore[attr-defined]
    for record in history[submitted.seq + 1:]:
        if isinstance(record.event, FrontendTurnSubmitted) and record.event.agent == agent:
            return None
        if isinstance(record.event, FrontendTurnFailed) and record.event.agent == agent:
            return record
    return None


class HardCancelFreesLease(Invariant):
    name = "hard_cancel_frees_lease"
    races = ("R1",)
    description = "By the end of the Ctrl+C grace period, an attempt on that session that was not yet committing has released its lease."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._holding: dict[SessionId, dict[HolderId, HistoryEvent]] = {}
        self._admitted: set[AttemptId] = set()
        self._cancelled: dict[SessionId, HistoryEvent] = {}

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent) -> None:
        self._holding.setdefault(event.session, {})[event.holder] = record

    @handles(LeaseReleased)
    def released(self, event: LeaseReleased, record: HistoryEvent) -> None:
        self._holding.get(event.session, {}).pop(event.holder, None)

    @handles(FenceBeginOk)
    def admitted(self, event: FenceBeginOk, record: HistoryEvent) -> None:
        self._admitted.add(event.attempt)

    @handles(HardCancelRequested)
    def hard_cancel(self, event: HardCancelRequested, record: HistoryEvent) -> None:
        self._cancelled[event.session] = record

    @handles(FrontendCtrlCGraceExpired)
    def grace_expired(self, event: FrontendCtrlCGraceExpired, record: HistoryEvent) -> Violation | None:
        for session, requested in self._cancelled.items():
            for holder, acquired in self._holding.get(session, {}).items():
                if acquired.time <= requested.time and holder.attempt not in self._admitted:
                    return self.violation(f"{holder} still holds {session}'s lease after Ctrl+C and the grace period", requested, acquired, record)
        self._cancelled.clear()
        return None


class TimeoutBacksOff(Invariant):
    name = "timeout_backs_off"
    races = ("R2",)
    description = (
        "After a host timeout on a session's compaction (one the user had not already stopped: a stop is no "
        "timeout), no automatic compaction of that session starts a summary within the first step of the timeout "
        "ladder, unless a forced attempt or a commit lifted the backoff meanwhile."
    )

    def __init__(self, system) -> None:
        super().__init__(system)
        self._session_of: dict[AttemptId | None, SessionId] = {}  # attempt -> the session whose lease it took
        # session -> (its timeout, that event's record, whether the durable record failed)
        self._backoff: dict[SessionId, tuple[HostTimeout, HistoryEvent, bool]] = {}
        self._cleared_by: set[AttemptId] = set()  # attempts that cleared the cooldown (forced) before their summary
        self._stopped: set[AttemptId] = set()  # attempts the user hard-cancelled

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent) -> None:
        self._session_of[event.holder.attempt] = event.session

    @handles(FenceCancelWon)
    def cancel_won(self, event: FenceCancelWon, record: HistoryEvent) -> None:
        if event.hard:
            self._stopped.add(event.attempt)

    @handles(HostTimeout)
    def timed_out(self, event: HostTimeout, record: HistoryEvent) -> None:
        if event.attempt in self._session_of and event.attempt not in self._stopped:
            self._backoff[self._session_of[event.attempt]] = (event, record, False)

    @handles(CooldownPersistFailed)
    def persist_failed(self, event: CooldownPersistFailed, record: HistoryEvent) -> None:
        if event.session in self._backoff:
            timeout, timed_out, _ = self._backoff[event.session]
            if timeout.attempt == event.attempt:  # only this process still knows of the backoff
                self._backoff[event.session] = (timeout, timed_out, True)

    @handles(CooldownCleared)
    def cleared(self, event: CooldownCleared, record: HistoryEvent) -> None:
        self._cleared_by.add(event.attempt)
        self._backoff.pop(event.session, None)

    @handles(CompactionCommitted)
    def committed(self, event: CompactionCommitted, record: HistoryEvent) -> None:
        self._backoff.pop(event.session, None)

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent) -> Violation | None:
        if event.attempt in self._cleared_by:
            return None
        session = self._session_of.get(event.attempt)
        if session not in self._backoff:
            return None
        timeout, timed_out, local_only = self._backoff[session]
        if local_only and event.attempt.process != timeout.attempt.process:
            return None
        step = self.system.config.timeout_cooldown_s(1)
        if record.time < timed_out.time + step - 1e-9:
            return self.violation(
                f"attempt {event.attempt} started a summary of {session} {record.time - timed_out.time:g}s after the host "
                f"timed out on {timeout.attempt}, inside the {step:g}s backoff", timed_out, record,
            )
        return None


# Ways a host stops waiting for an attempt: from then on the attempt is a zombie to the host.
HOST_GAVE_UP = (HostTimeout, FenceCancelWon, FenceRevoked, HostUnwind)


class NoProgressAfterGiveUp(Invariant):
    name = "no_progress_after_give_up"
    races = ("R26",)
    description = "Once its host has timed it out or cancelled it, an attempt reports no further summary progress (nothing re-arms \"compression in progress\")."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._given_up: dict[AttemptId, HistoryEvent] = {}

    @handles(*HOST_GAVE_UP)
    def given_up(self, event: HostTimeout | FenceCancelWon | FenceRevoked | HostUnwind, record: HistoryEvent) -> None:
        self._given_up.setdefault(event.attempt, record)

    @handles(CompactionSummaryProgress)
    def progress(self, event: CompactionSummaryProgress, record: HistoryEvent) -> Violation | None:
        gave_up = self._given_up.get(event.attempt)
        if gave_up is not None:
            return self.violation(f"attempt {event.attempt} reported summary progress after {gave_up.kind}", gave_up, record)
        return None

    @handles(ProcessCrashed)
    def crashed(self, event: ProcessCrashed, record: HistoryEvent) -> None:
        self._given_up = forget_process(self._given_up, event.process)


# Errors that are never an injected fault's doing, however a run was disturbed: a bug in the system.
PROGRAMMING_ERRORS = (
    "RuntimeError", "TypeError", "AttributeError", "KeyError", "IndexError", "ValueError", "AssertionError",
    "NameError", "UnboundLocalError", "ZeroDivisionError", "RecursionError", "NotImplementedError",
)


class _FaultAware(Invariant):
    """An invariant whose judgement depends on whether an injected fault has fired yet in this run."""

    def __init__(self, system) -> None:
        super().__init__(system)
        self._fault: HistoryEvent | None = None

    @handles(FaultFired)
    def fault_fired(self, event: FaultFired, record: HistoryEvent) -> None:
        self._fault = self._fault or record


class TurnFailsOnlyExpectedly(_FaultAware):
    name = "turn_fails_only_expectedly"
    races = ("R5", "R6")
    description = (
        "A turn fails only with an expected error: PersistenceFailed naming compression, or, once an injected fault "
        "has fired in the run, an error that is not a programming error (no RuntimeError, TypeError, ...)."
    )

    @handles(FrontendTurnFailed)
    def turn_failed(self, event: FrontendTurnFailed, record: HistoryEvent) -> Violation | None:
        error = event.error
        kind = error.split(":", 1)[0].strip()
        if kind == "PersistenceFailed" and "compression" in error:
            return None
        if self._fault is None:
            return self.violation(f"a turn of {event.agent} failed with no fault injected: {error}", record)
        if kind in PROGRAMMING_ERRORS:
            return self.violation(f"a turn of {event.agent} failed with a programming error: {error}", self._fault, record)
        return None


class WorkerRaisesOnlyAfterFault(_FaultAware):
    name = "worker_raises_only_after_fault"
    races = ("R21",)
    description = (
        "A compression worker raises unexpectedly (compaction.error) only in a run where an injected fault fired, "
        "and never with a programming error (a TypeError, RuntimeError, ... anywhere in what it raised)."
    )

    @handles(CompactionError)
    def worker_raised(self, event: CompactionError, record: HistoryEvent) -> Violation | None:
        if self._fault is None:
            return self.violation(f"the worker of {event.attempt} raised with no fault injected: {event.error}", record)
        bug = next((name for name in PROGRAMMING_ERRORS if f"{name}(" in event.error), None)  # the error is a repr
        if bug is not None:
            return self.violation(f"the worker of {event.attempt} raised a programming error ({bug}): {event.error}", self._fault, record)
        return None
