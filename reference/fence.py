"""The commit fence: the one place where "may this attempt still commit?" is decided, under a lock.

The host and a hard cancel race the worker for the fence lock. Whoever takes it first decides: a cancel
that wins marks the attempt cancelled (it will never commit); a worker that wins `begin_commit` holds the
lock through its whole commit, so a cancel waits for it and can never tear a commit in half. The lease is
released through a holder-scoped hook the worker publishes while it holds the lock (§2 steps 7, 11, 13, 17).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from contract.events import FenceBeginOk, FenceBeginRefused, FenceCancelWon, FenceFinish, FenceRevoked, FenceSetupRefused
from contract.ids import AttemptId
from contract.runtime import CancelScopeLike, EventLike, Runtime

ReleaseHook = Callable[[], Awaitable[None]]
HARD_CANCEL = "hard_cancel"  # the refusal of a commit the user's Ctrl+C stopped


class CommitFence:
    """Commit admission for one attempt (one fence per attempt)."""

    def __init__(self, rt: Runtime, attempt: AttemptId, *, ceiling_s: float, hard_event: EventLike) -> None:
        self._rt = rt
        self.attempt = attempt
        self.deadline = rt.now() + ceiling_s
        self._lock = rt.lock()
        self._hard_event = hard_event
        self._cancelled = False
        self._hard = False
        self._revoked = False
        self._given_up = False
        self._committed = False
        self._commit_in_flight = False
        self._release_hook: ReleaseHook | None = None
        self._release_wanted = False
        self._timeout_recorded = False
        self._lease_back_with_worker = False  # the host freed (or tried to free) the lease, or handed it back
        self._interrupt: CancelScopeLike | None = None
        self._last_progress = rt.now()
        self.worker_done = rt.event()  # set by the attempt's worker as its last act, whatever happened

    # ---- what both sides read without the lock -------------------------------------------------

    @property
    def is_cancelled(self) -> bool:
        """Cancelled by the host or a hard stop, given up by a timed-out host, or revoked by an unwinding host:
        no commit may follow."""
        return self._cancelled or self._given_up or self._revoked

    @property
    def hard_requested(self) -> bool:
        return self._hard

    @property
    def stop_pressed(self) -> bool:
        """The user's Ctrl+C reached this attempt, landed or still waiting for the fence lock (the hard event)."""
        return self._hard or self._hard_event.is_set()

    def press(self) -> None:
        """The user's Ctrl+C, as pressed: seen by `stop_pressed` and refused at the commit before its cancel lands."""
        self._hard_event.set()

    @property
    def commit_in_flight(self) -> bool:
        """Set under the lock by `begin_commit`; readable lock-free so a waiting host can tell a hung commit."""
        return self._commit_in_flight

    @property
    def timeout_recorded(self) -> bool:
        """The host claimed this attempt's timeout record: its cooldown is the host's, not the attempt's to roll back."""
        return self._timeout_recorded

    def claim_timeout_record(self) -> None:
        """The host's once-per-attempt claim, made in the step its cancel is known not to be a user's stop."""
        self._timeout_recorded = True

    def give_up(self) -> None:
        """The host's wait timed out: lock-free, so a worker holding the lock through a stalled lease setup finds
        the attempt dead the moment it leaves the setup, before it summarizes or writes anything. An admitted or
        finished commit stands (the host joins it); the cancel that records the timeout still takes the lock."""
        if not (self._commit_in_flight or self._committed):
            self._given_up = True

    @property
    def given_up(self) -> bool:
        """The host's timeout fenced the attempt off before any commit began."""
        return self._given_up

    @property
    def lease_left_to_host(self) -> bool:
        """The host gave up after this attempt won its lease: the host frees it through the hook once its timeout
        backoff is recorded (timeout-recorded-before-release), so the worker must not free it first, whether it
        sits out of its setup or outlives the host's timeout under the lease. Once the hook ran (a failed release
        is retried by the worker's exit) or the host handed the lease back, the worker frees it again."""
        return self._given_up and self._release_hook is not None and not self._lease_back_with_worker

    def hand_lease_back(self) -> None:
        """Ceiling path, the worker still running after the grace: it keeps its lease and frees it when it exits."""
        self._lease_back_with_worker = True

    def deadline_exceeded(self) -> bool:
        return self._rt.now() >= self.deadline

    def touch_progress(self) -> None:
        self._last_progress = self._rt.now()

    def seconds_since_progress(self) -> float:
        return self._rt.now() - self._last_progress

    # ---- lease setup (steps 7b, 7e, 7f) --------------------------------------------------------

    async def begin_lock_setup(self) -> bool:
        """Take the fence lock for the lease acquire; False (lock not held) if the attempt is already dead."""
        await self._lock.acquire()
        # FIX lock-setup-spans-acquire (R3): a cancel cannot land between acquire and hook publication, and a dead attempt never acquires
        if self.is_cancelled:
            self._lock.release()
            self._rt.emit(FenceSetupRefused(attempt=self.attempt))
            return False
        return True

    def publish_release_hook(self, hook: ReleaseHook) -> None:
        """Called under the setup lock right after the lease is won: how a cancel frees exactly this holder."""
        self._release_hook = hook

    async def finish_lock_setup(self) -> None:
        self._lock.release()
        await self._release_if_wanted()

    # ---- commit admission (steps 13, 17) -------------------------------------------------------

    async def begin_commit(self, current: Callable[[], bool] = lambda: True) -> bool:
        """Admit the commit and keep the lock until `finish_commit`; refuse a dead or late attempt, or one whose
        candidate `current` no longer holds for, judged in the very step of admission."""
        await self._lock.acquire()
        reason = ("superseded" if not current() else None) or self._refusal()
        if reason is None:
            self._commit_in_flight = True
            self._rt.emit(FenceBeginOk(attempt=self.attempt))
            return True
        if reason == HARD_CANCEL:
            # FIX hard-refusal-rolls-back (R1): refused by a Ctrl+C whose cancel has not landed yet, the attempt is hard-stopped all the same
            self._hard = True
        self._lock.release()
        self._rt.emit(FenceBeginRefused(attempt=self.attempt, reason=reason))
        await self._release_if_wanted()
        return False

    def _refusal(self) -> str | None:
        if self._cancelled or self._given_up:
            return "cancelled"
        if self._revoked:
            return "revoked"
        # FIX pressed-stop-refuses-commit (R1): a Ctrl+C pressed before this fence existed (or whose cancel queues on its lock) is only the stop it shares
        if self._hard or self._hard_event.is_set():
            return HARD_CANCEL
        if self.deadline_exceeded():
            return "deadline"
        return None

    async def finish_commit(self) -> None:
        """Close the commit: drop the lock, then run any release a revoke deferred while we held it."""
        self._commit_in_flight = False
        self._committed = True
        self._lock.release()
        self._rt.emit(FenceFinish(attempt=self.attempt))
        await self._release_if_wanted()

    # ---- the host's and the frontend's side (steps 11b-11e, R1) --------------------------------

    async def cancel_before_commit(self, *, hard: bool = False, release: bool = True) -> bool:
        """Wait out an admitted commit, then cancel. True if the cancel won (the attempt will not commit)."""
        await self._lock.acquire()
        return await self._cancel_holding_lock(hard=hard, release=release)

    async def try_cancel_before_commit(self, *, release: bool = True) -> bool | None:
        """Non-blocking cancel; None while the lock is busy (lease setup or a commit in progress)."""
        if not self._lock.try_acquire():
            return None
        return await self._cancel_holding_lock(hard=False, release=release)

    async def _cancel_holding_lock(self, *, hard: bool, release: bool) -> bool:
        # FIX cancel-loses-to-finished-commit (R1): a cancel that waited out an admitted commit must not "win" it afterwards
        if self._committed:
            self._lock.release()
            return False
        self._cancelled = True
        self._hard = self._hard or hard
        self._release_wanted = self._release_wanted or release
        if hard and self._interrupt is not None:
            self._interrupt.cancel()
        self._lock.release()
        self._rt.emit(FenceCancelWon(attempt=self.attempt, hard=hard))
        await self._release_if_wanted()
        return True

    async def release_cancelled(self) -> None:
        """Free the cancelled attempt's lease now (the ceiling path, once its worker has exited)."""
        self._release_wanted = True
        await self._release_if_wanted()

    async def revoke_commit_admission(self) -> None:
        """The host is unwinding: no commit may start from now on. Lock-free flag, then a try-lock release."""
        self._revoked = True
        self._release_wanted = True
        self._rt.emit(FenceRevoked(attempt=self.attempt, commit_in_flight=self._commit_in_flight))
        # FIX revoke-defers-during-commit (R6): an admitted commit holds the fence lock; releasing under it would admit a second writer
        if not self._lock.try_acquire():
            return
        self._lock.release()
        await self._release_if_wanted()

    async def _release_if_wanted(self) -> None:
        if self._release_wanted and self._release_hook is not None:
            self._release_wanted = False
            self._lease_back_with_worker = True
            await self._release_hook()

    # ---- hard cancel reaches into a running summary ---------------------------------------------

    def set_interrupt_scope(self, scope: CancelScopeLike) -> None:
        """The scope a hard cancel cancels to unwind the summary at once (the provider call runs on)."""
        self._interrupt = scope
        if self._hard:
            scope.cancel()

    def clear_interrupt_scope(self) -> None:
        self._interrupt = None


class FenceStack:
    """The agent's fence registrations; the active fence (what a hard stop serializes against) is the top."""

    def __init__(self) -> None:
        self._entries: list[CommitFence] = []

    def push(self, fence: CommitFence) -> None:
        self._entries.append(fence)

    def remove(self, fence: CommitFence) -> None:
        # FIX fence-stack-own-entry (R22): attempts finish out of order; popping the top would drop a newer live fence
        self._entries.remove(fence)

    def press(self) -> None:
        """A Ctrl+C reaches the active attempt (the newest live registration, the one it cancels), whichever stop
        (a turn's, a /compress's) it holds; an older attempt still running beside it is not the one stopped."""
        # FIX ctrl-c-presses-active-attempt (R1): pressing every fence marks an older /compress stopped that no cancel reaches; its timeout then records no backoff
        for fence in self._entries[-1:]:
            fence.press()

    @property
    def top(self) -> CommitFence | None:
        return self._entries[-1] if self._entries else None

    def __len__(self) -> int:
        return len(self._entries)
