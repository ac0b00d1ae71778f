"""Invariants of the commit fence: what may commit, and what must hold while a commit runs."""

from __future__ import annotations

from contract.events import (
    CommitArchived,
    CommitPublished,
    CompactionCommitFailed,
    CompactionFinished,
    CompactionRefused,
    CompactionStaticFallback,
    CompactionStrike,
    CompactionSummaryDone,
    CompactionSummaryStarted,
    Event,
    FenceBeginOk,
    FenceBeginRefused,
    FenceCancelWon,
    FenceRevoked,
    FrontendCtrlC,
    FrontendTurnSubmitted,
    HardCancelRequested,
    HostReturned,
    HostStarted,
    HostUnwind,
    IsolatedAbandoned,
    LeaseReleased,
    LeaseReleaseFailed,
    TaskExit,
)
from contract.history import HistoryEvent
from contract.ids import AttemptId
from sim.invariants.facts import ADMISSIONS, CRASHES, HARD_CANCELS, HOST_GAVE_UP, PRESSES, AttemptTable, job_attempt, summary_attempt
from sim.invariants.invariant import Invariant, Violation, handles, per_run


class NoCommitAfterCancel(Invariant):
    """An attempt whose fence was cancelled or revoked, or whose host unwound, is never admitted to commit;
    nothing commits outside an admitted fence."""

    name = "no_commit_after_cancel"
    races = ("R1", "R2", "R5", "R8")

    _stopped: dict[AttemptId, HistoryEvent[Event]] = per_run(dict)

    @handles(FenceCancelWon, FenceRevoked, HostUnwind)
    def stopped(self, event: FenceCancelWon | FenceRevoked | HostUnwind, record: HistoryEvent[FenceCancelWon | FenceRevoked | HostUnwind]) -> None:
        if self.facts.attempt(event.attempt).admitted is None:
            self._stopped.setdefault(event.attempt, record)

    @handles(FenceBeginOk)
    def admitted(self, event: FenceBeginOk, record: HistoryEvent[FenceBeginOk]) -> Violation | None:
        cause = self._stopped.get(event.attempt)
        if cause is not None:
            return self.violation(f"attempt {event.attempt} was admitted to commit after {cause.kind}", cause, record)
        return None

    @handles(CommitArchived, CommitPublished)
    def committed(self, event: CommitArchived | CommitPublished, record: HistoryEvent[CommitArchived | CommitPublished]) -> Violation | None:
        if self.facts.attempt(event.attempt).admitted is None:
            return self.violation(f"attempt {event.attempt} committed ({record.kind}) without an admitted fence", record)
        return None


class HardCancelAbandonsSummary(Invariant):
    """An attempt whose fence a hard cancel won while its provider call was in flight stops waiting for the call
    at once: the call is abandoned before it ends.

    A Ctrl+C must not wait for the model: the provider call runs isolated so that a hard cancel unwinds the
    attempt at once (its rollback, its lease), leaving the call to finish unheard. Judged from the runtime's
    record of the wait, not from the attempt's account. A call ending at the very moment of the cancel may beat
    its delivery; a crash ends the process's tasks in no particular order.
    """

    name = "hard_cancel_abandons_summary"
    races = ("R1",)
    learns = CRASHES

    _hard: AttemptTable[AttemptId, HistoryEvent[Event]] = per_run(AttemptTable)  # hard-cancelled attempt -> the cancel
    _abandoned: set[str] = per_run(set)  # summary tasks their attempt stopped waiting for

    @handles(FenceCancelWon)
    def cancel_won(self, event: FenceCancelWon, record: HistoryEvent[FenceCancelWon]) -> None:
        if event.hard:
            self._hard.setdefault(event.attempt, record)

    @handles(IsolatedAbandoned)
    def abandoned(self, event: IsolatedAbandoned, record: HistoryEvent[IsolatedAbandoned]) -> None:
        self._abandoned.add(event.call)

    @handles(TaskExit)
    def task_exited(self, event: TaskExit, record: HistoryEvent[TaskExit]) -> Violation | None:
        attempt = summary_attempt(record.task)
        cancel = None if attempt is None else self._hard.pop(attempt, None)
        if cancel is None or record.task in self._abandoned or record.time <= cancel.time + 1e-9:
            return None
        return self.violation(
            f"the hard cancel of {attempt} won its fence, yet the attempt waited "
            f"{record.time - cancel.time:g}s for its provider call to end instead of abandoning it", cancel, record,
        )


class NoAdmissionAfterCtrlC(Invariant):
    """Once a Ctrl+C is pressed, its agent's active attempt (the newest it started whose host still waits),
    unless its commit was already admitted, is never admitted to commit: the stop counts from the press, even
    when its cancel queues behind the worker at the commit door.

    The press itself (the stop the fence reads) is what refuses that commit. A /compress typed beside a running
    turn holds a stop of its own, which only the press of the active attempt sets. An attempt whose host unwound
    stays the agent's newest here until its host returns (it never does): its fence may still be on the stack,
    and it is revoked, so judging it is safe; the older attempt below it is then not judged.
    """

    name = "no_admission_after_ctrl_c"
    races = ("R1",)
    learns = PRESSES + CRASHES

    _caller: AttemptTable[AttemptId, str] = per_run(AttemptTable)  # attempts whose host has not returned -> their agent
    _stopped: AttemptTable[AttemptId, HistoryEvent[Event]] = per_run(AttemptTable)  # attempt -> the Ctrl+C that stopped it before admission

    @handles(HostStarted)
    def started(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        agent = self.system.agent_of_task(record.task)
        if agent is not None:
            self._caller[event.attempt] = agent

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> None:
        self._caller.pop(event.attempt, None)

    @handles(HardCancelRequested)
    def hard_cancel(self, event: HardCancelRequested, record: HistoryEvent[HardCancelRequested]) -> None:
        agent = self.facts.hard_cancels[record.task].agent
        mine = [attempt for attempt, caller in self._caller.items() if caller == agent]
        if mine and self.facts.attempt(mine[-1]).admitted is None:
            self._stopped.setdefault(mine[-1], record)

    @handles(FenceBeginOk)
    def admitted(self, event: FenceBeginOk, record: HistoryEvent[FenceBeginOk]) -> Violation | None:
        pressed = self._stopped.get(event.attempt)
        if pressed is not None:
            return self.violation(f"attempt {event.attempt} was admitted to commit after a Ctrl+C stopped it", pressed, record)
        return None


class CtrlCStopsTheTurnsLaterCompactions(Invariant):
    """A compaction a turn starts after a Ctrl+C was pressed on it (before its fence existed) is never admitted to
    commit: the press stopped the turn, and every compaction the turn starts shares its stop.

    R1: a turn that is still starting (its session read stalls, say) has no attempt yet, so the press sets the
    turn's stop alone. no_admission_after_ctrl_c judges only the attempts a press found running, so a commit
    that ignored the shared stop went unseen. A forced attempt (/compress) is no compaction of a turn, even in the
    task the pressed turn ran in (a terminal that reads /compress after the turn ended): it starts unstopped.
    """

    name = "ctrl_c_stops_the_turns_later_compactions"
    races = ("R1",)
    learns = CRASHES

    _pressed: dict[str, HistoryEvent[Event]] = per_run(dict)  # the task of a turn a Ctrl+C was pressed on -> the press
    _stopped: AttemptTable[AttemptId, HistoryEvent[Event]] = per_run(AttemptTable)  # an attempt such a turn started later -> the press

    @handles(FrontendTurnSubmitted)
    def submitted(self, event: FrontendTurnSubmitted, record: HistoryEvent[FrontendTurnSubmitted]) -> None:
        self._pressed.pop(record.task, None)  # a task that takes a new turn has ended the one pressed before

    @handles(FrontendCtrlC)
    def pressed(self, event: FrontendCtrlC, record: HistoryEvent[FrontendCtrlC]) -> None:
        turn = self.facts.latest_turn.get(event.agent)
        if event.turn_running and turn is not None:
            self._pressed.setdefault(turn, record)

    @handles(HostStarted)
    def started(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        press = self._pressed.get(record.task)
        if press is not None and event.mode != "forced":
            self._stopped[event.attempt] = press

    @handles(FenceBeginOk)
    def admitted(self, event: FenceBeginOk, record: HistoryEvent[FenceBeginOk]) -> Violation | None:
        press = self._stopped.get(event.attempt)
        if press is None:
            return None
        return self.violation(f"attempt {event.attempt}, started by a turn after Ctrl+C was pressed on it, was admitted "
                              "to commit", press, record)


class LeaseHeldAcrossCommit(Invariant):
    """From commit admission until its commit transaction has settled, the committing attempt's lease is never released.

    Another task's release (a host's revoke or hook) while the commit is admitted is judged at once: the commit
    transaction may be running. The worker runs one store transaction at a time, so its own release settles
    after any it began: it is a violation only if a commit transaction follows it. A worker that unwinds from an
    error between admission and its commit releases its lease and commits nothing.
    """

    name = "lease_held_across_commit"
    holder_names_attempt = True
    races = ("R6",)

    _committing: dict[AttemptId, HistoryEvent[Event]] = per_run(dict)
    _released_by_worker: dict[AttemptId, HistoryEvent[Event]] = per_run(dict)  # admitted attempts whose worker released early

    @handles(FenceBeginOk)
    def admitted(self, event: FenceBeginOk, record: HistoryEvent[FenceBeginOk]) -> None:
        self._committing[event.attempt] = record

    @handles(CommitArchived, CommitPublished, CompactionCommitFailed)
    def commit_settled(self, event: CommitArchived | CommitPublished | CompactionCommitFailed,
            record: HistoryEvent[CommitArchived | CommitPublished | CompactionCommitFailed]) -> Violation | None:
        released = self._released_by_worker.pop(event.attempt, None)
        admitted = self._committing.pop(event.attempt, None)
        if released is not None and admitted is not None:
            return self.violation(f"attempt {event.attempt}'s worker released its lease, then committed", admitted, released, record)
        return None

    @handles(CompactionRefused, CompactionFinished)
    def settled(self, event: CompactionRefused | CompactionFinished, record: HistoryEvent[CompactionRefused | CompactionFinished]) -> None:
        self._committing.pop(event.attempt, None)
        self._released_by_worker.pop(event.attempt, None)

    @handles(LeaseReleased)
    def released(self, event: LeaseReleased, record: HistoryEvent[LeaseReleased]) -> Violation | None:
        attempt = event.holder.attempt
        if not event.held or attempt not in self._committing:
            return None
        if job_attempt(record.task) == attempt:
            self._released_by_worker.setdefault(attempt, record)
            return None
        return self.violation(f"attempt {attempt}'s lease was released while its commit was in flight", self._committing[attempt], record)


class CancelNeverBeatsAdmittedCommit(Invariant):
    """Once an attempt's commit was admitted, no cancel of that attempt wins its fence (a cancel waits out the
    commit and loses), and no Ctrl+C frees that attempt's lease as a winning cancel would.

    What a Ctrl+C's cancel answered is seen by nobody but its own code; what it then does is: only a winner frees
    the stopped attempt's lease through the fence's hook, from the Ctrl+C's own task before its hard cancel
    returns. A Ctrl+C that frees an admitted attempt's lease took a committed compaction for cancelled (the hermes
    report behind cancel-loses-to-finished-commit: reported cancelled, lease freed a second time), even where its
    fence emitted no win.
    """

    name = "cancel_never_beats_admitted_commit"
    holder_names_attempt = True
    races = ("R1", "R6")
    learns = ADMISSIONS + HARD_CANCELS

    @handles(FenceCancelWon)
    def cancel_won(self, event: FenceCancelWon, record: HistoryEvent[FenceCancelWon]) -> Violation | None:
        admitted = self.facts.attempt(event.attempt).admitted
        if admitted is not None:
            return self.violation(f"a cancel won attempt {event.attempt}'s fence after its commit was admitted", admitted, record)
        return None

    @handles(LeaseReleased, LeaseReleaseFailed)
    def freed(self, event: LeaseReleased | LeaseReleaseFailed, record: HistoryEvent[LeaseReleased | LeaseReleaseFailed]) -> Violation | None:
        attempt = event.holder.attempt
        pressed = self.facts.hard_cancels.get(record.task)
        admitted = self.facts.attempt(attempt).admitted
        if pressed is not None and admitted is not None:
            return self.violation(
                f"a Ctrl+C freed attempt {attempt}'s lease as a winning cancel would, after its commit was admitted",
                admitted, pressed.request, record,
            )
        return None


class SummarizedAttemptRefusedOnlyForACause(Invariant):
    """An attempt whose summary arrived commits, or is refused as no progress, as would-grow after its strike, or
    by a fence refusal with a witnessed cause (a won cancel, a revoke, a host timeout or unwind, a Ctrl+C, its
    ceiling elapsed, or a newer summary of its process).

    That attempt is the one the user waited for: refusing it throws the wait away, so it may only happen for a
    cause the history shows. A `would_grow` bumps the breaker, so its strike is recorded first; the fence refuses
    for what others did to the attempt (its deadline counts from its host's start). Without this, an admission
    or screen that refuses every candidate leaves every other invariant quiet: nothing committed, so nothing
    committed wrongly.
    """

    name = "summarized_attempt_refused_only_for_a_cause"
    settings = frozenset({'ceiling_timeout_s'})
    races = ("R1", "R13", "R21")
    learns = (HostStarted, *HOST_GAVE_UP)  # the host's start, and a cancel, revoke, host timeout or unwind

    _summaries: list[tuple[int, AttemptId]] = per_run(list)  # each summary start: its sequence number, its attempt
    _pressed = False  # a Ctrl+C was pressed (a stop may be latched on a later attempt of its agent)
    _summarized: set[AttemptId] = per_run(set)
    _struck: set[AttemptId] = per_run(set)
    _fence_refused: set[AttemptId] = per_run(set)

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent[CompactionSummaryStarted]) -> None:
        self._summaries.append((record.seq, event.attempt))

    @handles(CompactionSummaryDone, CompactionStaticFallback)
    def summarized(self, event: CompactionSummaryDone | CompactionStaticFallback,
            record: HistoryEvent[CompactionSummaryDone | CompactionStaticFallback]) -> None:
        self._summarized.add(event.attempt)

    @handles(HardCancelRequested)
    def pressed(self, event: HardCancelRequested, record: HistoryEvent[HardCancelRequested]) -> None:
        self._pressed = True

    @handles(CompactionStrike)
    def struck(self, event: CompactionStrike, record: HistoryEvent[CompactionStrike]) -> None:
        self._struck.add(event.attempt)

    @handles(FenceBeginRefused)
    def fence_refused(self, event: FenceBeginRefused, record: HistoryEvent[FenceBeginRefused]) -> Violation | None:
        if not self._fence_cause(event.attempt, event.reason, record):
            return self.violation(f"attempt {event.attempt}'s commit was refused admission ({event.reason!r}) with no "
                                  "cancel, revoke, timeout, Ctrl+C, elapsed ceiling or newer summary behind it", record)
        self._fence_refused.add(event.attempt)
        return None

    @handles(CompactionRefused)
    def refused(self, event: CompactionRefused, record: HistoryEvent[CompactionRefused]) -> Violation | None:
        if event.attempt not in self._summarized:
            return None
        reason = event.reason
        if reason == "no_progress" or (reason == "would_grow" and event.attempt in self._struck):
            return None
        if reason in ("superseded", "commit_fence_cancelled") and event.attempt in self._fence_refused:
            return None
        return self.violation(f"attempt {event.attempt}'s summary arrived, then it was refused ({reason!r}) with no "
                              "refusal of its fence, strike or unchanged candidate behind it", record)

    def _fence_cause(self, attempt: AttemptId, reason: str, record: HistoryEvent[Event]) -> bool:
        if reason in ("cancelled", "revoked"):
            return self.facts.attempt(attempt).given_up is not None
        if reason == "hard_cancel":
            return self._pressed
        if reason == "deadline":
            started = self.facts.attempt(attempt).host
            return started is not None and record.time >= started.time + self.system.config.ceiling_timeout_s
        if reason == "superseded":
            return self._newer_summary(attempt)
        return False

    def _newer_summary(self, attempt: AttemptId) -> bool:
        """Another attempt of `attempt`'s process started a summary after `attempt`'s host started."""
        started = self.facts.attempt(attempt).host
        for seq, other in reversed(self._summaries):
            if started is not None and seq < started.seq:
                return False
            if other != attempt and other.process == attempt.process:
                return True
        return False
