"""Invariants of the host side: timeouts, hung commits, the bounded pool, and the turn after Ctrl+C."""

from __future__ import annotations

from typing import Sequence

from sim.history import HistoryEvent
from sim.invariants.base import Invariant, Violation, attempt_of_holder


class IdleTimeoutWithinBounds(Invariant):
    name = "idle_timeout_within_bounds"
    races = ("R9",)
    description = "An idle timeout fires between idle and 1.5 x idle after the last progress."

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "host.timeout" and event.fields.get("budget") == "idle":
            idle = self.system.config.idle_timeout_s
            silence = event.fields["since_progress"]
            if not idle - 1e-9 <= silence < 1.5 * idle:
                return self.violation(f"the idle timeout fired after {silence:g}s of silence (idle is {idle:g}s)", event)
        return None


class HungCommitReported(Invariant):
    name = "hung_commit_reported"
    races = ("R7",)
    description = "A commit still running an overrun slice after its host timed out is reported exactly once, while it hangs."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._admitted: set[str] = set()
        self._timed_out: dict[str, HistoryEvent] = {}
        self._reported: dict[str, HistoryEvent] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        attempt = event.fields.get("attempt")
        if event.kind == "fence.begin_ok":
            self._admitted.add(attempt)
        elif event.kind == "host.timeout":
            self._timed_out.setdefault(attempt, event)
        elif event.kind == "host.commit_overrun":
            if attempt in self._reported:
                return self.violation(f"the hung commit of {attempt} was reported twice", self._reported[attempt], event)
            self._reported[attempt] = event
        elif event.kind == "fence.finish":
            return self._check(attempt, event.time, event)
        return None

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        end = history[-1].time if history else 0.0
        for attempt in sorted(self._admitted):
            violation = self._check(attempt, end, None)
            if violation is not None:
                return violation
        return None

    def _check(self, attempt: str, until: float, finish: HistoryEvent | None) -> Violation | None:
        timed_out = self._timed_out.get(attempt)
        if attempt not in self._admitted or timed_out is None or attempt in self._reported:
            return None
        slice_s = self.system.config.commit_overrun_slice_s
        if until - timed_out.time > slice_s + 1e-9:
            witnesses = [timed_out] + ([finish] if finish else [])
            return self.violation(f"the commit of {attempt} ran {until - timed_out.time:g}s past its host's timeout unreported", *witnesses)
        return None


JOB_TASK = "compress:"  # the pooled job's task is named after its attempt


class StaleJobNeverRuns(Invariant):
    name = "stale_job_never_runs"
    races = ("R8",)
    description = "A compression job whose host already gave up never dispatches a summary; one started after that does no work at all."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._given_up: dict[str, HistoryEvent] = {}
        self._started_stale: set[str] = set()

    def on_event(self, event: HistoryEvent) -> Violation | None:
        attempt = event.fields.get("attempt")
        if event.kind in ("host.timeout", "fence.cancel_won", "host.unwind"):
            self._given_up.setdefault(attempt, event)
        elif event.kind == "task.spawn" and event.task.startswith(JOB_TASK) and event.task[len(JOB_TASK):] in self._given_up:
            self._started_stale.add(event.task[len(JOB_TASK):])
        elif event.kind == "attempt.claimed" and attempt in self._started_stale:
            return self.violation(f"attempt {attempt}'s job started after its host gave up and still went to work", self._given_up[attempt], event)
        elif event.kind == "compaction.summary_started" and attempt in self._given_up:
            return self.violation(f"attempt {attempt} dispatched its summary after its host gave up", self._given_up[attempt], event)
        elif event.kind == "process.crashed":
            # a restarted process numbers its attempts from 1 again
            process = event.fields["process"]
            self._given_up = {a: e for a, e in self._given_up.items() if a.rsplit(".", 1)[0] != process}
            self._started_stale = {a for a in self._started_stale if a.rsplit(".", 1)[0] != process}
        return None


class PoolAdmissionBounded(Invariant):
    name = "pool_admission_bounded"
    races = ("R8",)
    description = "A process never has more compression jobs admitted than its pool's cap; past the cap a compression fails fast instead of queueing."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._jobs: dict[str, dict[str, HistoryEvent]] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "task.spawn" and event.task.startswith(JOB_TASK):
            attempt = event.task[len(JOB_TASK):]
            jobs = self._jobs.setdefault(attempt.rsplit(".", 1)[0], {})
            jobs[attempt] = event
            cap = self.system.config.pool_cap
            if len(jobs) > cap:
                return self.violation(f"{len(jobs)} compression jobs were admitted at once in a pool capped at {cap}: {', '.join(jobs)}", *jobs.values())
        elif event.kind == "compaction.finished":
            attempt = event.fields["attempt"]
            self._jobs.get(attempt.rsplit(".", 1)[0], {}).pop(attempt, None)
        elif event.kind == "process.crashed":
            self._jobs.pop(event.fields["process"], None)
        return None


class NextTurnPersistsAfterCtrlC(Invariant):
    name = "next_turn_persists_after_ctrl_c"
    races = ("R1",)
    description = "After Ctrl+C and the grace period, the next turn the frontend accepts is persisted."

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        for index, event in enumerate(history):
            if event.kind != "frontend.ctrl_c_grace_expired":
                continue
            agent = event.fields.get("agent")
            later = history[index + 1:]
            submitted = next((e for e in later if e.kind == "frontend.turn_submitted" and e.fields.get("agent") == agent), None)
            if submitted is None:
                continue
            after = history[submitted.seq + 1:]
            failed = next((e for e in after if e.kind == "frontend.turn_failed" and e.fields.get("agent") == agent), None)
            if failed is not None:
                return self.violation(f"the turn after Ctrl+C was not persisted: {failed.fields.get('error')}", event, submitted, failed)
        return None


class HardCancelFreesLease(Invariant):
    name = "hard_cancel_frees_lease"
    races = ("R1",)
    description = "By the end of the Ctrl+C grace period, an attempt on that session that was not yet committing has released its lease."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._holding: dict[str, dict[str, HistoryEvent]] = {}
        self._admitted: set[str] = set()
        self._cancelled: dict[str, HistoryEvent] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "lease.acquired":
            self._holding.setdefault(fields["session"], {})[fields["holder"]] = event
        elif event.kind == "lease.released":
            self._holding.get(fields["session"], {}).pop(fields["holder"], None)
        elif event.kind == "fence.begin_ok":
            self._admitted.add(fields["attempt"])
        elif event.kind == "hard_cancel.requested":
            self._cancelled[fields["session"]] = event
        elif event.kind == "frontend.ctrl_c_grace_expired":
            return self._check_sessions(event)
        return None

    def _check_sessions(self, expired: HistoryEvent) -> Violation | None:
        for session, requested in self._cancelled.items():
            for holder, acquired in self._holding.get(session, {}).items():
                if acquired.time <= requested.time and attempt_of_holder(holder) not in self._admitted:
                    return self.violation(f"{holder} still holds {session}'s lease after Ctrl+C and the grace period", requested, acquired, expired)
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
        self._session_of: dict[str, str] = {}  # attempt -> the session whose lease it took
        self._backoff: dict[str, tuple[HistoryEvent, bool]] = {}  # session -> (its timeout, durable record failed)
        self._cleared_by: set[str] = set()  # attempts that cleared the cooldown (forced) before their summary
        self._stopped: set[str] = set()  # attempts the user hard-cancelled

    def on_event(self, event: HistoryEvent) -> Violation | None:
        kind, fields = event.kind, event.fields
        attempt = fields.get("attempt")
        if kind == "lease.acquired":
            self._session_of[attempt_of_holder(fields["holder"])] = fields["session"]
        elif kind == "fence.cancel_won" and fields.get("hard"):
            self._stopped.add(attempt)
        elif kind == "host.timeout" and attempt in self._session_of and attempt not in self._stopped:
            self._backoff[self._session_of[attempt]] = (event, False)
        elif kind == "cooldown.persist_failed" and fields["session"] in self._backoff:
            timeout, _ = self._backoff[fields["session"]]
            if timeout.fields["attempt"] == attempt:  # only this process still knows of the backoff
                self._backoff[fields["session"]] = (timeout, True)
        elif kind == "cooldown.cleared":
            self._cleared_by.add(attempt)
            self._backoff.pop(fields["session"], None)
        elif kind == "compaction.committed":
            self._backoff.pop(fields["session"], None)
        elif kind == "compaction.summary_started" and attempt not in self._cleared_by:
            return self._judge(attempt, event)
        return None

    def _judge(self, attempt: str, started: HistoryEvent) -> Violation | None:
        session = self._session_of.get(attempt)
        timeout, local_only = self._backoff.get(session, (None, False))
        if timeout is None or (local_only and attempt.rsplit(".", 1)[0] != timeout.fields["attempt"].rsplit(".", 1)[0]):
            return None
        step = self.system.config.timeout_cooldown_s(1)
        if started.time < timeout.time + step - 1e-9:
            return self.violation(
                f"attempt {attempt} started a summary of {session} {started.time - timeout.time:g}s after the host timed out "
                f"on {timeout.fields['attempt']}, inside the {step:g}s backoff", timeout, started,
            )
        return None


# Ways a host stops waiting for an attempt: from then on the attempt is a zombie to the host.
HOST_GAVE_UP = ("host.timeout", "fence.cancel_won", "fence.revoked", "host.unwind")


class NoProgressAfterGiveUp(Invariant):
    name = "no_progress_after_give_up"
    races = ("R26",)
    description = "Once its host has timed it out or cancelled it, an attempt reports no further summary progress (nothing re-arms \"compression in progress\")."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._given_up: dict[str, HistoryEvent] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        attempt = event.fields.get("attempt")
        if event.kind in HOST_GAVE_UP:
            self._given_up.setdefault(attempt, event)
        elif event.kind == "compaction.summary_progress" and attempt in self._given_up:
            gave_up = self._given_up[attempt]
            return self.violation(f"attempt {attempt} reported summary progress after {gave_up.kind}", gave_up, event)
        elif event.kind == "process.crashed":
            # a restarted process numbers its attempts from 1 again
            process = event.fields["process"]
            self._given_up = {a: e for a, e in self._given_up.items() if a.rsplit(".", 1)[0] != process}
        return None


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

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "fault.fired":
            self._fault = self._fault or event
            return None
        return self.judge(event)

    def judge(self, event: HistoryEvent) -> Violation | None:
        return None


class TurnFailsOnlyExpectedly(_FaultAware):
    name = "turn_fails_only_expectedly"
    races = ("R5", "R6")
    description = (
        "A turn fails only with an expected error: PersistenceFailed naming compression, or, once an injected fault "
        "has fired in the run, an error that is not a programming error (no RuntimeError, TypeError, ...)."
    )

    def judge(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "frontend.turn_failed":
            error = str(event.fields.get("error", ""))
            kind = error.split(":", 1)[0].strip()
            if kind == "PersistenceFailed" and "compression" in error:
                return None
            if self._fault is None:
                return self.violation(f"a turn of {event.fields.get('agent')} failed with no fault injected: {error}", event)
            if kind in PROGRAMMING_ERRORS:
                return self.violation(f"a turn of {event.fields.get('agent')} failed with a programming error: {error}", self._fault, event)
        return None


class WorkerRaisesOnlyAfterFault(_FaultAware):
    name = "worker_raises_only_after_fault"
    races = ("R21",)
    description = (
        "A compression worker raises unexpectedly (compaction.error) only in a run where an injected fault fired, "
        "and never with a programming error (a TypeError, RuntimeError, ... anywhere in what it raised)."
    )

    def judge(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "compaction.error":
            attempt, error = event.fields.get("attempt"), str(event.fields.get("error", ""))
            if self._fault is None:
                return self.violation(f"the worker of {attempt} raised with no fault injected: {error}", event)
            bug = next((name for name in PROGRAMMING_ERRORS if f"{name}(" in error), None)  # the error is a repr
            if bug is not None:
                return self.violation(f"the worker of {attempt} raised a programming error ({bug}): {error}", self._fault, event)
        return None
