"""Invariants of the commit fence: what may commit, and what must hold while a commit runs."""

from __future__ import annotations

from contract.events import (
    CommitArchived,
    CommitPublished,
    CompactionCommitFailed,
    CompactionFinished,
    CompactionRefused,
    FenceBeginOk,
    FenceCancelWon,
    FenceRevoked,
    HostUnwind,
    LeaseReleased,
)
from contract.history import HistoryEvent
from contract.ids import AttemptId
from sim.invariants.base import Invariant, Violation, handles
from sim.invariants.host import job_attempt


class NoCommitAfterCancel(Invariant):
    name = "no_commit_after_cancel"
    races = ("R1", "R2", "R5", "R8")
    description = "An attempt whose fence was cancelled or revoked, or whose host unwound, is never admitted to commit; nothing commits outside an admitted fence."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._stopped: dict[AttemptId, HistoryEvent] = {}
        self._admitted: set[AttemptId] = set()

    @handles(FenceCancelWon, FenceRevoked, HostUnwind)
    def stopped(self, event: FenceCancelWon | FenceRevoked | HostUnwind, record: HistoryEvent) -> None:
        if event.attempt not in self._admitted:
            self._stopped.setdefault(event.attempt, record)

    @handles(FenceBeginOk)
    def admitted(self, event: FenceBeginOk, record: HistoryEvent) -> Violation | None:
        cause = self._stopped.get(event.attempt)
        if cause is not None:
            return self.violation(f"attempt {event.attempt} was admitted to commit after {cause.kind}", cause, record)
        self._admitted.add(event.attempt)
        return None

    @handles(CommitArchived, CommitPublished)
    def committed(self, event: CommitArchived | CommitPublished, record: HistoryEvent) -> Violation | None:
        if event.attempt not in self._admitted:
            return self.violation(f"attempt {event.attempt} committed ({record.kind}) without an admitted fence", record)
        return None


class LeaseHeldAcrossCommit(Invariant):
    """Another task's release (a host's revoke or hook) while the commit is admitted is judged at once: the
    commit transaction may be running. The worker's own release is judged by what follows it: the worker runs
    one store transaction at a time, so its release settles after any it began, and it is a violation only if
    a commit transaction follows it (the worker gave up the lease, then committed without it). A worker that
    unwinds from an error between admission and its commit releases its lease and commits nothing."""

    name = "lease_held_across_commit"
    races = ("R6",)
    description = "From commit admission until its commit transaction has settled, the committing attempt's lease is never released."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._committing: dict[AttemptId, HistoryEvent] = {}
        self._released_by_worker: dict[AttemptId, HistoryEvent] = {}  # admitted attempts whose worker released early

    @handles(FenceBeginOk)
    def admitted(self, event: FenceBeginOk, record: HistoryEvent) -> None:
        self._committing[event.attempt] = record

    @handles(CommitArchived, CommitPublished, CompactionCommitFailed)
    def commit_settled(self, event: CommitArchived | CommitPublished | CompactionCommitFailed, record: HistoryEvent) -> Violation | None:
        released = self._released_by_worker.pop(event.attempt, None)
        admitted = self._committing.pop(event.attempt, None)
        if released is not None and admitted is not None:
            return self.violation(f"attempt {event.attempt}'s worker released its lease, then committed", admitted, released, record)
        return None

    @handles(CompactionRefused, CompactionFinished)
    def settled(self, event: CompactionRefused | CompactionFinished, record: HistoryEvent) -> None:
        self._committing.pop(event.attempt, None)
        self._released_by_worker.pop(event.attempt, None)

    @handles(LeaseReleased)
    def released(self, event: LeaseReleased, record: HistoryEvent) -> Violation | None:
        attempt = event.holder.attempt
        if not event.held or attempt not in self._committing:
            return None
        if job_attempt(record.task) == attempt:
            self._released_by_worker.setdefault(attempt, record)
            return None
        return self.violation(f"attempt {attempt}'s lease was released while its commit was in flight", self._committing[attempt], record)


class CancelNeverBeatsAdmittedCommit(Invariant):
    name = "cancel_never_beats_admitted_commit"
    races = ("R1", "R6")
    description = "Once an attempt's commit was admitted, no cancel of that attempt wins its fence (a cancel waits out the commit and loses)."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._admitted: dict[AttemptId, HistoryEvent] = {}

    @handles(FenceBeginOk)
    def admitted(self, event: FenceBeginOk, record: HistoryEvent) -> None:
        self._admitted.setdefault(event.attempt, record)

    @handles(FenceCancelWon)
    def cancel_won(self, event: FenceCancelWon, record: HistoryEvent) -> Violation | None:
        if event.attempt in self._admitted:
            return self.violation(f"a cancel won attempt {event.attempt}'s fence after its commit was admitted", self._admitted[event.attempt], record)
        return None
