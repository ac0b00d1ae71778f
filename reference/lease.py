"""The per-session compression lease as one attempt holds it: holder ids, acquire, release, refresher.

The lease only fences compressor against compressor (transcript appends never look at it). Release is
holder-qualified and idempotent, so a late or repeated release can never free somebody else's lease.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from contract.events import LeaseAcquired, LeaseContended, LeaseExpiredGiveup, LeaseRefreshed, LeaseRefreshFailed, LeaseReleased, LeaseReleaseFailed
from contract.ids import HolderId, SessionId
from contract.points import LEASE_REFRESH
from contract.runtime import CancelScopeLike, Runtime
from reference.config import CompactionConfig
from reference.db import Database


@dataclass(eq=False)
class Process:
    """An OS process: agents in one process share a compression pool and an attempt counter.

    A simulated process has a name, a pid and its start (which tells it from a later process on its pid); a
    real one (`reference.identity.HostProcesses`) also names its host and a random nonce.
    """

    name: str
    pid: int
    host: str | None = None
    nonce: str | None = None
    start_ticks: int | None = None
    attempts: int = 0

    def next_attempt(self) -> int:
        """Attempt numbers are unique per process, so two agents never mint the same holder id."""
        self.attempts += 1
        return self.attempts

    def holder(self, attempt: int) -> HolderId:
        """The lease holder id of one attempt: names the process (host, pid, start, nonce when real) and the attempt."""
        return HolderId.of(self.name, self.pid, attempt, host=self.host, start_ticks=self.start_ticks, nonce=self.nonce)


class ProcessProbe(Protocol):
    """The store's dead-holder probe (R24): simulated by `ProcessTable`, real in `reference.identity`."""

    def spawn(self, name: str) -> Process: ...

    def holder_is_dead(self, holder: str) -> bool: ...


def pid_runs_another_process(holder: HolderId, start_now: int | None) -> bool:
    """The holder's pid now belongs to a process started at another time: the kernel recycled it, the holder is gone.

    A pid alone cannot tell the holder from a stranger that got its pid; the start recorded in the holder id
    can. Any doubt (no start recorded, or the pid's start unreadable) answers no: the TTL then decides.
    """
    recorded = holder.fields.get("start", "")
    # FIX reused-pid-is-not-the-holder (R24): a live pid started after the holder is another process, so the holder is dead
    return recorded.isdigit() and start_now is not None and start_now != int(recorded)


@dataclass
class ProcessTable:
    """Which simulated processes run on this host; answers the store's dead-holder probe (R24).

    A process is its pid and its start (the table's count of spawns, standing in for the kernel's start time):
    a dead process's pid may be handed to a new one (`spawn(name, pid=...)`), a start never repeats.
    """

    _running: dict[int, int | None] = field(default_factory=dict)  # pid -> start of the process on it; None: dead
    _starts: int = 0

    def spawn(self, name: str, pid: int | None = None) -> Process:
        """A new process, on a fresh pid or on `pid`, a dead process's pid the kernel recycles."""
        if pid is not None and self._running.get(pid, 0) is not None:
            raise ValueError(f"pid {pid} is not a dead process's pid, so it cannot be recycled")
        pid = 100 + len(self._running) if pid is None else pid
        self._starts += 1
        self._running[pid] = self._starts
        return Process(name, pid, start_ticks=self._starts)

    def kill(self, process: Process) -> None:
        """Only the process itself dies: a later process on its recycled pid is not touched."""
        if self._running.get(process.pid) == process.start_ticks:
            self._running[process.pid] = None

    def holder_is_dead(self, holder: str) -> bool:
        """Dead: its pid runs nothing now, or a process started after it. An unknown pid or holder is alive."""
        holder_id = HolderId(holder)
        pid = holder_id.pid
        if pid is None or pid not in self._running:
            return False
        start_now = self._running[pid]
        return start_now is None or pid_runs_another_process(holder_id, start_now)


class Lease:
    """One attempt's hold on one session's compression lease."""

    def __init__(self, rt: Runtime, db: Database, session: SessionId, holder: HolderId, config: CompactionConfig) -> None:
        self._rt = rt
        self._db = db
        self.session = session
        self.holder = holder
        self._ttl_s = config.lease_ttl_s
        self._interval_s = config.refresh_interval_s
        self._failure_budget = config.refresh_failure_budget
        self._stopped = False  # no refresh may start or go on: released, or left to be freed by another
        self._maybe_held = False
        self._refresher: CancelScopeLike | None = None

    async def acquire(self, processes: ProcessProbe | None = None) -> bool:
        probe = None if processes is None else processes.holder_is_dead
        # FIX failed-acquire-releases-own-row (R3): an acquire that fails after its COMMIT may still have taken the row; the sit-out releases it
        self._maybe_held = True
        won = await self._db.call(
            "try_acquire_lease", self.session, self.holder, ttl_s=self._ttl_s, holder_is_dead=probe
        )
        self._maybe_held = won
        if won:
            self._rt.emit(LeaseAcquired(session=self.session, holder=self.holder))
        else:
            self._rt.emit(LeaseContended(session=self.session, holder=self.holder))
        return won

    async def release(self) -> None:
        """Holder-only and idempotent; stops the refresher first so it cannot outlive the release.

        A release whose transaction failed is retried by the next call (the attempt's own exit, after a
        failed hook release); meanwhile the stopped refresher lets the row self-expire within one TTL.
        """
        self.stop_refresher()
        if not self._maybe_held:
            return
        try:
            with self._rt.cancel_scope(shield=True):
                released = await self._db.call("release_lease", self.session, self.holder)
        except Exception as exc:
            self._rt.emit(LeaseReleaseFailed(session=self.session, holder=self.holder, error=repr(exc)))
            # FIX failed-release-retried (R3/R25): the row may still be ours; marked released, the attempt's own exit never retries and another sits out for a TTL
            return
        self._maybe_held = False
        self._rt.emit(LeaseReleased(session=self.session, holder=self.holder, held=released))

    def stop_refresher(self) -> None:
        """Stop refreshing but keep the row: whoever frees it later (the host's hook) finds it at most one TTL old."""
        self._stopped = True
        if self._refresher is not None:
            self._refresher.cancel()

    async def run_refresher(self) -> None:
        """Refresh now, then every interval; give up after the failure budget so the row self-expires.

        Runs as a child task of the attempt. Serialized with `release`: it registers its scope in the same
        step as it checks `stopped`, so no refresher ever starts on a released (or handed-over) lease.
        """
        with self._rt.cancel_scope() as scope:
            if self._stopped:
                return
            self._refresher = scope
            failures = 0
            while True:
                if await self._refresh_once():
                    failures = 0
                else:
                    failures += 1
                    self._rt.emit(LeaseRefreshFailed(session=self.session, holder=self.holder, failures=failures))
                    # FIX refresher-tolerates-blips (R25): one missed refresh is a blip; give up only after ttl/interval misses, within one TTL
                    if failures >= self._failure_budget:
                        self._rt.emit(LeaseExpiredGiveup(session=self.session, holder=self.holder))
                        return
                await self._rt.sleep(self._interval_s)

    async def _refresh_once(self) -> bool:
        try:
            await self._rt.checkpoint(LEASE_REFRESH)
            refreshed = await self._db.call("refresh_lease", self.session, self.holder, ttl_s=self._ttl_s)
        except Exception:  # a failed refresh is one missed refresh, not the end of the lease
            return False
        if refreshed:
            self._rt.emit(LeaseRefreshed(session=self.session, holder=self.holder))
        return bool(refreshed)

