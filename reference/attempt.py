"""Compressor state and who may write it: attempt generations, snapshots and the gen-gated rollback.

Two boundaries: the commit fence owns commit admission; the generation owns compressor-attribute writes.
A new attempt claims generation g+1, so a slower, older attempt that later unwinds cannot roll back state
the newer one wrote (R21). An attempt that never won the lease retires its claim: it owned nothing, so it
must not make the attempt that holds the lease look stale (#198 F1). The cancelled-check a cooldown clear
consults is stamped with its installer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from contract.events import AttemptClaimed, AttemptRestored, AttemptRestoreSkippedStale, AttemptRetired
from contract.ids import AttemptId
from contract.points import ATTEMPT_RESTORE_BODY
from contract.runtime import Runtime
from reference.store import CooldownRow

CancelledCheck = Callable[[], bool]
DurableRestore = Callable[[CooldownRow], Awaitable[None]]


@dataclass
class CompressorState:
    """The attempt-scoped fields a hard-cancel rollback puts back exactly."""

    previous_summary: str | None = None
    compression_count: int = 0
    cooldown_until: float = 0.0
    last_error: str | None = None
    consecutive_timeouts: int = 0
    structural_backoff_until: float = 0.0


def with_cooldown_of(current: CompressorState, snapshot: CompressorState) -> CompressorState:
    """`snapshot`, but with the failure-cooldown fields of `current` (a host's timeout record written since)."""
    return dataclasses.replace(
        snapshot, cooldown_until=current.cooldown_until, last_error=current.last_error,
        consecutive_timeouts=current.consecutive_timeouts,
    )


class Compressor:
    """One agent's compressor: its state plus the generation bookkeeping every writer goes through."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self.state = CompressorState()
        self.generation = 0
        self.working_generation = 0
        self._retired: dict[int, AttemptId] = {}  # claims given back, and whose
        self._serial = rt.lock()
        self._cancelled_check: tuple[int, CancelledCheck] | None = None

    async def claim(self, attempt: AttemptId) -> int:
        """A fresh, monotonic generation for `attempt`; waits for a rollback in progress to finish."""
        # FIX claim-waits-for-rollback (R21): a claim between a rollback's check and its writes would be overwritten by them
        async with self._serial:
            self.generation += 1
            generation = self.generation
        self._rt.emit(AttemptClaimed(attempt=attempt, generation=generation))
        return generation

    async def retire(self, attempt: AttemptId, generation: int) -> None:
        """Give back a claim that never owned the compressor; the counter itself never moves backwards."""
        async with self._serial:
            self._retired[generation] = attempt
        self._rt.emit(AttemptRetired(attempt=attempt, generation=generation))

    async def own_timeout_record(self, attempt: AttemptId) -> None:
        """The host records `attempt`'s timeout in this compressor: a claim it gave back owns that record now."""
        async with self._serial:
            # FIX timeout-record-reclaims-retired-claim (R21/R2): given back, the claim lets an older attempt's rollback erase the timeout backoff
            self._retired = {generation: owner for generation, owner in self._retired.items() if owner != attempt}

    def current_claim(self) -> int:
        """The newest claim not retired: the attempt whose rollback may still write (0: none)."""
        generation = self.generation
        while generation in self._retired:
            generation -= 1
        return generation

    def snapshot(self) -> CompressorState:
        return dataclasses.replace(self.state)

    async def restore(
        self,
        attempt: AttemptId,
        generation: int,
        snapshot: CompressorState,
        durable: tuple[DurableRestore, CooldownRow] | None = None,
        *,
        keep_cooldown: bool = False,
    ) -> bool:
        """Put back `snapshot` (and first the durable cooldown row) unless a newer attempt has claimed.

        `keep_cooldown`: the host recorded this attempt's timeout, so the cooldown (row and local fields) is
        the host's and stays as it is; everything else is rolled back. Holds the serial lock across the check
        and both writes, so no claim can slip in between them.
        """
        async with self._serial:
            # FIX stale-restore-noop (R21): an older attempt's late rollback must not undo what a newer claim wrote
            current = self.current_claim()
            if generation != current:
                self._rt.emit(AttemptRestoreSkippedStale(attempt=attempt, generation=generation, current=current))
                return False
            await self._rt.checkpoint(ATTEMPT_RESTORE_BODY)
            if durable is not None and not keep_cooldown:
                write_row, row = durable
                await write_row(row)
            self.state = with_cooldown_of(self.state, snapshot) if keep_cooldown else dataclasses.replace(snapshot)
        self._rt.emit(AttemptRestored(attempt=attempt, generation=generation))
        return True

    # ---- the working marker: published when dispatch starts, used for supersession ----------------

    def mark_working(self, generation: int) -> None:
        self.working_generation = max(self.working_generation, generation)

    def is_working_current(self, generation: int) -> bool:
        return self.working_generation == generation

    # ---- the owner-stamped cancelled check (R2, R21) --------------------------------------------

    def install_cancelled_check(self, generation: int, check: CancelledCheck) -> None:
        self._cancelled_check = (generation, check)

    def clear_cancelled_check_if_owner(self, generation: int) -> None:
        # FIX owner-stamped-cancel-check (R21): a late older attempt must not remove the check a newer attempt installed
        if self._cancelled_check is not None and self._cancelled_check[0] == generation:
            self._cancelled_check = None

    def attempt_is_cancelled(self, generation: int) -> bool:
        """What a success-path clear consults: cancelled, or no longer the attempt that owns the check.

        An attempt consults while its own check is installed; finding another attempt's check, or none
        (a newer attempt installed and finished meanwhile), means this attempt is stale.
        """
        if self._cancelled_check is None:
            return True
        owner, check = self._cancelled_check
        return owner != generation or check()
