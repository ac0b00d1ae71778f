"""Invariants of the compression lease: mutual exclusion, holder-qualified release, bounded lifetime."""

from __future__ import annotations

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

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind != "lease.contended":
            return None
        row = self.system.store.lease_row(event.fields["session"])
        if row is not None and self.system.holder_is_dead(row.holder):
            return self.violation(f"{event.fields['holder']} sat out behind {row.holder}, whose process is dead", event)
        return None
