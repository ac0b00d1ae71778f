"""The host's timed wait on one pooled attempt (§2 step 11): progress-aware idle, total ceiling, safe timeout.

The host never kills the worker. On a timeout it tries to win the fence; if the worker already holds a
commit, the host waits for that commit (loudly) instead of abandoning it. Any other way out of the wait
(cancellation, an error) revokes commit admission, so an unfenced worker cannot commit behind its back.
"""

from __future__ import annotations

from contract.events import HostCommitOverrun, HostLeaseRetained, HostTimeout, HostUnwind
from contract.ids import SessionId
from contract.points import HOST_WAIT
from contract.runtime import Runtime
from contract.vocabulary import JOB_TASK
from reference.activity import TIMED_OUT, write_label
from reference.compactor import CompactionJob, Outcome
from reference.config import CompactionConfig
from reference.cooldown import Cooldowns
from reference.fence import CommitFence

IDLE = "idle"
CEILING = "ceiling"


class HostWait:
    def __init__(
        self, rt: Runtime, config: CompactionConfig, cooldowns: Cooldowns, job: CompactionJob, fence: CommitFence,
        session: SessionId,
    ) -> None:
        self._rt = rt
        self._config = config
        self._cooldowns = cooldowns
        self._job = job
        self._fence = fence
        self._session = session
        self._owed_record: str | None = None  # a timeout's budget while its backoff is owed and not yet being written

    async def run(self) -> Outcome:
        """Launch the job and return its outcome, or a timeout outcome once the attempt is fenced off."""
        handled = False
        try:
            outcome = await self._launch_and_wait()
            handled = True
            return outcome
        finally:
            if not handled:
                self._rt.emit(HostUnwind(attempt=self._fence.attempt))
                with self._rt.cancel_scope(shield=True):
                    # FIX owed-timeout-recorded-on-unwind (R2): a host cancelled from outside after its timeout, before its record, would free the lease with no backoff
                    await self._record_owed_timeout()
                    # FIX revoke-on-host-unwind (R5): an unwinding host must leave no worker that can still begin a commit
                    await self._fence.revoke_commit_admission()

    async def _launch_and_wait(self) -> Outcome:
        async with self._rt.open_nursery() as nursery:
            nursery.start_soon(self._launch, name=f"launch:{self._fence.attempt}")
            kind = await self._wait_within_budget()
            outcome = None if kind is None else await self._time_out(kind)
            if not self._job.done.is_set():
                nursery.cancel_scope.cancel()  # stop waiting; the worker runs on as a late worker
        if outcome is None:
            assert self._job.outcome is not None
            return self._job.outcome
        return outcome

    async def _launch(self) -> None:
        await self._rt.run_isolated(self._job.run, name=f"{JOB_TASK}{self._fence.attempt}")

    async def _wait_within_budget(self) -> str | None:
        """Wait for the job; the idle budget is charged from the last progress, not from the slice start."""
        config, fence = self._config, self._fence
        while True:
            await self._rt.checkpoint(HOST_WAIT)
            remaining = fence.deadline - self._rt.now()
            idle_left = config.idle_timeout_s - fence.seconds_since_progress()
            # FIX idle-charged-from-progress (R9): a full idle slice from its start lets silence stretch to ~2x idle
            slice_s = min(max(idle_left, config.min_wait_slice_s), remaining)
            with self._rt.move_on_after(max(slice_s, 0.0)):
                await self._job.done.wait()
            if self._job.done.is_set():
                return None
            if fence.deadline_exceeded():
                return CEILING
            if fence.seconds_since_progress() >= config.idle_timeout_s:
                return IDLE

    async def _time_out(self, kind: str) -> Outcome | None:
        """Fence the worker off; None when its commit had already been admitted (then its outcome stands)."""
        fence = self._fence
        self._rt.emit(HostTimeout(attempt=fence.attempt, budget=kind, since_progress_s=fence.seconds_since_progress()))
        stopped_at_timeout = fence.stop_pressed  # the order of a stop and the timeout is known now, not at the lock
        # FIX timeout-reaches-lease-setup (R8): a worker stalled in lease setup holds the fence lock; unmarked, it summarizes after the host gave up
        fence.give_up()
        if fence.given_up and not stopped_at_timeout:
            self._owed_record = kind  # no commit began and no stop came first: the backoff is owed, however this host ends
        # FIX ceiling-keeps-lease-for-live-worker (R25): at the ceiling the worker may still run; freeing its lease lets a retry overlap it
        release_now = kind != CEILING
        # FIX timeout-recorded-before-release (R2): a lease freed before the record lets another process re-enter the stalled route unwarned
        won = await self._cancel_or_join(release=False)
        if not won:
            return None
        # FIX stop-ordered-at-timeout (R2): a Ctrl+C pressed after the timeout may win the fence lock first; it must not erase the timeout
        user_stopped = stopped_at_timeout
        # FIX user-stop-is-not-a-timeout (R1): the user stopped this attempt first; a timeout record would block the next turns
        if user_stopped:
            # FIX user-stop-at-ceiling-frees-lease (R1): the stop's own cancel never reached this attempt (a turn's compaction beside its active /compress); at the ceiling nobody else frees its lease
            await self._free_lease(release_now)
            return Outcome("unchanged", "hard_cancelled")
        await self._record_timeout(kind)
        await self._free_lease(release_now)
        return Outcome("timeout", kind)

    async def _record_timeout(self, kind: str) -> None:
        """Claim the timeout's record and write it, once: the label and the ladder's cooldown."""
        fence = self._fence
        self._owed_record = None
        fence.claim_timeout_record()  # same step as the check: a later stop finds the record claimed
        # FIX timeout-record-survives-unwind (R2): a host cancelled from outside (its process stopping) between the claim and the record frees the lease with no backoff
        with self._rt.cancel_scope(shield=True):
            write_label(self._rt, self._session, fence.attempt, TIMED_OUT, terminal=True)
            # FIX timeout-arms-backoff (R2): without a recorded cooldown the next turn re-enters the route that just stalled
            await self._cooldowns.record_timeout(self._session, fence.attempt, kind)

    async def _record_owed_timeout(self) -> None:
        """An unwinding host that timed out and has not begun its record writes it before the lease can go."""
        if self._owed_record is not None:
            await self._record_timeout(self._owed_record)

    async def _free_lease(self, release_now: bool) -> None:
        """Free the fenced-off attempt's lease: at once on the idle path, after the worker's grace at the ceiling."""
        if release_now:
            await self._fence.release_cancelled()
        else:
            await self._release_after_grace()

    async def _cancel_or_join(self, *, release: bool) -> bool:
        """True once the cancel won; False after an admitted commit finished (waited for, never abandoned)."""
        while True:
            # FIX commit-overrun-visible (R7): spinning on the fence lock behind a hung commit is silent; wait on the commit, loudly
            if self._fence.commit_in_flight:
                await self._await_in_flight_commit()
                return False
            won = await self._fence.try_cancel_before_commit(release=release)
            if won is not None:
                if not won:
                    await self._job.done.wait()
                return won
            await self._rt.sleep(self._config.cancel_spin_s)

    async def _await_in_flight_commit(self) -> None:
        started = self._rt.now()
        warned = False
        while not self._job.done.is_set():
            with self._rt.move_on_after(self._config.commit_overrun_slice_s):
                await self._job.done.wait()
            if not self._job.done.is_set() and not warned:
                warned = True
                self._rt.emit(HostCommitOverrun(attempt=self._fence.attempt, waited_s=self._rt.now() - started))

    async def _release_after_grace(self) -> None:
        """Ceiling path: free the lease only once the cancelled worker has exited; an orphan keeps it."""
        with self._rt.move_on_after(self._config.cancelled_worker_grace_s):
            await self._job.done.wait()
        if self._job.done.is_set():
            await self._fence.release_cancelled()
        else:
            self._fence.hand_lease_back()
            self._rt.emit(HostLeaseRetained(attempt=self._fence.attempt))
