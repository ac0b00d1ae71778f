"""Invariants of the compression lease: mutual exclusion, holder-qualified release, bounded lifetime."""

from __future__ import annotations

import math
import re
from typing import Sequence

from sim.history import HistoryEvent
from sim.invariants.base import Invariant, Violation, attempt_of_holder

LEASE_REFUSALS = ("Lease", "Busy", "InProgress")


class LeaseMutualExclusion(Invariant):
    name = "lease_mutual_exclusion"
    races = ("R3", "R19", "R25")
    description = "At most one live holder per session lease; a release only ever frees the releaser's own row."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._holders: dict[str, dict[str, tuple[float, HistoryEvent]]] = {}
        self._row_owner: dict[str, str] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        kind, fields = event.kind, event.fields
        if kind not in ("lease.acquired", "lease.refreshed", "lease.released", "compaction.finished"):
            return None
        if kind == "compaction.finished":
            self._forget(fields["attempt"])
            return None
        session, holder = fields["session"], fields["holder"]
        holders = self._holders.setdefault(session, {})
        if kind == "lease.acquired":
            clash = self._live_other(session, holder, event.time)
            holders[holder] = (event.time, event)
            self._row_owner[session] = holder
            if clash is not None:
                return self.violation(f"{holder} acquired {session}'s lease while {clash[1].fields['holder']} still held it", clash[1], event)
        elif kind == "lease.refreshed":
            holders[holder] = (event.time, holders.get(holder, (0.0, event))[1])
        elif fields.get("held"):
            owner = self._row_owner.get(session)
            holders.pop(holder, None)
            if owner is not None and owner != holder:
                return self.violation(f"{holder}'s release freed the lease row of {owner} (ABA)", event)
            self._row_owner.pop(session, None)
        else:
            holders.pop(holder, None)
        return None

    def _live_other(self, session: str, holder: str, now: float) -> tuple[float, HistoryEvent] | None:
        ttl = self.system.config.lease_ttl_s
        for other, (renewed, acquired) in self._holders.get(session, {}).items():
            if other != holder and renewed + ttl > now and not self.system.holder_is_dead(other):
                return renewed, acquired
        return None

    def _forget(self, attempt: str) -> None:
        """An attempt that has ended holds nothing any more (its row, if left, will expire)."""
        for holders in self._holders.values():
            for holder in [h for h in holders if attempt_of_holder(h) == attempt]:
                del holders[holder]


class AppendsNeverRefusedByLease(Invariant):
    name = "appends_never_refused_by_lease"
    races = ("R1", "R14")
    description = "No append is ever refused because a compression lease is held."

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "append.failed" and any(word in str(event.fields.get("error")) for word in LEASE_REFUSALS):
            return self.violation(f"an append to {event.fields['session']} was refused: {event.fields['error']}", event)
        return None


class LeaseReleasedWithinTtl(Invariant):
    name = "lease_released_within_ttl"
    races = ("R1", "R25")
    description = "Once its attempt has ended, a lease is never refreshed again, and is released or lapses within one TTL."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._ended: dict[str, HistoryEvent] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "compaction.finished":
            self._ended[event.fields["attempt"]] = event
        elif event.kind == "lease.refreshed":
            ended = self._ended.get(attempt_of_holder(event.fields["holder"]) or "")
            if ended is not None:
                return self.violation(f"{event.fields['holder']} was refreshed after its attempt ended", ended, event)
        return None

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        store, ttl = self.system.store, self.system.config.lease_ttl_s
        for session in store.session_ids():
            row = store.lease_row(session)
            ended = None if row is None else self._ended.get(attempt_of_holder(row.holder) or "")
            if ended is not None and row.expires_at > ended.time + ttl + 1e-9:
                return self.violation(
                    f"{row.holder} still holds {session}'s lease until {row.expires_at:g}s, more than one TTL after its attempt ended",
                    ended,
                )
        return None


class DeadHolderReclaimable(Invariant):
    name = "dead_holder_reclaimable"
    races = ("R24",)
    description = "A lease whose holder's process is provably dead never makes another attempt sit out."

    def __init__(self, system) -> None:
        super().__init__(system)
        # Dead pids come from the history (process.crashed), not from the reference's own process table: a
        # table that forgot a kill would otherwise blind this check to the very bug it is meant to catch.
        self._dead: dict[int, HistoryEvent] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "process.crashed":
            self._dead.setdefault(int(event.fields["pid"]), event)
            return None
        if event.kind != "lease.contended":
            return None
        row = self.system.store.lease_row(event.fields["session"])
        pid = None if row is None else _pid_of_holder(row.holder)
        if pid is not None and pid in self._dead:
            return self.violation(f"{event.fields['holder']} sat out behind {row.holder}, whose process is dead", self._dead[pid], event)
        return None


_HOLDER_PID = re.compile(r"(?:^|:)pid=(\d+)(?::|$)")


def _pid_of_holder(holder: str) -> int | None:
    match = _HOLDER_PID.search(holder)
    return None if match is None else int(match.group(1))


class CancelledAttemptNeverAcquires(Invariant):
    name = "cancelled_attempt_never_acquires"
    races = ("R3",)
    description = "An attempt whose fence a cancel has already won never takes the lease."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._cancelled: dict[str, HistoryEvent] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "fence.cancel_won":
            self._cancelled.setdefault(fields["attempt"], event)
        elif event.kind == "lease.acquired":
            cancelled = self._cancelled.get(attempt_of_holder(fields["holder"]) or "")
            if cancelled is not None:
                return self.violation(
                    f"{fields['holder']} took {fields['session']}'s lease after a cancel had won its fence", cancelled, event,
                )
        elif event.kind == "process.crashed":
            # a restarted process numbers its attempts from 1 again
            self._cancelled = {a: e for a, e in self._cancelled.items() if a.rsplit(".", 1)[0] != fields["process"]}
        return None


class RefresherToleratesBlips(Invariant):
    name = "refresher_tolerates_blips"
    races = ("R25",)
    description = "A lease refresher gives up only after its whole failure budget (ttl/interval) of consecutive missed refreshes, never on a blip."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._failures: dict[str, HistoryEvent] = {}  # holder -> its latest refresh_failed (the consecutive count)

    def on_event(self, event: HistoryEvent) -> Violation | None:
        holder = event.fields.get("holder")
        if event.kind == "lease.refresh_failed":
            self._failures[holder] = event
        elif event.kind == "lease.refreshed":
            self._failures.pop(holder, None)
        elif event.kind == "lease.expired_giveup":
            budget = self.system.config.refresh_failure_budget
            failed = self._failures.get(holder)
            count = 0 if failed is None else failed.fields["failures"]
            if count < budget:
                return self.violation(
                    f"{holder}'s refresher gave up after {count} consecutive missed refresh(es); its budget is {budget}",
                    failed, event,
                )
        return None


class RefreshExtendsOwnRow(Invariant):
    name = "refresh_extends_own_row"
    races = ("R3", "R25")
    description = "A lease refresh only ever extends the refresher's own row: it never re-creates a released row or takes over another holder's."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._owner: dict[str, HistoryEvent] = {}  # session -> the event that gave the row its current owner

    def on_event(self, event: HistoryEvent) -> Violation | None:
        kind, fields = event.kind, event.fields
        if kind == "lease.acquired":
            self._owner[fields["session"]] = event
        elif kind == "lease.released" and fields.get("held"):
            self._owner.pop(fields["session"], None)
        elif kind == "lease.refreshed":
            owner = self._owner.get(fields["session"])
            if owner is None or owner.fields["holder"] != fields["holder"]:
                whose = "a row released before" if owner is None else f"the row of {owner.fields['holder']}"
                return self.violation(f"{fields['holder']}'s refresh of {fields['session']}'s lease took over {whose}", owner, event)
        return None


COMMITTED = {"commit.archived": "session", "commit.published": "parent"}


class CommitHoldsLease(Invariant):
    name = "commit_holds_lease"
    races = ("R25",)
    description = "A commit transaction lands only while its attempt holds an unexpired lease on the session it commits."

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind not in COMMITTED:
            return None
        session, attempt = event.fields[COMMITTED[event.kind]], event.fields["attempt"]
        row = self.system.store.lease_row(session)
        if row is None or attempt_of_holder(row.holder) != attempt or row.expires_at <= event.time:
            held = "no lease row" if row is None else f"the lease row of {row.holder}, expiring at {row.expires_at:g}s"
            return self.violation(f"attempt {attempt} committed ({event.kind}) on {session} while it found {held}", event)
        return None


class RetryNeverOverlapsLiveWorker(Invariant):
    name = "retry_never_overlaps_live_worker"
    races = ("R25",)
    description = (
        "After a total-ceiling timeout, no other attempt takes the session's lease while the timed-out worker still "
        "runs and its lease has not lapsed (its refresher gave up, or a TTL passed since its last renewal: a "
        "suspended process)."
    )

    def __init__(self, system) -> None:
        super().__init__(system)
        self._session_of: dict[str, str] = {}  # attempt -> the session whose lease it took
        self._live: dict[str, HistoryEvent] = {}  # attempt -> its ceiling timeout, until its worker has finished
        self._renewed: dict[str, float] = {}  # attempt -> when it last acquired or refreshed its lease

    def on_event(self, event: HistoryEvent) -> Violation | None:
        kind, fields = event.kind, event.fields
        attempt = fields.get("attempt") or attempt_of_holder(fields.get("holder") or "")
        if kind == "lease.refreshed":
            self._renewed[attempt] = event.time
        elif kind == "lease.acquired":
            ttl = self.system.config.lease_ttl_s
            for other, timed_out in self._live.items():
                lapsed = self._renewed.get(other, -math.inf) + ttl <= event.time
                if other != attempt and self._session_of.get(other) == fields["session"] and not lapsed:
                    return self.violation(
                        f"{fields['holder']} took {fields['session']}'s lease while {other}, timed out at the ceiling, was still running",
                        timed_out, event,
                    )
            self._session_of[attempt] = fields["session"]
            self._renewed[attempt] = event.time
        elif kind == "host.timeout" and fields.get("budget") == "ceiling" and attempt in self._session_of:
            self._live[attempt] = event
        elif kind in ("compaction.finished", "lease.expired_giveup"):
            self._live.pop(attempt, None)
        elif kind == "process.crashed":
            process = fields["process"]
            self._live = {a: e for a, e in self._live.items() if a.rsplit(".", 1)[0] != process}
        return None


class SummaryStartsUnderLease(Invariant):
    name = "summary_starts_under_lease"
    races = ("R3", "R19")
    description = "An attempt starts its summary only while it holds the session's lease (acquired and not yet released)."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._holding: set[str] = set()

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "lease.acquired":
            self._holding.add(attempt_of_holder(event.fields["holder"]))
        elif event.kind == "lease.released":
            self._holding.discard(attempt_of_holder(event.fields["holder"]))
        elif event.kind == "compaction.summary_started" and event.fields.get("attempt") not in self._holding:
            return self.violation(f"attempt {event.fields.get('attempt')} started its summary without holding the lease", event)
        return None


class AbandonedAttemptFreesLease(Invariant):
    name = "abandoned_attempt_frees_lease"
    races = ("R1", "R3", "R25")
    description = (
        "No attempt sits out behind the lease of an attempt that has finished, or whose host has returned from an "
        "idle timeout on it, unless releasing that lease failed (only the total ceiling keeps a live worker's lease)."
    )

    def __init__(self, system) -> None:
        super().__init__(system)
        self._idle_timeouts: set[str] = set()
        self._abandoned: dict[str, HistoryEvent] = {}  # attempt -> the event after which it holds nothing
        self._release_failed: set[str] = set()  # holders whose release raised: their row may stay until its TTL

    def on_event(self, event: HistoryEvent) -> Violation | None:
        kind, fields = event.kind, event.fields
        attempt = fields.get("attempt")
        if kind == "host.timeout" and fields.get("budget") == "idle":
            self._idle_timeouts.add(attempt)
        elif kind == "compaction.finished" or (kind == "host.returned" and attempt in self._idle_timeouts):
            self._abandoned.setdefault(attempt, event)
        elif kind == "lease.release_failed":
            self._release_failed.add(fields["holder"])
        elif kind == "process.crashed":
            # a restarted process numbers its attempts from 1 again; a dead holder is dead_holder_reclaimable's
            process = fields["process"]
            self._abandoned = {a: e for a, e in self._abandoned.items() if a.rsplit(".", 1)[0] != process}
        elif kind == "lease.contended":
            row = self.system.store.lease_row(fields["session"])
            owner = None if row is None else attempt_of_holder(row.holder)
            if owner in self._abandoned and row.holder not in self._release_failed:
                return self.violation(
                    f"{fields['holder']} sat out behind the lease of {owner}, which its attempt had left behind "
                    f"({self._abandoned[owner].kind})", self._abandoned[owner], event,
                )
        return None
