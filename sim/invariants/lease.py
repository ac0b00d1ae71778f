"""Invariants of the compression lease: mutual exclusion, holder-qualified release, bounded lifetime."""

from __future__ import annotations

import math
from collections.abc import Sequence

from contract.events import (
    AppendFailed,
    CommitArchived,
    CommitPublished,
    CompactionFinished,
    CompactionSummaryStarted,
    CompactionWatermark,
    Event,
    FenceCancelWon,
    FenceRevoked,
    HostReturned,
    HostTimeout,
    LeaseAcquired,
    LeaseAcquireFailed,
    LeaseContended,
    LeaseExpiredGiveup,
    LeaseRefreshed,
    LeaseRefreshFailed,
    LeaseReleased,
    LeaseReleaseFailed,
    StallFired,
)
from contract.history import HistoryEvent
from contract.ids import AttemptId, HolderId, SessionId
from sim.invariants.facts import CRASHES, AttemptTable, job_attempt
from sim.invariants.invariant import Invariant, Violation, handles, per_run

LEASE_REFUSALS = ("Lease", "Busy", "InProgress")
RELEASE_POINT = "db.release_lease"  # the store call that frees a lease


class LeaseMutualExclusion(Invariant):
    """At most one live holder per session lease; a release only ever frees the releaser's own row."""

    name = "lease_mutual_exclusion"
    settings = frozenset({'lease_ttl_s'})
    races = ("R3", "R19", "R25")

    _holders: dict[SessionId, dict[HolderId, tuple[float, HistoryEvent[Event]]]] = per_run(dict)
    _row_owner: dict[SessionId, HolderId] = per_run(dict)

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> Violation | None:
        return self._took(event.session, event.holder, record)

    @handles(LeaseAcquireFailed)
    def acquire_failed(self, event: LeaseAcquireFailed, record: HistoryEvent[LeaseAcquireFailed]) -> Violation | None:
        """An acquire that raised is indeterminate: a failure after its COMMIT leaves the row taken (over a dead or
        expired holder's, too), though the attempt takes itself for the loser. The store tells: holder ids are unique
        per attempt, so a row naming the holder is the one its transaction wrote; the holder owns it, and its sit-out
        release frees its own row."""
        row = self.system.store.lease_row(event.session)
        if row is not None and row.holder == event.holder:
            return self._took(event.session, event.holder, record)
        return None

    def _took(self, session: SessionId, holder: HolderId, record: HistoryEvent[Event]) -> Violation | None:
        clash = self._live_other(session, holder, record.time)
        self._holders.setdefault(session, {})[holder] = (record.time, record)
        self._row_owner[session] = holder
        if clash is not None:
            other, taken = clash
            return self.violation(f"{holder} acquired {session}'s lease while {other} still held it", taken, record)
        return None

    @handles(LeaseRefreshed)
    def refreshed(self, event: LeaseRefreshed, record: HistoryEvent[LeaseRefreshed]) -> None:
        holders = self._holders.setdefault(event.session, {})
        holders[event.holder] = (record.time, holders.get(event.holder, (0.0, record))[1])

    @handles(LeaseReleased)
    def released(self, event: LeaseReleased, record: HistoryEvent[LeaseReleased]) -> Violation | None:
        self._holders.setdefault(event.session, {}).pop(event.holder, None)
        if not event.held:
            return None
        owner = self._row_owner.get(event.session)
        if owner is not None and owner != event.holder:
            return self.violation(f"{event.holder}'s release freed the lease row of {owner} (ABA)", record)
        self._row_owner.pop(event.session, None)
        return None

    @handles(LeaseReleaseFailed)
    def release_failed(self, event: LeaseReleaseFailed, record: HistoryEvent[LeaseReleaseFailed]) -> None:
        """A release that raised is indeterminate: its transaction may have committed before the error (a failure
        after the commit). The store tells: if the row no longer names the holder, the release took effect."""
        row = self.system.store.lease_row(event.session)
        if row is None or row.holder != event.holder:
            self._holders.setdefault(event.session, {}).pop(event.holder, None)
            if self._row_owner.get(event.session) == event.holder:
                del self._row_owner[event.session]

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> None:
        """An attempt that has ended holds nothing any more (its row, if left, will expire)."""
        for holders in self._holders.values():
            for holder in [h for h in holders if h.attempt == event.attempt]:
                del holders[holder]

    def _live_other(self, session: SessionId, holder: HolderId, now: float) -> tuple[HolderId, HistoryEvent[Event]] | None:
        """Another live holder of the session's lease, and the record by which it took it, if any."""
        ttl = self.system.config.lease_ttl_s
        for other, (renewed, acquired) in self._holders.get(session, {}).items():
            if other != holder and renewed + ttl > now and not self.system.holder_is_dead(other):
                return other, acquired
        return None


class AppendsNeverRefusedByLease(Invariant):
    """No append is ever refused because a compression lease is held."""

    name = "appends_never_refused_by_lease"
    races = ("R1", "R14")

    @handles(AppendFailed)
    def append_failed(self, event: AppendFailed, record: HistoryEvent[AppendFailed]) -> Violation | None:
        if any(word in event.error for word in LEASE_REFUSALS):
            return self.violation(f"an append to {event.session} was refused: {event.error}", record)
        return None


class LeaseReleasedWithinTtl(Invariant):
    """Once its attempt has ended, a lease is never refreshed again, and is released or lapses within one TTL."""

    name = "lease_released_within_ttl"
    settings = frozenset({'lease_ttl_s'})
    holder_names_attempt = True
    races = ("R1", "R25")

    _ended: dict[AttemptId, HistoryEvent[Event]] = per_run(dict)

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> None:
        self._ended[event.attempt] = record

    @handles(LeaseRefreshed)
    def refreshed(self, event: LeaseRefreshed, record: HistoryEvent[LeaseRefreshed]) -> Violation | None:
        ended = None if event.holder.attempt is None else self._ended.get(event.holder.attempt)
        if ended is not None:
            return self.violation(f"{event.holder} was refreshed after its attempt ended", ended, record)
        return None

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        store, ttl = self.system.store, self.system.config.lease_ttl_s
        for session in store.session_ids():
            row = store.lease_row(session)
            attempt = None if row is None else HolderId(row.holder).attempt
            ended = None if attempt is None else self._ended.get(attempt)
            if row is not None and ended is not None and row.expires_at > ended.time + ttl + 1e-9:
                return self.violation(
                    f"{row.holder} still holds {session}'s lease until {row.expires_at:g}s, more than one TTL after its attempt ended",
                    ended,
                )
        return None


class FailedReleaseRetried(Invariant):
    """A lease release that failed while its attempt's worker still ran (a Ctrl+C's or a timed-out host's) is tried
    again by the time that worker exits: a failed release is excused, a forgotten one is not.

    The lease checks excuse the row a failed release leaves (no code frees it sooner than the store allows), but the
    attempt owes another try: its worker's exit releases its lease on every path. A reference that forgot the failed
    release (took the lease for released) left the row blocking every other attempt on the session for a whole TTL,
    and every check excused it as the failure it began with.
    """

    name = "failed_release_retried"
    races = ("R3", "R25")
    learns = CRASHES

    _failed: AttemptTable[AttemptId, HistoryEvent[LeaseReleaseFailed]] = per_run(AttemptTable)  # attempt -> its lease's failed release, not yet retried

    @handles(LeaseReleaseFailed)
    def release_failed(self, event: LeaseReleaseFailed, record: HistoryEvent[LeaseReleaseFailed]) -> None:
        attempt = event.holder.attempt
        if attempt is None or job_attempt(record.task) == attempt:
            return  # the worker's own release: its exit is the last chance there is
        self._failed.setdefault(attempt, record)

    @handles(LeaseReleased)
    def released(self, event: LeaseReleased, record: HistoryEvent[LeaseReleased]) -> None:
        if event.holder.attempt is not None:
            self._failed.pop(event.holder.attempt, None)

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> Violation | None:
        failed = self._failed.pop(event.attempt, None)
        if failed is None:
            return None
        return self.violation(f"the failed release of {failed.event.holder} was never tried again, though its "
                              f"attempt's worker exited after it", failed, record)


class DeadHolderReclaimable(Invariant):
    """A lease whose holder's process is provably dead never makes another attempt sit out."""

    name = "dead_holder_reclaimable"
    holder_names_attempt = True
    races = ("R24",)
    learns = CRASHES

    @handles(LeaseContended)
    def contended(self, event: LeaseContended, record: HistoryEvent[LeaseContended]) -> Violation | None:
        row = self.system.store.lease_row(event.session)
        crash = None if row is None else self.facts.crash_of(HolderId(row.holder))
        if row is not None and crash is not None:
            return self.violation(f"{event.holder} sat out behind {row.holder}, whose process is dead", crash, record)
        return None


class CancelledAttemptNeverAcquires(Invariant):
    """An attempt whose fence a cancel has already won never takes the lease."""

    name = "cancelled_attempt_never_acquires"
    holder_names_attempt = True
    races = ("R3",)
    learns = CRASHES

    _cancelled: AttemptTable[AttemptId, HistoryEvent[Event]] = per_run(AttemptTable)

    @handles(FenceCancelWon)
    def cancel_won(self, event: FenceCancelWon, record: HistoryEvent[FenceCancelWon]) -> None:
        self._cancelled.setdefault(event.attempt, record)

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> Violation | None:
        cancelled = None if event.holder.attempt is None else self._cancelled.get(event.holder.attempt)
        if cancelled is not None:
            return self.violation(f"{event.holder} took {event.session}'s lease after a cancel had won its fence", cancelled, record)
        return None


class RefresherToleratesBlips(Invariant):
    """A lease refresher gives up only after its whole failure budget (ttl/interval) of consecutive missed refreshes,
    never on a blip."""

    name = "refresher_tolerates_blips"
    settings = frozenset({'refresh_failure_budget'})
    races = ("R25",)

    # holder -> the refreshes it missed since its last one that landed, counted here from the history (the
    # refresher's own count is what is on trial)
    _missed: dict[HolderId, list[HistoryEvent[Event]]] = per_run(dict)

    @handles(LeaseRefreshFailed)
    def refresh_failed(self, event: LeaseRefreshFailed, record: HistoryEvent[LeaseRefreshFailed]) -> None:
        self._missed.setdefault(event.holder, []).append(record)

    @handles(LeaseRefreshed)
    def refreshed(self, event: LeaseRefreshed, record: HistoryEvent[LeaseRefreshed]) -> None:
        self._missed.pop(event.holder, None)

    @handles(LeaseExpiredGiveup)
    def gave_up(self, event: LeaseExpiredGiveup, record: HistoryEvent[LeaseExpiredGiveup]) -> Violation | None:
        budget = self.system.config.refresh_failure_budget
        missed = self._missed.get(event.holder, [])
        if len(missed) < budget:
            return self.violation(
                f"{event.holder}'s refresher gave up after {len(missed)} consecutive missed refresh(es); its budget is {budget}",
                *missed, record,
            )
        return None


class RefreshExtendsOwnRow(Invariant):
    """A lease refresh only ever extends the refresher's own row: it never re-creates a released row or takes over
    another holder's."""

    name = "refresh_extends_own_row"
    races = ("R3", "R25")

    _owner: dict[SessionId, HistoryEvent[LeaseAcquired]] = per_run(dict)  # session -> the lease.acquired that gave the row its current owner

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        self._owner[event.session] = record

    @handles(LeaseReleased)
    def released(self, event: LeaseReleased, record: HistoryEvent[LeaseReleased]) -> None:
        if event.held:
            self._owner.pop(event.session, None)

    @handles(LeaseRefreshed)
    def refreshed(self, event: LeaseRefreshed, record: HistoryEvent[LeaseRefreshed]) -> Violation | None:
        owner = self._owner.get(event.session)
        owner_holder = None if owner is None else owner.event.holder
        if owner_holder != event.holder:
            whose = "a row released before" if owner is None else f"the row of {owner_holder}"
            return self.violation(f"{event.holder}'s refresh of {event.session}'s lease took over {whose}", owner, record)
        return None


class CommitHoldsLease(Invariant):
    """A commit transaction lands only while its attempt holds an unexpired lease on the session it commits."""

    name = "commit_holds_lease"
    holder_names_attempt = True
    races = ("R25",)

    @handles(CommitArchived, CommitPublished)
    def committed(self, event: CommitArchived | CommitPublished, record: HistoryEvent[Event]) -> Violation | None:
        session = event.session if isinstance(event, CommitArchived) else event.parent  # a rotation holds its parent's lease
        row = self.system.store.lease_row(session)
        if row is None or HolderId(row.holder).attempt != event.attempt or row.expires_at <= record.time:
            held = "no lease row" if row is None else f"the lease row of {row.holder}, expiring at {row.expires_at:g}s"
            return self.violation(f"attempt {event.attempt} committed ({record.kind}) on {session} while it found {held}", record)
        return None


class RetryNeverOverlapsLiveWorker(Invariant):
    """After a total-ceiling timeout, no other attempt takes the session's lease while the timed-out worker still runs
    and its lease has neither been released by the worker itself nor lapsed (its refresher gave up, or a TTL passed
    since its last renewal: a suspended process), unless a Ctrl+C stopped the attempt while its host still waited on it
    (its lease is then the Ctrl+C's to free).

    A Ctrl+C that won the fence while the host still waited is the user's stop, and R1 frees the stopped worker's
    lease by its grace's end (hard_cancel_frees_lease), before the ceiling timeout or after it: the ceiling path keeps
    a live worker's lease from a retry, not from the user's stop.

    A worker that released its lease from its own task has left its work under the lease (it returns, refused or
    done, right after): a retry taking the freed lease in the instant before its CompactionFinished overlaps
    nothing. A release from any other task (the host's hook at the ceiling) frees the lease of a worker still
    running, and is the overlap R25 forbids.
    """

    name = "retry_never_overlaps_live_worker"
    settings = frozenset({'lease_ttl_s'})
    holder_names_attempt = True
    races = ("R25",)
    learns = CRASHES

    _session_of: dict[AttemptId | None, SessionId] = per_run(dict)  # attempt -> the session whose lease it took
    _live: AttemptTable[AttemptId, HistoryEvent[Event]] = per_run(AttemptTable)  # attempt -> its ceiling timeout, until its worker has finished
    _renewed: dict[AttemptId | None, float] = per_run(dict)  # attempt -> when it last acquired or refreshed its lease
    _hard_stopped: set[AttemptId] = per_run(set)  # attempts whose fence a Ctrl+C's hard cancel won
    _host_returned: set[AttemptId] = per_run(set)  # attempts whose host has returned: a Ctrl+C no longer stops them

    @handles(LeaseRefreshed)
    def refreshed(self, event: LeaseRefreshed, record: HistoryEvent[LeaseRefreshed]) -> None:
        self._renewed[event.holder.attempt] = record.time

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> Violation | None:
        attempt = event.holder.attempt
        ttl = self.system.config.lease_ttl_s
        for other, timed_out in self._live.items():
            lapsed = self._renewed.get(other, -math.inf) + ttl <= record.time
            if other != attempt and self._session_of.get(other) == event.session and not lapsed:
                return self.violation(
                    f"{event.holder} took {event.session}'s lease while {other}, timed out at the ceiling, was still running",
                    timed_out, record,
                )
        self._session_of[attempt] = event.session
        self._renewed[attempt] = record.time
        return None

    @handles(FenceCancelWon)
    def cancel_won(self, event: FenceCancelWon, record: HistoryEvent[FenceCancelWon]) -> None:
        if event.hard and event.attempt not in self._host_returned:
            self._hard_stopped.add(event.attempt)
            self._live.pop(event.attempt, None)

    @handles(HostReturned)
    def host_returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> None:
        self._host_returned.add(event.attempt)

    @handles(LeaseReleased)
    def released(self, event: LeaseReleased, record: HistoryEvent[LeaseReleased]) -> None:
        attempt = event.holder.attempt
        if attempt is not None and job_attempt(record.task) == attempt:
            self._live.pop(attempt, None)

    @handles(HostTimeout)
    def timed_out(self, event: HostTimeout, record: HistoryEvent[HostTimeout]) -> None:
        if event.budget == "ceiling" and event.attempt in self._session_of and event.attempt not in self._hard_stopped:
            self._live[event.attempt] = record

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> None:
        self._live.pop(event.attempt, None)
        self._hard_stopped.discard(event.attempt)
        self._host_returned.discard(event.attempt)

    @handles(LeaseExpiredGiveup)
    def gave_up(self, event: LeaseExpiredGiveup, record: HistoryEvent[LeaseExpiredGiveup]) -> None:
        if event.holder.attempt is not None:
            self._live.pop(event.holder.attempt, None)


class SummaryStartsUnderLease(Invariant):
    """An attempt starts its summary only while it holds the session's lease (acquired and not yet released)."""

    name = "summary_starts_under_lease"
    holder_names_attempt = True
    races = ("R3", "R19")

    _holding: set[AttemptId | None] = per_run(set)

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        self._holding.add(event.holder.attempt)

    @handles(LeaseReleased)
    def released(self, event: LeaseReleased, record: HistoryEvent[LeaseReleased]) -> None:
        self._holding.discard(event.holder.attempt)

    @handles(CompactionSummaryStarted)
    def summary_started(self, event: CompactionSummaryStarted, record: HistoryEvent[CompactionSummaryStarted]) -> Violation | None:
        if event.attempt not in self._holding:
            return self.violation(f"attempt {event.attempt} started its summary without holding the lease", record)
        return None


class AbandonedAttemptFreesLease(Invariant):
    """No attempt sits out behind the lease of an attempt that has finished (and whose timed-out host, which frees the
    lease it was left, has returned), or whose host has returned from an idle timeout on it, unless releasing that lease
    failed (only the total ceiling keeps a live worker's lease); nor behind the lease of an attempt whose unwinding host
    revoked it with no commit or setup holding the fence lock, unless that host frees it (the store may be slow to).

    A worker that outlives its host's timeout leaves the lease to the host, which frees it only after recording the
    timeout (late-worker-leaves-lease-to-host, timeout-recorded-before-release): until that host returns, a sit-out
    behind the finished attempt's row is the design keeping the stalled route closed.

    An unwinding host's revoke frees the lease at once when no commit or lease setup holds the fence lock
    (revoke-on-host-unwind), since the worker may stay in a provider call long after. A sit-out behind that row is
    judged when the row goes: freed by the unwinding host itself, in the revoke's own moment (a lock just handed to
    the worker or a Ctrl+C, whose step frees it), or by the worker while the host's release was held up in the store,
    the wait was the store's; freed later by anyone else, it was the lease outliving its attempt. A worker's own
    release held up in the store is such a wait too (a lease setup whose acquire raised after its COMMIT frees the
    half-taken row itself: its host was never handed a release hook).
    """

    name = "abandoned_attempt_frees_lease"
    holder_names_attempt = True
    races = ("R1", "R3", "R25")
    learns = CRASHES

    _idle_timeouts: set[AttemptId] = per_run(set)
    _host_timed_out: AttemptTable[AttemptId, HistoryEvent[Event]] = per_run(AttemptTable)  # attempt -> its host's timeout, until the host returns
    _finished: AttemptTable[AttemptId, HistoryEvent[Event]] = per_run(AttemptTable)  # attempt -> its finish, while its timed-out host has not returned
    _abandoned: AttemptTable[AttemptId, HistoryEvent[Event]] = per_run(AttemptTable)  # attempt -> the event after which it holds nothing
    _release_failed: set[HolderId] = per_run(set)  # holders whose release raised: their row may stay until its TTL
    _set_up: AttemptTable[AttemptId, HolderId] = per_run(AttemptTable)  # attempts past their lease setup, still holding their lease
    _revoked: AttemptTable[HolderId, HistoryEvent[Event]] = per_run(AttemptTable)  # such a lease whose unwinding host revoked it with the lock free
    _sat_out: AttemptTable[HolderId, HistoryEvent[LeaseContended]] = per_run(AttemptTable)  # the first sit-out behind a revoked lease, until its release
    _release_held_up: set[HolderId] = per_run(set)  # revoked leases whose host's release the store held up
    _acquired: AttemptTable[AttemptId, HolderId] = per_run(AttemptTable)  # attempts in their lease setup, the lease won
    _releasing: AttemptTable[AttemptId, HistoryEvent[Event]] = per_run(AttemptTable)  # attempts whose worker's release the store holds up

    @handles(HostTimeout)
    def timed_out(self, event: HostTimeout, record: HistoryEvent[HostTimeout]) -> None:
        self._host_timed_out[event.attempt] = record
        if event.budget == "idle":
            self._idle_timeouts.add(event.attempt)

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> None:
        if event.attempt in self._host_timed_out:
            self._finished.setdefault(event.attempt, record)
        else:
            self._abandoned.setdefault(event.attempt, record)

    @handles(HostReturned)
    def host_returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> None:
        self._host_timed_out.pop(event.attempt, None)
        if event.attempt in self._idle_timeouts or self._finished.pop(event.attempt, None) is not None:
            self._abandoned.setdefault(event.attempt, record)

    @handles(LeaseAcquired)
    def acquired(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        if event.holder.attempt is not None:
            self._set_up.pop(event.holder.attempt, None)
            self._acquired[event.holder.attempt] = event.holder

    @handles(CompactionWatermark)
    def set_up(self, event: CompactionWatermark, record: HistoryEvent[CompactionWatermark]) -> None:
        """The watermark read is the last step under the setup lock: from here the lock is free until a commit."""
        holder = self._acquired.pop(event.attempt, None)
        if holder is not None:
            self._set_up[event.attempt] = holder

    @handles(FenceRevoked)
    def revoked(self, event: FenceRevoked, record: HistoryEvent[FenceRevoked]) -> None:
        holder = self._set_up.get(event.attempt)
        if holder is not None and not event.commit_in_flight:
            self._revoked[holder] = record

    @handles(StallFired)
    def stalled(self, event: StallFired, record: HistoryEvent[StallFired]) -> None:
        if event.point == RELEASE_POINT:
            self._release_held_up.update(holder for holder, revoke in self._revoked.items() if revoke.task == record.task)
            worker = job_attempt(record.task)
            if worker is not None:
                self._releasing[worker] = record

    @handles(LeaseReleased, LeaseReleaseFailed)
    def released(self, event: LeaseReleased | LeaseReleaseFailed, record: HistoryEvent[LeaseReleased | LeaseReleaseFailed]) -> Violation | None:
        if isinstance(event, LeaseReleaseFailed):
            self._release_failed.add(event.holder)
        attempt = event.holder.attempt
        if attempt is not None and job_attempt(record.task) == attempt:
            self._releasing.pop(attempt, None)
        if attempt is not None and self._set_up.get(attempt) == event.holder:
            del self._set_up[attempt]
        revoke = self._revoked.pop(event.holder, None)
        sat_out = self._sat_out.pop(event.holder, None)
        held_up = event.holder in self._release_held_up
        self._release_held_up.discard(event.holder)
        if revoke is None or sat_out is None or held_up or record.task == revoke.task or record.time <= revoke.time:
            return None
        return self._outlived(event.holder, revoke, sat_out, record)

    def _outlived(self, holder: HolderId, revoke: HistoryEvent[Event], sat_out: HistoryEvent[LeaseContended], *more: HistoryEvent[Event]) -> Violation:
        return self.violation(
            f"{sat_out.event.holder} sat out behind the lease of {holder.attempt}, whose unwinding host had revoked "
            "it with the fence lock free and did not free it", revoke, sat_out, *more,
        )

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        """A sit-out behind a revoked lease that nobody freed by the end: the lease outlived its attempt."""
        holder = next((holder for holder in self._sat_out if holder not in self._release_held_up), None)
        return None if holder is None else self._outlived(holder, self._revoked[holder], self._sat_out[holder])

    @handles(LeaseContended)
    def contended(self, event: LeaseContended, record: HistoryEvent[LeaseContended]) -> Violation | None:
        row = self.system.store.lease_row(event.session)
        if row is None:
            return None
        holder = HolderId(row.holder)
        owner = holder.attempt
        if holder in self._revoked:
            self._sat_out.setdefault(holder, record)
        if owner is not None and owner in self._abandoned and holder not in self._release_failed and owner not in self._releasing:
            return self.violation(
                f"{event.holder} sat out behind the lease of {owner}, which its attempt had left behind "
                f"({self._abandoned[owner].kind})", self._abandoned[owner], record,
            )
        return None
