"""Invariants of the host side: timeouts, hung commits, the bounded pool, and the turn after Ctrl+C."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, get_args

from contract.events import (
    ActivityLabeled,
    AppendFailed,
    AttemptClaimed,
    CompactionCarriedUnread,
    CompactionCommitFailed,
    CompactionCommitted,
    CompactionError,
    CompactionFinished,
    CompactionStrikeResetFailed,
    CompactionSummaryProgress,
    CompactionSummaryStarted,
    CompactionWatermarkFailed,
    CooldownCleared,
    CooldownPersistFailed,
    CooldownSet,
    Event,
    FaultFired,
    FenceBeginOk,
    FenceCancelWon,
    FenceFinish,
    FenceRevoked,
    FrontendCtrlC,
    FrontendCtrlCGraceExpired,
    FrontendTurnAbandoned,
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
    LeaseAcquired,
    LeaseAcquireFailed,
    LeaseReleased,
    LeaseReleaseFailed,
    PoolSaturated,
    ProcessCrashed,
    StallFired,
    StoreFaultFired,
    TaskExit,
    TaskSpawn,
    TurnPersisted,
)
from contract.history import HistoryEvent, is_of
from contract.ids import AttemptId, HolderId, SessionId
from contract.points import HOST_WAIT, STORE_PREFIX
from sim.invariants.facts import (
    ADMISSIONS,
    CRASHES,
    HOST_GAVE_UP,
    HOST_WAITS,
    PRESSES,
    TURNS,
    AttemptSet,
    AttemptTable,
    job_attempt,
    pressing_task,
    summary_attempt,
)
from sim.invariants.invariant import Invariant, Violation, handles, per_run
from sim.invariants.lineage_reads import JudgesRefusedTurns
from sim.invariants.liveness import fault_raised_in_turn


class _IdleSilence(Invariant):
    """What both idle-timeout checks read: each waited-on attempt's last sign of life (its start or its last
    summary progress) and when its host could first notice the silence.

    The host wakes from its wait slices to notice the silence; a host stalled at the top of a slice (`host.wait`)
    can notice nothing until it resumes. Bounding the timeout by 1.5 x idle after the last sign of life alone
    charged the host with every second it was stalled, which no code of its could spend sooner.
    """

    learns = CRASHES

    _last_sign: AttemptTable[AttemptId, float] = per_run(AttemptTable)  # attempt -> when its host started it, or its last progress tick
    _host_resumes: dict[str, float] = per_run(dict)  # host task -> when its last stall in its current wait ends

    @handles(HostStarted)
    def started(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        self._last_sign[event.attempt] = record.time
        self._host_resumes.pop(record.task, None)  # a host runs one wait at a time: older stalls are over

    @handles(CompactionSummaryProgress)
    def progressed(self, event: CompactionSummaryProgress, record: HistoryEvent[CompactionSummaryProgress]) -> Violation | None:
        if event.attempt in self._last_sign:
            self._last_sign[event.attempt] = record.time
        return None

    @handles(StallFired)
    def host_stalled(self, event: StallFired, record: HistoryEvent[StallFired]) -> None:
        if event.point == HOST_WAIT:
            self._host_resumes[record.task] = record.time + event.duration_s

    def _could_notice(self, attempt: AttemptId) -> float:
        """When the host of `attempt` (the task it started in) could first see its silence reach idle."""
        host = self.facts.attempt(attempt).host
        resumes = 0.0 if host is None else self._host_resumes.get(host.task, 0.0)
        return max(self._last_sign[attempt] + self.system.config.idle_timeout_s, resumes)


class IdleTimeoutWithinBounds(_IdleSilence):
    """An idle timeout fires between idle and 1.5 x idle after the attempt's last sign of life (its start or its
    last summary progress), timed from the history: a summary never silent for idle is never timed out as idle; a
    host stalled past idle fires within half an idle of resuming.

    A host that, once resumed, waits another full idle slice (R9) still exceeds the upper bound.
    """

    name = "idle_timeout_within_bounds"
    settings = frozenset({'idle_timeout_s'})
    races = ("R9",)

    @handles(HostTimeout)
    def timed_out(self, event: HostTimeout, record: HistoryEvent[HostTimeout]) -> Violation | None:
        if event.budget != "idle" or event.attempt not in self._last_sign:
            return None
        idle = self.system.config.idle_timeout_s
        silence = record.time - self._last_sign[event.attempt]
        could_notice = self._could_notice(event.attempt)
        if silence < idle - 1e-9:
            return self.violation(f"the idle timeout fired after {silence:g}s of silence (idle is {idle:g}s)", record)
        if record.time - could_notice >= 0.5 * idle:
            return self.violation(
                f"the idle timeout fired after {silence:g}s of silence (idle is {idle:g}s), "
                f"{record.time - could_notice:g}s after the host could first notice it", record,
            )
        return None


class IdleTimeoutFiresWhenDue(_IdleSilence):
    """An attempt silent (no summary progress since its start or its last tick) for 1.5 x idle while its host
    waits is timed out as idle by then (a host stalled past idle, within half an idle of resuming): a heartbeat is
    no progress.

    R9's other half: idle_timeout_within_bounds judges the idle timeouts that fire, so a host that never fires one
    (its silence measured from the heartbeat that only relabels the status line) broke nothing it judged, and a
    summary silent for ten minutes ran on to the ceiling. A silence is judged where it ends: at the attempt's next
    progress tick, or when its host stops waiting for it (it returns, unwinds, or times out on another budget).
    """

    name = "idle_timeout_fires_when_due"
    races = ("R9",)

    @handles(CompactionSummaryProgress)
    def progressed(self, event: CompactionSummaryProgress, record: HistoryEvent[CompactionSummaryProgress]) -> Violation | None:
        violation = self._judge_silence(event.attempt, record)
        super().progressed(event, record)
        return violation

    @handles(HostTimeout, HostReturned, HostUnwind)
    def host_left(self, event: HostTimeout | HostReturned | HostUnwind, record: HistoryEvent[HostTimeout | HostReturned | HostUnwind]) -> Violation | None:
        timed_out_idle = isinstance(event, HostTimeout) and event.budget == "idle"
        violation = None if timed_out_idle else self._judge_silence(event.attempt, record)
        self._last_sign.pop(event.attempt, None)  # no longer waited on: its host gave up, or has its outcome
        return violation

    def _judge_silence(self, attempt: AttemptId, record: HistoryEvent[Event]) -> Violation | None:
        if attempt not in self._last_sign:
            return None
        idle = self.system.config.idle_timeout_s
        if record.time - self._could_notice(attempt) < 0.5 * idle:
            return None
        return self.violation(f"attempt {attempt} was silent for {record.time - self._last_sign[attempt]:g}s (idle is "
                              f"{idle:g}s) and its host never timed it out as idle", record)


class TimedOutHostReturnsPromptly(Invariant):
    """A host that timed out and won the fence returns its timeout no later than the win plus the stalls of its
    own task since, plus the cancelled worker's grace at the ceiling: it never waits for its late worker.

    From that win the attempt is the worker's to finish alone: the host only writes its record and frees the
    lease (store calls, which take no virtual time unless a stall holds its own task, or a stalled store call of
    another task holds a lock its write needs: a rollback's cooldown restore, for one). A host still there later
    keeps the turn it serves blocked for as long as the stalled summary runs, the very hang the budget bounds.
    """

    name = "timed_out_host_returns_promptly"
    settings = frozenset({'cancelled_worker_grace_s'})
    races = ("R2", "R9")

    _timed_out: dict[AttemptId, tuple[str, str]] = per_run(dict)  # attempt -> its host's task and the budget it ran out of
    _won: dict[str, tuple[AttemptId, HistoryEvent[Event], float]] = per_run(dict)  # host task -> its win, and its stalls since
    _store_stalls: list[tuple[float, float]] = per_run(list)  # (start, end) of each stall of a store call

    @handles(HostTimeout)
    def timed_out(self, event: HostTimeout, record: HistoryEvent[HostTimeout]) -> None:
        self._timed_out[event.attempt] = (record.task, event.budget)

    @handles(FenceCancelWon)
    def won(self, event: FenceCancelWon, record: HistoryEvent[FenceCancelWon]) -> None:
        host = self._timed_out.get(event.attempt)
        if host is not None and host[0] == record.task:
            self._won[record.task] = (event.attempt, record, 0.0)

    @handles(StallFired)
    def stalled(self, event: StallFired, record: HistoryEvent[StallFired]) -> None:
        if event.point.startswith(STORE_PREFIX):
            self._store_stalls.append((record.time, record.time + event.duration_s))
        won = self._won.get(record.task)
        if won is not None:
            self._won[record.task] = (won[0], won[1], won[2] + event.duration_s)

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> Violation | None:
        won = self._won.pop(record.task, None)
        host = self._timed_out.pop(event.attempt, None)
        if won is None or host is None or won[0] != event.attempt or event.status != "timeout":
            return None
        attempt, win, stalled_s = won
        grace_s = self.system.config.cancelled_worker_grace_s if host[1] == "ceiling" else 0.0
        held_until = max((end for start, end in self._store_stalls if start <= record.time and end >= win.time), default=0.0)
        late_s = record.time - max(win.time + stalled_s + grace_s, held_until)
        if late_s > 1e-9:
            return self.violation(
                f"the host of {attempt} returned its {host[1]} timeout {late_s:g}s after it could have (won at "
                f"{win.time:g}s, {stalled_s:g}s stalled, {grace_s:g}s grace): it waited for its late worker", win, record,
            )
        return None


class HungCommitReported(Invariant):
    """A commit still running an overrun slice after its host timed out is reported exactly once, while it hangs.

    A commit is judged as it finishes; at the end of the run only one still running can be hanging unreported
    (judged against the end, a finished one was charged with every second after it had finished). A commit whose
    process crashed has no host left to report it, nor one whose host unwound before the report was due (the
    user abandoned the turn waiting on it, a Ctrl+C's grace after its press): nobody waits on it any more.
    """

    name = "hung_commit_reported"
    settings = frozenset({'commit_overrun_slice_s'})
    races = ("R7",)
    learns = CRASHES

    _admitted: AttemptSet = per_run(AttemptSet)  # admitted commits not yet finished
    _timed_out: dict[AttemptId, HistoryEvent[Event]] = per_run(dict)
    _reported: dict[AttemptId, HistoryEvent[Event]] = per_run(dict)

    @handles(FenceBeginOk)
    def admitted(self, event: FenceBeginOk, record: HistoryEvent[FenceBeginOk]) -> None:
        self._admitted.add(event.attempt)

    @handles(HostTimeout)
    def timed_out(self, event: HostTimeout, record: HistoryEvent[HostTimeout]) -> None:
        self._timed_out.setdefault(event.attempt, record)

    @handles(HostCommitOverrun)
    def overrun(self, event: HostCommitOverrun, record: HistoryEvent[HostCommitOverrun]) -> Violation | None:
        if event.attempt in self._reported:
            return self.violation(f"the hung commit of {event.attempt} was reported twice", self._reported[event.attempt], record)
        self._reported[event.attempt] = record
        return None

    @handles(FenceFinish, HostUnwind)
    def finished(self, event: FenceFinish | HostUnwind,
            record: HistoryEvent[FenceFinish | HostUnwind]) -> Violation | None:
        """The commit finished, or its host stopped waiting: a report already overdue is judged now, none owed after."""
        violation = self._check(event.attempt, record.time, record)
        self._admitted.discard(event.attempt)
        return violation

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        end = history[-1].time if history else 0.0
        for attempt in sorted(self._admitted):
            violation = self._check(attempt, end, None)
            if violation is not None:
                return violation
        return None

    def _check(self, attempt: AttemptId, until: float, finish: HistoryEvent[Event] | None) -> Violation | None:
        timed_out = self._timed_out.get(attempt)
        if attempt not in self._admitted or timed_out is None or attempt in self._reported:
            return None
        slice_s = self.system.config.commit_overrun_slice_s
        if until - timed_out.time > slice_s + 1e-9:
            return self.violation(f"the commit of {attempt} ran {until - timed_out.time:g}s past its host's timeout unreported", timed_out, finish)
        return None


class StaleJobNeverRuns(Invariant):
    """A compression job whose host already gave up never dispatches a summary; one started after that does no
    work at all."""

    name = "stale_job_never_runs"
    races = ("R8",)
    learns = CRASHES

    _given_up: AttemptTable[AttemptId, HistoryEvent[Event]] = per_run(AttemptTable)
    _started_stale: AttemptSet = per_run(AttemptSet)

    @handles(HostTimeout, FenceCancelWon, HostUnwind)
    def given_up(self, event: HostTimeout | FenceCancelWon | HostUnwind, record: HistoryEvent[HostTimeout | FenceCancelWon | HostUnwind]) -> None:
        self._given_up.setdefault(event.attempt, record)

    @handles(TaskSpawn)
    def spawned(self, event: TaskSpawn, record: HistoryEvent[TaskSpawn]) -> None:
        attempt = job_attempt(record.task)
        if attempt is not None and attempt in self._given_up:
            self._started_stale.add(attempt)

    @handles(AttemptClaimed)
    def claimed(self, event: AttemptClaimed, record: HistoryEvent[AttemptClaimed]) -> Violation | None:
        if event.attempt in self._started_stale:
            return self.violation(f"attempt {event.attempt}'s job started after its host gave up and still went to work",
                                  self._given_up[event.attempt], record)
        return None

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent[CompactionSummaryStarted]) -> Violation | None:
        if event.attempt in self._given_up:
            return self.violation(f"attempt {event.attempt} dispatched its summary after its host gave up", self._given_up[event.attempt], record)
        return None


class PoolAdmissionBounded(Invariant):
    """A process never has more compression jobs admitted than its pool's cap; past the cap a compression fails
    fast instead of queueing."""

    name = "pool_admission_bounded"
    settings = frozenset({'pool_cap'})
    races = ("R8",)
    learns = CRASHES

    _jobs: AttemptTable[AttemptId, HistoryEvent[Event]] = per_run(AttemptTable)  # the running jobs

    @handles(TaskSpawn)
    def spawned(self, event: TaskSpawn, record: HistoryEvent[TaskSpawn]) -> Violation | None:
        attempt = job_attempt(record.task)
        if attempt is None:
            return None
        self._jobs[attempt] = record
        jobs = {job: spawn for job, spawn in self._jobs.items() if job.process == attempt.process}
        cap = self.system.config.pool_cap
        if len(jobs) > cap:
            return self.violation(f"{len(jobs)} compression jobs were admitted at once in a pool capped at {cap}: {', '.join(jobs)}", *jobs.values())
        return None

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> None:
        self._jobs.pop(event.attempt, None)


class PoolRefusesOnlyWhenFull(Invariant):
    """A process's compression pool refuses an attempt only while as many of its attempts as the pool's cap are
    in flight (admitted and not yet finished, counted from the history): a pool that refuses below its cap
    silently stops compaction.

    The other half of the bounded pool. An attempt is admitted in the step its host starts it unless that same
    step refuses it (`pool.saturated`, from the same task), and leaves the pool with its worker's last act
    (`compaction.finished`). An admitted attempt whose worker never finished stays counted, so a leak makes this
    check lenient, never falsely alarmed.
    """

    name = "pool_refuses_only_when_full"
    settings = frozenset({'pool_cap'})
    races = ("R8",)
    learns = CRASHES

    _in_flight: AttemptSet = per_run(AttemptSet)  # the admitted, unfinished attempts
    _starting: dict[str, AttemptId] = per_run(dict)  # host task -> the attempt it started last

    @handles(HostStarted)
    def started(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        self._in_flight.add(event.attempt)
        self._starting[record.task] = event.attempt

    @handles(PoolSaturated)
    def refused(self, event: PoolSaturated, record: HistoryEvent[PoolSaturated]) -> Violation | None:
        attempt = self._starting.get(record.task)
        if attempt is None:
            return None
        self._in_flight.discard(attempt)
        in_flight = [other for other in self._in_flight if other.process == attempt.process]
        cap = self.system.config.pool_cap
        if len(in_flight) < cap:
            return self.violation(f"the pool refused {attempt} with {len(in_flight)} of its process's attempts in flight (cap {cap})", record)
        return None

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> None:
        self._in_flight.discard(event.attempt)


class AdmittedJobRuns(Invariant):
    """An attempt the pool admitted has its worker started (its `compress:<attempt>` task spawned) before its
    host returns an outcome.

    An admission is a promise that its worker runs: a host that returns without ever having started its job
    reports an outcome (a timeout, typically) for work that never began, and its admission slot leaks. A host
    that unwinds returns nothing and is not judged.
    """

    name = "admitted_job_runs"
    races = ("R8",)

    _refused: set[AttemptId] = per_run(set)
    _starting: dict[str, AttemptId] = per_run(dict)  # host task -> the attempt it started last
    _spawned: set[AttemptId] = per_run(set)

    @handles(HostStarted)
    def started(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        self._starting[record.task] = event.attempt

    @handles(PoolSaturated)
    def refused(self, event: PoolSaturated, record: HistoryEvent[PoolSaturated]) -> None:
        attempt = self._starting.get(record.task)
        if attempt is not None:
            self._refused.add(attempt)

    @handles(TaskSpawn)
    def spawned(self, event: TaskSpawn, record: HistoryEvent[TaskSpawn]) -> None:
        attempt = job_attempt(record.task)
        if attempt is not None:
            self._spawned.add(attempt)

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> Violation | None:
        attempt = event.attempt
        if attempt in self._refused or attempt in self._spawned:
            return None
        return self.violation(f"the host of {attempt} returned `{event.status}` though its admitted job never started", record)


class NextTurnPersistsAfterCtrlC(JudgesRefusedTurns):
    """After Ctrl+C and the grace period, the next turn the frontend accepts is persisted.

    Only that turn's own failure is judged: a later turn of the same agent may fail for reasons Ctrl+C has no
    part in (an injected busy store on its own write, say). For the same reason that turn's failure is not
    charged when an injected fault raised in its task (a host interrupt in its wait, a failed store call): the
    fault's documented effect is that the turn fails. Nor is a turn owed whose terminal is still bound to a
    session closed by compression whose conversation the user has ended on purpose since
    (`refused_in_ended_conversation`): it fails closed by design, Ctrl+C or not.
    """

    name = "next_turn_persists_after_ctrl_c"
    races = ("R1",)

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        for index, expired in enumerate(history):
            if not isinstance(expired.event, FrontendCtrlCGraceExpired):
                continue
            agent = expired.event.agent
            submitted = next((r for r in history[index + 1:] if is_of(r, FrontendTurnSubmitted) and r.event.agent == agent), None)
            if submitted is None:
                continue
            failed = _failure_of_turn(history, submitted)
            if failed is None or fault_raised_in_turn(history, submitted, failed) \
                    or self.refused_in_ended_conversation(history, submitted, failed):
                continue
            return self.violation(f"the turn after Ctrl+C was not persisted: {failed.event.error}", expired, submitted, failed)
        return None


def _failure_of_turn(history: Sequence[HistoryEvent[Event]], submitted: HistoryEvent[FrontendTurnSubmitted]) -> HistoryEvent[FrontendTurnFailed] | None:
    """The failure of the turn `submitted` opened, if it failed.

    A frontend runs its turns one at a time, so that turn's failure, if any, comes before the agent's next
    submission; a failure after that belongs to a later turn, which Ctrl+C did not precede.
    """
    agent = submitted.event.agent
    for record in history[submitted.seq + 1:]:
        if isinstance(record.event, FrontendTurnSubmitted) and record.event.agent == agent:
            return None
        if is_of(record, FrontendTurnFailed) and record.event.agent == agent:
            return record
    return None


class HardCancelFreesLease(Invariant):
    """By the time a Ctrl+C's hard cancel returns, the compaction that Ctrl+C stopped (its agent's active attempt
    on that session, the newest it started whose host still waits for it, not yet committing; not another
    agent's, even in the same process) has released its own lease, or tried to where the store refused the write
    (its row then lapses by TTL); another process may hold the lease by then."""

    name = "hard_cancel_frees_lease"
    holder_names_attempt = True
    races = ("R1",)
    learns = ADMISSIONS + PRESSES + HOST_WAITS + CRASHES

    _holding: AttemptTable[AttemptId, tuple[HolderId, HistoryEvent[Event]]] = per_run(AttemptTable)  # each attempt's own lease, while held
    _stopped: dict[str, dict[AttemptId, HistoryEvent[Event]]] = per_run(dict)  # pressing task -> attempts it stopped -> request

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        if event.holder.attempt is not None:
            self._holding[event.holder.attempt] = (event.holder, record)

    @handles(LeaseReleased, LeaseReleaseFailed)
    def released(self, event: LeaseReleased | LeaseReleaseFailed,
            record: HistoryEvent[LeaseReleased | LeaseReleaseFailed]) -> None:

        """The attempt released its lease as far as the store let it: a failed release that raised after its
        COMMIT freed the row all the same, and one the store refused (busy, failing) leaves a row whose refresher
        the release stopped first, so it lapses within one TTL; no code can free it sooner than the store allows."""
        attempt = event.holder.attempt
        held = self._holding.get(attempt) if attempt is not None else None
        if attempt is not None and held is not None and held[0] == event.holder:
            del self._holding[attempt]

    @handles(HardCancelRequested)
    def hard_cancel(self, event: HardCancelRequested, record: HistoryEvent[HardCancelRequested]) -> None:
        # Attempts whose host still waits: an unwinding host has itself revoked the attempt and asked its lease
        # freed, and takes its fence off the agent's stack as it goes, so a Ctrl+C pressed after that (the turn has
        # failed) has no active attempt to stop; an attempt a Ctrl+C stopped before its host unwound stays judged.
        agent = self.facts.hard_cancels[record.task].agent
        stopped = [attempt for attempt, waiting in self.facts.waiting.items()
                   if waiting.host is not None and waiting.host.event.session == event.session and self._stops(agent, attempt)]
        if agent is not None and all(self.facts.waiting[attempt].agent == agent for attempt in stopped):
            stopped = stopped[-1:]  # the agent's active attempt: the newest it started (the top of its fence stack)
        pressed = self._stopped.setdefault(record.task, {})
        for attempt in stopped:
            pressed[attempt] = record

    def _stops(self, agent: str | None, attempt: AttemptId) -> bool:
        """Whether a Ctrl+C at `agent`'s terminal stops `attempt`: the terminal's user stops only what they
        started there, not another agent's /compress or turn that shares the process and session. When either
        side's agent is unknown, any attempt of the pressing agent's process (or of any process) counts."""
        caller = self.facts.waiting[attempt].agent
        if agent is not None and caller is not None:
            return caller == agent
        slot = self.system.agents.get(agent) if agent is not None else None
        return slot is None or slot.spec.process == attempt.process

    @handles(HardCancelFinished)
    def cancel_finished(self, event: HardCancelFinished, record: HistoryEvent[HardCancelFinished]) -> Violation | None:
        """Judge what this press stopped once its own hard cancel returned (the worker given its grace, the lease
        freed by the hook if the worker had not): another terminal's Ctrl+C (even one that stopped nothing, whose
        cancel returns at once) says nothing of an attempt its presser is still cancelling."""
        for attempt, requested in self._stopped.pop(record.task, {}).items():
            held = self._holding.get(attempt)
            if held is not None and self.facts.attempt(attempt).admitted is None:
                holder, acquired = held
                return self.violation(f"{holder} still holds its lease after Ctrl+C stopped {attempt} and its hard "
                                      "cancel returned", requested, acquired, record)
        return None


class _BacksOffAfterFailure(Invariant):
    """After a failure of a session's compaction that arms a cooldown, no automatic compaction of that session
    starts a summary within `step_s`, unless a forced attempt or a commit lifted the backoff meanwhile; the
    recovery of a provider-proven context overflow runs past it by design (R23).

    The failed attempt's own compressor is bound from the failure on; everyone else from the durable record on:
    the local deadline lives on one agent's compressor, so another agent of the same process, like another
    process, can learn of the backoff only from the record. When that record failed, they are not bound, nor once
    a clear erased it unreported (its store call raised after its COMMIT). A subclass says which failure arms it
    (calling `failed`) and how long the backoff is at least (`step_s`).
    """

    failure: ClassVar[str]  # how the explanation names the failure
    # How the failure's own durable record names its error: the host's timeout record for the same attempt (its
    # summary failed, its record stalled, the host timed out meanwhile) is another record and tells nobody of this one.
    recorded_as: ClassVar[str]

    _session_of: dict[AttemptId | None, SessionId] = per_run(dict)  # attempt -> the session whose lease it took
    # session -> (the failed attempt, the failure's record, whether its durable record landed)
    _backoff: dict[SessionId, tuple[AttemptId, HistoryEvent[Event], bool]] = per_run(dict)
    _cleared_by: set[AttemptId] = per_run(set)  # attempts that cleared the cooldown (forced) before their summary
    _overflow: set[AttemptId] = per_run(set)  # attempts recovering a provider-proven overflow: past the cooldown (R23)
    _stopped: set[AttemptId] = per_run(set)  # attempts the user hard-cancelled

    def step_s(self) -> float:
        raise NotImplementedError

    def failed(self, attempt: AttemptId, record: HistoryEvent[Event]) -> bool:
        """`attempt` failed in a way that must back off: arm its session's backoff (False: not judged)."""
        if attempt not in self._session_of or attempt in self._stopped:
            return False
        self._backoff[self._session_of[attempt]] = (attempt, record, False)
        return True

    @handles(HostStarted)
    def host_started(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        if event.mode == "overflow":
            self._overflow.add(event.attempt)

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        self._session_of[event.holder.attempt] = event.session

    @handles(FenceCancelWon)
    def cancel_won(self, event: FenceCancelWon, record: HistoryEvent[FenceCancelWon]) -> None:
        if event.hard:
            self._stopped.add(event.attempt)

    @handles(CooldownSet)
    def recorded(self, event: CooldownSet, record: HistoryEvent[CooldownSet]) -> None:
        if event.error.startswith(self.recorded_as):
            self._settle(event.session, event.attempt, failed=False)

    @handles(CooldownPersistFailed)
    def persist_failed(self, event: CooldownPersistFailed, record: HistoryEvent[CooldownPersistFailed]) -> None:
        self._settle(event.session, event.attempt, failed=True)

    def _settle(self, session: SessionId, attempt: AttemptId, *, failed: bool) -> None:
        """The failed attempt's record landed (or failed: then only its own process still knows)."""
        if session in self._backoff:
            armed_by, armed, _ = self._backoff[session]
            if armed_by == attempt:
                self._backoff[session] = (armed_by, armed, not failed)

    @handles(CooldownCleared)
    def cleared(self, event: CooldownCleared, record: HistoryEvent[CooldownCleared]) -> None:
        self._cleared_by.add(event.attempt)
        self._backoff.pop(event.session, None)

    @handles(StoreFaultFired)
    def store_fault(self, event: StoreFaultFired, record: HistoryEvent[StoreFaultFired]) -> None:
        """A clear whose store call raised after its COMMIT emptied the row unreported (a /compress of another
        process, say, that then errored out): the record that told everyone else is gone, and the clear raised
        before it reset its compressor, so only the failed attempt's own compressor still holds the deadline."""
        session = self._session_of.get(job_attempt(record.task))
        if event.op != "clear_cooldown" or event.phase != "after_commit" or session not in self._backoff:
            return
        armed_by, armed, _ = self._backoff[session]
        self._backoff[session] = (armed_by, armed, False)

    @handles(CompactionCommitted)
    def committed(self, event: CompactionCommitted, record: HistoryEvent[CompactionCommitted]) -> None:
        self._backoff.pop(event.session, None)

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent[CompactionSummaryStarted]) -> Violation | None:
        if event.attempt in self._cleared_by or event.attempt in self._overflow:
            return None
        session = self._session_of.get(event.attempt)
        if session not in self._backoff:
            return None
        attempt, failed, durable = self._backoff[session]
        if not durable and (self._compressor_of(event.attempt) != self._compressor_of(attempt) or not self.locally_bound(attempt)):
            return None
        step = self.step_s()
        if record.time < failed.time + step - 1e-9:
            return self.violation(
                f"attempt {event.attempt} started a summary of {session} {record.time - failed.time:g}s after "
                f"{self.failure} {attempt}, inside the {step:g}s backoff", failed, record,
            )
        return None

    def locally_bound(self, attempt: AttemptId) -> bool:
        """Whether the failed attempt's own compressor holds its deadline yet (before the durable record)."""
        return True

    def _compressor_of(self, attempt: AttemptId) -> tuple[str, str | None]:
        """Whose local deadline an attempt set and obeys: its incarnation's, and its agent's where known."""
        return attempt.process, self.facts.attempt(attempt).agent


class TimeoutBacksOff(_BacksOffAfterFailure):
    """After a host timeout on a session's compaction (one the user had not already stopped: a stop is no
    timeout, and a Ctrl+C pressed while the host waited is a stop even when its cancel lands only after the
    timeout; a Ctrl+C stops its agent's active attempt and the running turn, its own compactions included; nor
    one whose commit was already admitted: the host waits for it and its outcome stands), the timed-out attempt
    frees its lease only once the backoff is durable, and no automatic compaction of that session starts a
    summary within the first step of the timeout ladder, unless a forced attempt or a commit lifted the backoff
    meanwhile. Its own agent's compressor is bound from the timeout on, once its host has won the fence (at once,
    unless a worker stalled in lease setup holds the fence lock: until the host wins it, nothing of the timeout is
    written, here or in the store); everyone else (another agent of its process too) from the durable record on,
    since only the record can tell them."""

    name = "timeout_backs_off"
    settings = frozenset({'timeout_cooldown_s'})
    holder_names_attempt = True
    races = ("R2",)
    learns = ADMISSIONS + PRESSES
    failure = "the host timed out on"
    recorded_as = "timeout:"

    _unrecorded: dict[AttemptId, HistoryEvent[Event]] = per_run(dict)  # timed out, backoff not yet durable (or failed)
    _waited_on: dict[AttemptId, tuple[SessionId, str | None]] = per_run(dict)  # host still waiting -> session, agent
    _timed_out: set[AttemptId] = per_run(set)
    _won: set[AttemptId] = per_run(set)  # timed out, and its host's cancel has won the fence since
    _host_task: dict[AttemptId, str] = per_run(dict)  # attempt -> the task its host waits in
    _turn_tasks: dict[str, set[str]] = per_run(dict)  # agent -> the tasks its turns ran in
    # timed out before its lease setup won the lease: the session its host waited on, and the timeout
    _timed_out_unleased: dict[AttemptId, tuple[SessionId, HistoryEvent[Event]]] = per_run(dict)

    def step_s(self) -> float:
        return self.system.config.timeout_cooldown_s(1)

    @handles(FenceCancelWon)
    def cancel_won(self, event: FenceCancelWon, record: HistoryEvent[FenceCancelWon]) -> None:
        super().cancel_won(event, record)
        if event.attempt in self._timed_out:
            self._won.add(event.attempt)

    def locally_bound(self, attempt: AttemptId) -> bool:
        """The host arms its agent's deadline as it writes the timeout's record, which waits for its fence win (R2:
        the cancel wins, then the record): a worker stalled in lease setup past its lease's TTL leaves the lease
        to the next turn's attempt before then, and that attempt owes nothing to a timeout not yet written."""
        return attempt in self._won

    @handles(HostStarted)
    def host_started(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        super().host_started(event, record)
        self._waited_on[event.attempt] = (event.session, self.system.agent_of_task(record.task))
        self._host_task[event.attempt] = record.task

    @handles(FrontendTurnSubmitted)
    def turn_submitted(self, event: FrontendTurnSubmitted, record: HistoryEvent[FrontendTurnSubmitted]) -> None:
        self._turn_tasks.setdefault(event.agent, set()).add(record.task)

    @handles(HostReturned, HostUnwind)
    def host_left(self, event: HostReturned | HostUnwind, record: HistoryEvent[HostReturned | HostUnwind]) -> None:
        self._waited_on.pop(event.attempt, None)

    @handles(HardCancelRequested)
    def hard_cancel(self, event: HardCancelRequested, record: HistoryEvent[HardCancelRequested]) -> None:
        """A Ctrl+C before the timeout stops the attempt its agent's host waits on (R1), even when its cancel waits
        behind a worker holding the fence lock (a stalled lease setup) and lands after the timeout: the press is
        what the host can know at its timeout, the landing is an accident of the lock. It stops the active
        attempt (the newest its agent's host waits on) and the running turn: the turn's own compactions share
        the turn's stop (a /compress typed beside it has its own). A Ctrl+C after the timeout stops no timeout:
        the backoff stays due, though its lease may go free before the record (R1)."""
        agent = self.facts.hard_cancels[record.task].agent
        waiting = [attempt for attempt, (session, caller) in self._waited_on.items()
                   if (session == event.session and (agent is None or caller in (None, agent)))
                   or (agent is not None and caller == agent)]  # its agent may have moved on to a continuation
        turns = self._turn_tasks.get(agent, set()) if agent is not None else set()
        for attempt in [a for a in waiting if a == waiting[-1] or self._host_task.get(a) in turns]:
            if attempt not in self._timed_out:
                self._stopped.add(attempt)
        for attempt in [a for a in self._unrecorded if a in waiting or self._session_of.get(a) == event.session]:
            del self._unrecorded[attempt]
        for attempt in [a for a, (session, _) in self._timed_out_unleased.items() if a in waiting or session == event.session]:
            del self._timed_out_unleased[attempt]

    @handles(HostTimeout)
    def timed_out(self, event: HostTimeout, record: HistoryEvent[HostTimeout]) -> None:
        """A timeout on an admitted commit is no failure: the host waits for the commit and its outcome stands
        (R7), whether it commits or refuses inside its commit (would grow), and the host records nothing. A
        timeout before the attempt won its lease (its acquire stalled) is judged once the lease is won: the
        lease is then the host's to free after the record, as any timed-out attempt's."""
        self._timed_out.add(event.attempt)
        if self.facts.attempt(event.attempt).admitted is not None:  # its commit began: a timeout on it records nothing
            return
        if self.failed(event.attempt, record):
            self._unrecorded[event.attempt] = record
        elif event.attempt not in self._session_of and event.attempt in self._waited_on:
            self._timed_out_unleased[event.attempt] = (self._waited_on[event.attempt][0], record)

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        super().acquired(event, record)
        attempt = event.holder.attempt
        pending = self._timed_out_unleased.pop(attempt, None) if attempt is not None else None
        if attempt is not None and pending is not None and self.failed(attempt, pending[1]):
            self._unrecorded[attempt] = pending[1]

    def _settle(self, session: SessionId, attempt: AttemptId, *, failed: bool) -> None:
        self._unrecorded.pop(attempt, None)
        super()._settle(session, attempt, failed=failed)

    @handles(LeaseReleased)
    def released(self, event: LeaseReleased, record: HistoryEvent[LeaseReleased]) -> Violation | None:
        timed_out = self._unrecorded.get(event.holder.attempt) if event.holder.attempt is not None else None
        if event.held and timed_out is not None:
            return self.violation(
                f"{event.holder} freed {event.session}'s lease after its host timed out and before the backoff was "
                f"recorded: another process may re-enter the stalled route unwarned", timed_out, record,
            )
        return None


class FailedSummaryBacksOff(_BacksOffAfterFailure):
    """After an attempt's provider call raised (whatever it raised: a plain InterruptedError is no user stop)
    while its host and its user still waited for it, no automatic compaction of that session starts a summary
    inside the summary-failure cooldown, unless the user stopped that attempt before it ended (its rollback lifts
    the cooldown) or a forced attempt or a commit lifted it meanwhile; the recovery of a provider-proven overflow
    may (R23)."""

    name = "failed_summary_backs_off"
    settings = frozenset({'summary_failure_cooldown_s'})
    holder_names_attempt = True
    races = ("R1", "R2")
    failure = "the provider call failed for"
    recorded_as = "summary_failed:"

    _given_up: set[AttemptId] = per_run(set)

    def step_s(self) -> float:
        return self.system.config.summary_failure_cooldown_s

    @handles(*HOST_GAVE_UP)
    def given_up(self, event: HostTimeout | FenceCancelWon | FenceRevoked | HostUnwind,
            record: HistoryEvent[HostTimeout | FenceCancelWon | FenceRevoked | HostUnwind]) -> None:
        self._given_up.add(event.attempt)
        if isinstance(event, FenceCancelWon) and event.hard:
            # a stop before the attempt ended rolls its failure cooldown back: the user's stop arms nothing
            self._stopped.add(event.attempt)
            self._backoff = {session: armed for session, armed in self._backoff.items() if armed[0] != event.attempt}

    @handles(TaskExit)
    def task_exited(self, event: TaskExit, record: HistoryEvent[TaskExit]) -> None:
        attempt = summary_attempt(record.task)
        if event.error is None or attempt is None:
            return
        if attempt not in self._given_up:
            self.failed(attempt, record)


class FailedSummaryNeverCommits(Invariant):
    """An attempt whose provider call raised never commits, unless the static fallback summary is configured
    (static_fallback_summary).

    With it off, a failed provider call ends the attempt (its failure cooldown follows). A commit anyway replaces
    the user's conversation with a summary no model wrote, and the cooldown that should hold the next turn off is
    never armed, so `failed_summary_backs_off` sees a commit, not a failure.
    """

    name = "failed_summary_never_commits"
    settings = frozenset({'static_fallback_summary'})
    races = ("R1", "R2")

    _failed: dict[AttemptId, tuple[str, HistoryEvent[Event]]] = per_run(dict)  # attempt -> its provider call's error and failed exit

    @handles(TaskExit)
    def task_exited(self, event: TaskExit, record: HistoryEvent[TaskExit]) -> None:
        attempt = summary_attempt(record.task)
        if event.error is None or attempt is None or self.system.config.static_fallback_summary:
            return
        self._failed[attempt] = (event.error, record)

    @handles(CompactionCommitted)
    def committed(self, event: CompactionCommitted, record: HistoryEvent[CompactionCommitted]) -> Violation | None:
        failed = self._failed.pop(event.attempt, None)
        if failed is None:
            return None
        error, exited = failed
        return self.violation(
            f"attempt {event.attempt} committed although its provider call raised ({error}) and the "
            "static fallback summary is off", exited, record,
        )


class FailedCommitBacksOff(_BacksOffAfterFailure):
    """After an admitted commit of a session's compaction raised (the archive or the split failed in the store),
    no automatic compaction of that session starts a summary inside the split-failure cooldown, unless a forced
    attempt or a commit lifted it meanwhile: re-summarizing at once only re-runs the write that just failed (R11's
    wedge), each failed try another chance to leave copies behind (R12)."""

    name = "failed_commit_backs_off"
    settings = frozenset({'split_failure_cooldown_s'})
    holder_names_attempt = True
    races = ("R11", "R12")
    failure = "the commit failed for"
    recorded_as = "session_split_failed:"

    def step_s(self) -> float:
        return self.system.config.split_failure_cooldown_s

    @handles(CompactionCommitFailed)
    def commit_failed(self, event: CompactionCommitFailed, record: HistoryEvent[CompactionCommitFailed]) -> None:
        self.failed(event.attempt, record)


class NoProgressAfterGiveUp(Invariant):
    """Once its host has timed it out or cancelled it, an attempt reports no further summary progress (nothing
    re-arms "compression in progress")."""

    name = "no_progress_after_give_up"
    races = ("R26",)
    learns = HOST_GAVE_UP + CRASHES

    @handles(CompactionSummaryProgress)
    def progress(self, event: CompactionSummaryProgress, record: HistoryEvent[CompactionSummaryProgress]) -> Violation | None:
        gave_up = self.facts.attempt(event.attempt).given_up
        if gave_up is not None:
            return self.violation(f"attempt {event.attempt} reported summary progress after {gave_up.kind}", gave_up, record)
        return None


class NoRelabelAfterTerminal(Invariant):
    """Once the agent's activity label shows an attempt's terminal state (its host timed it out), that attempt
    writes no further label: a late worker's heartbeat never shows the agent compressing again."""

    name = "no_relabel_after_terminal"
    races = ("R26",)
    learns = CRASHES

    _terminal: AttemptTable[AttemptId, HistoryEvent[ActivityLabeled]] = per_run(AttemptTable)

    @handles(ActivityLabeled)
    def labeled(self, event: ActivityLabeled, record: HistoryEvent[ActivityLabeled]) -> Violation | None:
        ended = self._terminal.get(event.attempt)
        if ended is not None:
            return self.violation(f"attempt {event.attempt} relabelled the agent {event.label} after it was labelled "
                                  f"{ended.event.label}", ended, record)
        if event.terminal:
            self._terminal[event.attempt] = record
        return None


class RunningSummaryLabelled(Invariant):
    """An attempt has labelled the agent ("compression started") before its summary starts: the status line never
    shows an earlier attempt's state, its "timed out" included, for a summary that is running.

    The status line is the user's only sign that a long summary is running (R26). A new attempt that left the
    label alone until its first heartbeat tick showed the previous attempt's "completed" or "timed out" for a
    whole interval of its summary (hermes test_heartbeat_start_republishes_new_compression_episode). An attempt's
    heartbeat starts before its summary and is silent only once its fence is cancelled, after which no summary
    starts: so a started summary always follows a label of its own attempt.
    """

    name = "running_summary_labelled"
    races = ("R26",)

    _labelled: set[AttemptId] = per_run(set)

    @handles(ActivityLabeled)
    def labeled(self, event: ActivityLabeled, record: HistoryEvent[ActivityLabeled]) -> None:
        self._labelled.add(event.attempt)

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent[CompactionSummaryStarted]) -> Violation | None:
        if event.attempt not in self._labelled:
            return self.violation(f"attempt {event.attempt} started its summary with the status line showing no label of its own", record)
        return None


class CtrlCSeesIdlePrompt(Invariant):
    """Ctrl+C reports a turn running only while one of its terminal's turns is: at the prompt (before the first
    turn, or after one's reply was persisted or its failure shown) it finds none, so it abandons none.

    During a turn Ctrl+C is a hard cancel with a grace period, at the prompt it ends the chat
    (`reference/chat.py`): a terminal that thought a turn was running at its prompt would make the user wait out
    a grace period on nothing, and abandon a turn that had long given its reply. A turn that ends otherwise than
    by its error, its abandonment or its persisted reply (stopped without a reply) is still counted as running,
    so this judges only presses at a prompt it can prove idle.
    """

    name = "ctrl_c_sees_idle_prompt"
    races = ("R1",)

    _running: dict[str, str] = per_run(dict)  # agent -> the task of its terminal's turn not yet known to have ended

    @handles(FrontendTurnSubmitted)
    def submitted(self, event: FrontendTurnSubmitted, record: HistoryEvent[FrontendTurnSubmitted]) -> None:
        self._running[event.agent] = record.task

    @handles(FrontendTurnFailed, FrontendTurnAbandoned)
    def ended(self, event: FrontendTurnFailed | FrontendTurnAbandoned, record: HistoryEvent[FrontendTurnFailed | FrontendTurnAbandoned]) -> None:
        self._running.pop(event.agent, None)

    @handles(TurnPersisted)
    def replied(self, event: TurnPersisted, record: HistoryEvent[TurnPersisted]) -> None:
        if event.role == "assistant":
            self._running = {agent: task for agent, task in self._running.items() if task != record.task}

    @handles(FrontendCtrlC)
    def pressed(self, event: FrontendCtrlC, record: HistoryEvent[FrontendCtrlC]) -> Violation | None:
        if event.turn_running and event.agent not in self._running:
            return self.violation(f"Ctrl+C at {event.agent}'s idle prompt reported a turn running", record)
        return None


class CtrlCAbandonsOnlyThePressedTurn(Invariant):
    """A Ctrl+C's grace period abandons only the turn that was running at its press, never one its terminal
    accepted after the press (typed while the stopped compaction still unwinds), which runs on to its reply.

    R1: the stopped turn may end well within the grace period (its compaction rolls back at once), and the user
    types the next turn at the prompt. A terminal that asked, at the grace's end, whether any turn was running
    abandoned that new one, and no check saw: an abandoned turn has not failed, the user's question is simply gone.
    """

    name = "ctrl_c_abandons_only_the_pressed_turn"
    races = ("R1",)
    learns = TURNS

    _pressed: dict[str, tuple[str | None, HistoryEvent[Event]]] = per_run(dict)  # pressing task -> the turn it stopped, the press

    @handles(FrontendCtrlC)
    def pressed(self, event: FrontendCtrlC, record: HistoryEvent[FrontendCtrlC]) -> None:
        self._pressed[record.task] = (self.facts.latest_turn.get(event.agent) if event.turn_running else None, record)

    @handles(FrontendCtrlCGraceExpired)
    def grace_expired(self, event: FrontendCtrlCGraceExpired, record: HistoryEvent[FrontendCtrlCGraceExpired]) -> Violation | None:
        stopped, press = self._pressed.pop(pressing_task(record.task), (None, None))
        if not event.turn_abandoned or self.facts.latest_turn.get(event.agent) == stopped:
            return None
        return self.violation(f"the grace of a Ctrl+C at {event.agent}'s terminal gave up a turn accepted after its "
                              "press, not the turn running at it", press, record)


class CtrlCGraceCountedFromPress(Invariant):
    """A Ctrl+C's grace period is counted from the press: its turn is abandoned exactly when the grace has passed
    since the press with the turn still running (never sooner), and a turn that ended within it ends the grace.

    R1: the grace period is the user's wait. The hard cancel runs beside it and may take longer (it waits out an
    admitted commit, and gives a stopped worker its own grace before freeing its lease); a grace counted after the
    hard cancel kept the user from the prompt for as long, and every check held: they judged what the grace did,
    not when.
    """

    name = "ctrl_c_grace_counted_from_press"
    races = ("R1",)

    _pressed: dict[str, HistoryEvent[Event]] = per_run(dict)  # pressing task -> its press

    @handles(FrontendCtrlC)
    def pressed(self, event: FrontendCtrlC, record: HistoryEvent[FrontendCtrlC]) -> None:
        self._pressed[record.task] = record

    @handles(FrontendCtrlCGraceExpired)
    def grace_expired(self, event: FrontendCtrlCGraceExpired, record: HistoryEvent[FrontendCtrlCGraceExpired]) -> Violation | None:
        press = self._pressed.pop(pressing_task(record.task), None)
        if press is None:
            return None
        due = press.time + self.system.ctrl_c_grace_s
        if event.turn_abandoned and record.time < due - 1e-9:
            return self.violation(f"Ctrl+C gave up {event.agent}'s turn {record.time - press.time:g}s after the press, "
                                  f"before its grace of {self.system.ctrl_c_grace_s:g}s", press, record)
        if record.time > due + 1e-9:
            return self.violation(f"the grace of a Ctrl+C at {event.agent}'s terminal ended {record.time - press.time:g}s "
                                  f"after the press, not within its {self.system.ctrl_c_grace_s:g}s", press, record)
        return None


class GatewayTurnsInArrivalOrder(Invariant):
    """A gateway agent starts a turn only for a delivered platform message, in the order they were delivered, and
    one at a time: no earlier turn of the agent works on once the next one has started.

    Two turns of one agent at once interleave their writes and their compactions; a later message answered first
    answers the conversation out of order; each turn on its own did what a turn does, so nothing else judged
    either. A gateway serves an agent's queue in one task, so work of the agent's previous gateway turn in
    another task once the next one has started is two turns at once. A dead process's queue dies with it.
    """

    name = "gateway_turns_in_arrival_order"
    races = ("R10",)

    _queued: dict[str, list[str | None]] = per_run(dict)  # agent -> its delivered messages not yet taken, oldest first
    _serving: dict[str, str] = per_run(dict)  # agent -> the task of its latest gateway turn
    _turn_of: dict[str, str] = per_run(dict)  # a task that ran a gateway turn -> its agent

    @handles(GatewayDelivered)
    def delivered(self, event: GatewayDelivered, record: HistoryEvent[GatewayDelivered]) -> None:
        self._queued.setdefault(event.agent, []).append(event.platform_message_id)

    @handles(GatewayTurnStarted)
    def started(self, event: GatewayTurnStarted, record: HistoryEvent[GatewayTurnStarted]) -> Violation | None:
        queued = self._queued.get(event.agent, [])
        self._serving[event.agent] = record.task
        self._turn_of[record.task] = event.agent
        if queued and queued[0] == event.platform_message_id:
            queued.pop(0)
            return None
        expected = f"{queued[0]}, delivered before it" if queued else "no message delivered and not yet taken"
        return self.violation(f"{event.agent} took platform message {event.platform_message_id} as a turn, while its "
                              f"queue held {expected}", record)

    @handles(TurnPersisted, HostStarted)
    def worked(self, event: TurnPersisted | HostStarted, record: HistoryEvent[TurnPersisted | HostStarted]) -> Violation | None:
        agent = self._turn_of.get(record.task)
        if agent is None or self._serving.get(agent) == record.task:
            return None
        return self.violation(f"an earlier gateway turn of {agent} went on working after its next turn started", record)

    @handles(ProcessCrashed)
    def crashed(self, event: ProcessCrashed, record: HistoryEvent[ProcessCrashed]) -> None:
        for name, slot in self.system.agents.items():
            if slot.spec.process == event.process:
                self._queued.pop(name, None)


class AbandonedTurnStaysSilent(Invariant):
    """A turn its terminal abandoned at the end of a Ctrl+C's grace period persists nothing afterwards (no user
    row, no reply).

    R1: the prompt is back and the user has been told that turn is over; a turn let run on would show a reply to
    a question the user took back, and persist it after the next turn's.
    """

    name = "abandoned_turn_stays_silent"
    races = ("R1",)

    _abandoned: dict[str, HistoryEvent[Event]] = per_run(dict)  # task -> the grace expiry that gave its turn up

    @handles(FrontendTurnSubmitted)
    def submitted(self, event: FrontendTurnSubmitted, record: HistoryEvent[FrontendTurnSubmitted]) -> None:
        self._abandoned.pop(record.task, None)  # the task's previous turn is over: it takes a new one

    @handles(FrontendCtrlCGraceExpired)
    def grace_expired(self, event: FrontendCtrlCGraceExpired, record: HistoryEvent[FrontendCtrlCGraceExpired]) -> None:
        task = self.facts.latest_turn.get(event.agent)
        if event.turn_abandoned and task is not None:
            self._abandoned[task] = record

    @handles(TurnPersisted)
    def persisted(self, event: TurnPersisted, record: HistoryEvent[TurnPersisted]) -> Violation | None:
        expired = self._abandoned.get(record.task)
        if expired is None:
            return None
        return self.violation(f"a turn abandoned after Ctrl+C's grace persisted its {event.role} row {event.row} "
                              f"in {event.session} afterwards", expired, record)


# Errors that are never an injected fault's doing, however a run was disturbed: a bug in the system.
PROGRAMMING_ERRORS = (
    "RuntimeError", "TypeError", "AttributeError", "KeyError", "IndexError", "ValueError", "AssertionError",
    "NameError", "UnboundLocalError", "ZeroDivisionError", "RecursionError", "NotImplementedError",
)


class _FaultAware(Invariant):
    """An invariant whose judgement depends on whether an injected fault has fired yet in this run."""

    _fault: HistoryEvent[Event] | None = None

    @handles(FaultFired)
    def fault_fired(self, event: FaultFired, record: HistoryEvent[FaultFired]) -> None:
        self._fault = self._fault or record


class TurnFailsOnlyExpectedly(_FaultAware):
    """A turn fails only with an expected error: PersistenceFailed naming compression, or, once an injected fault
    has fired in the run, an error that is not a programming error (no RuntimeError, TypeError, ...)."""

    name = "turn_fails_only_expectedly"
    races = ("R5", "R6")

    @handles(FrontendTurnFailed)
    def turn_failed(self, event: FrontendTurnFailed, record: HistoryEvent[FrontendTurnFailed]) -> Violation | None:
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
    """A compression worker raises unexpectedly (compaction.error) only in a run where an injected fault fired,
    and never with a programming error (a TypeError, RuntimeError, ... anywhere in what it raised)."""

    name = "worker_raises_only_after_fault"
    races = ("R21",)

    @handles(CompactionError)
    def worker_raised(self, event: CompactionError, record: HistoryEvent[CompactionError]) -> Violation | None:
        if self._fault is None:
            return self.violation(f"the worker of {event.attempt} raised with no fault injected: {event.error}", record)
        bug = names_programming_error(event.error)
        if bug is not None:
            return self.violation(f"the worker of {event.attempt} raised a programming error ({bug}): {event.error}", self._fault, record)
        return None


CaughtError = (
    LeaseAcquireFailed | LeaseReleaseFailed | CompactionWatermarkFailed | CompactionCommitFailed | CompactionCarriedUnread
    | CompactionStrikeResetFailed | CooldownPersistFailed | AppendFailed
)


def names_programming_error(error: str) -> str | None:
    """The programming error an `error` field names, as a type (`TypeError`) or a repr (`TypeError(...)`), if any."""
    return next((name for name in PROGRAMMING_ERRORS if error == name or f"{name}(" in error), None)


class CaughtErrorsAreNotBugs(Invariant):
    """An error the system catches and carries on from (a failed lease acquire or release, watermark read,
    commit, strike reset or cooldown write, a carried-unread tail, a failed append) is never a programming error
    (a TypeError, AttributeError, ...).

    A step that catches an error and carries on (sits out, retries, fails closed) is a fault handler, not a
    hiding place: a programming error caught there turns a bug into a quiet no-op that no other check sees (an
    acquire that always raises looks like a contended lease forever).
    """

    name = "caught_errors_are_not_bugs"
    races = ("R3", "R14", "R25")

    @handles(*get_args(CaughtError))
    def caught(self, event: CaughtError, record: HistoryEvent[CaughtError]) -> Violation | None:
        bug = names_programming_error(event.error)
        if bug is None:
            return None
        return self.violation(f"a {event.kind} caught a programming error ({bug}): {event.error}", record)
