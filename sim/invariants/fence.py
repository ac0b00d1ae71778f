"""Invariants of the commit fence: what may commit, and what must hold while a commit runs."""

from __future__ import annotations

from sim.history import HistoryEvent
from sim.invariants.base import Invariant, Violation, attempt_of_holder

CANCELLING = ("fence.cancel_won", "fence.revoked", "host.unwind")
COMMITS = ("commit.archived", "commit.published")


class NoCommitAfterCancel(Invariant):
    name = "no_commit_after_cancel"
    races = ("R1", "R2", "R5", "R8")
    description = "An attempt whose fence was cancelled or revoked, or whose host unwound, is never admitted to commit; nothing commits outside an admitted fence."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._stopped: dict[str, HistoryEvent] = {}
        self._admitted: set[str] = set()

    def on_event(self, event: HistoryEvent) -> Violation | None:
        attempt = event.fields.get("attempt")
        if event.kind in CANCELLING and attempt not in self._admitted:
            self._stopped.setdefault(attempt, event)
        elif event.kind == "fence.begin_ok":
            if attempt in self._stopped:
                cause = self._stopped[attempt]
                return self.violation(f"attempt {attempt} was admitted to commit after {cause.kind}", cause, event)
            self._admitted.add(attempt)
        elif event.kind in COMMITS and attempt not in self._admitted:
            return self.violation(f"attempt {attempt} committed ({event.kind}) without an admitted fence", event)
        return None


COMMIT_SETTLED = ("commit.archived", "commit.published", "compaction.commit_failed", "compaction.refused", "compaction.finished")


class LeaseHeldAcrossCommit(Invariant):
    name = "lease_held_across_commit"
    races = ("R6",)
    description = "From commit admission until its commit transaction has settled, the committing attempt's lease is never released."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._committing: dict[str, HistoryEvent] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "fence.begin_ok":
            self._committing[event.fields["attempt"]] = event
        elif event.kind in COMMIT_SETTLED:
            self._committing.pop(event.fields["attempt"], None)
        elif event.kind == "lease.released" and event.fields.get("held"):
            attempt = attempt_of_holder(event.fields["holder"])
            if attempt in self._committing:
                return self.violation(
                    f"attempt {attempt}'s lease was released while its commit was in flight",
                    self._committing[attempt], event,
                )
        return None


class CancelNeverBeatsAdmittedCommit(Invariant):
    name = "cancel_never_beats_admitted_commit"
    races = ("R1", "R6")
    description = "Once an attempt's commit was admitted, no cancel of that attempt wins its fence (a cancel waits out the commit and loses)."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._admitted: dict[str, HistoryEvent] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        attempt = event.fields.get("attempt")
        if event.kind == "fence.begin_ok":
            self._admitted.setdefault(attempt, event)
        elif event.kind == "fence.cancel_won" and attempt in self._admitted:
            return self.violation(f"a cancel won attempt {attempt}'s fence after its commit was admitted", self._admitted[attempt], event)
        return None
