"""One compression attempt, as the pooled worker runs it (§2 steps 4-10, 12, 13, 15, 17).

Claim a generation, pass the gate, win the lease under the fence lock, capture the watermark and the raw
cooldown row, summarize in an abandonable call, screen the candidate, and commit in place or by rotation
only with the fence's admission. Every exit releases the lease; a hard cancel first rolls back exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from contract.events import (
    CommitArchived,
    CommitPublished,
    CompactionBlocked,
    CompactionCarriedUnread,
    CompactionCommitFailed,
    CompactionCommitted,
    CompactionError,
    CompactionFinished,
    CompactionInput,
    CompactionInputReread,
    CompactionRefused,
    CompactionStaticFallback,
    CompactionStrike,
    CompactionStrikeResetFailed,
    CompactionSummaryDone,
    CompactionSummaryProgress,
    CompactionSummaryStarted,
    CompactionWatermark,
    CompactionWatermarkFailed,
    CooldownRestored,
    LeaseAcquireFailed,
    PoolJobSkipped,
    SessionAdopted,
)
from contract.ids import SessionId
from contract.points import COMPACTOR_AFTER_SUMMARY, COMPACTOR_BEFORE_BEGIN_COMMIT, COMPACTOR_BEFORE_PARENT_FLUSH, COMPACTOR_STATIC_FALLBACK
from contract.runtime import EventLike, Runtime
from contract.vocabulary import SUMMARY_TASK
from reference.activity import Heartbeat
from reference.attempt import Compressor, CompressorState
from reference.config import CompactionConfig
from reference.cooldown import Cooldowns
from reference.db import Database
from reference.fence import CommitFence
from reference.lease import Lease, Process, ProcessProbe
from reference.pool import CompressionPool
from reference.provider import ProgressCallback, ProviderError
from reference.store import UNPUBLISHABLE_END_REASONS, CooldownRow
from reference.transcript import (
    ROW_ID,
    CallerCopies,
    Message,
    copied,
    estimate_tokens,
    from_row,
    new_message,
    persist,
    rows_not_written_for,
    same_content,
    stamp,
    unpersisted,
    without_copies_of,
    without_markers,
)


class Summarizer(Protocol):
    async def summarize(self, messages: list[Message], on_progress: ProgressCallback) -> str: ...


@dataclass
class Outcome:
    """What an attempt hands back to the host.

    `messages` is the list the host must adopt (a commit, an adoption, or a failed commit's restored
    snapshot), or None: keep your own list object, nothing reached the store (R4).
    """

    status: str  # committed | rotated | adopted | unchanged | failed | error | timeout | saturated
    reason: str = ""
    messages: list[Message] | None = None
    session_id: SessionId | None = None
    generation: int = 0  # a commit's: the claim it committed under (commits land in claim order)


@dataclass
class CompactorDeps:
    """What every attempt of one agent shares."""

    rt: Runtime
    db: Database
    provider: Summarizer
    config: CompactionConfig
    compressor: Compressor
    cooldowns: Cooldowns
    pool: CompressionPool
    process: Process
    processes: ProcessProbe | None
    bind_session: Callable[[SessionId], None]


class AttemptAborted(Exception):
    """The attempt stops before any commit (the fence was cancelled before or during the summary)."""


class CompactionJob:
    """A submitted attempt: the worker body, and the outcome the host reads once `done` is set."""

    def __init__(
        self, deps: CompactorDeps, fence: CommitFence, *, number: int, session: SessionId, source: list[Message], force: bool,
        bypass_cooldown: bool = False,
    ) -> None:
        self._deps = deps
        self._fence = fence
        self._number = number
        self._session = session
        self._source = source
        self._force = force
        self._bypass_cooldown = bypass_cooldown
        self.outcome: Outcome | None = None
        # the caller's messages the worker copied (the dicts themselves): a turn that runs meanwhile may append
        # to the caller's list or replace it, and what it added is the caller's to keep, not the attempt's
        self.taken: list[Message] = []

    @property
    def done(self) -> EventLike:
        return self._fence.worker_done

    async def run(self) -> None:
        """The worker: runs isolated, so a host that gives up leaves it running as a late worker."""
        d = self._deps
        await d.pool.acquire_worker()
        try:
            # FIX stale-job-skipped (R8): a job that starts after its host gave up must not summarize or commit
            if self._fence.is_cancelled or self._fence.deadline_exceeded():
                d.rt.emit(PoolJobSkipped(attempt=self._fence.attempt))
                self.outcome = Outcome("unchanged", "stale_job")
                return
            # FIX snapshot-on-worker (R4): the worker owns a deep copy; the caller's live list is never touched
            messages = copied(self._source)
            self.taken = list(self._source)
            attempt = Attempt(d, self._fence, number=self._number, session=self._session, force=self._force,
                              bypass_cooldown=self._bypass_cooldown, caller_unsaved=unpersisted(self.taken))
            self.outcome = await attempt.run(messages)
        except Exception as exc:  # the host gets an outcome whatever failed; the error is in the history
            self.outcome = Outcome("error", type(exc).__name__)
            d.rt.emit(CompactionError(attempt=self._fence.attempt, error=repr(exc)))
        finally:
            d.pool.release_worker()
            d.pool.release_admission()
            outcome = Outcome("error", "interrupted") if self.outcome is None else self.outcome
            d.rt.emit(CompactionFinished(
                session=self._session, attempt=self._fence.attempt, status=outcome.status, reason=outcome.reason,
            ))
            self.done.set()


class Attempt:
    def __init__(
        self, deps: CompactorDeps, fence: CommitFence, *, number: int, session: SessionId, force: bool, bypass_cooldown: bool = False,
        caller_unsaved: list[Message] | None = None,
    ) -> None:
        self._d = deps
        # the caller's own dicts of the messages it had not saved when the worker copied them (the copies are the
        # unflushed ones of the attempt's input): a turn running beside a /compress may write them meanwhile
        self._caller_unsaved = caller_unsaved or []
        self._fence = fence
        self.attempt = fence.attempt
        self.session = session
        self.holder = deps.process.holder(number)
        self._force = force
        self._bypass_cooldown = bypass_cooldown
        self.generation = 0
        self.watermark: int | None = None
        self._admitted = False

    async def run(self, messages: list[Message]) -> Outcome:
        d = self._d
        self.generation = await d.compressor.claim(self.attempt)
        snapshot = d.compressor.snapshot()
        blocked = None if self._force else await d.cooldowns.blocked_reason(self.session, bypass_cooldown=self._bypass_cooldown)
        if blocked is not None:
            d.rt.emit(CompactionBlocked(session=self.session, attempt=self.attempt, reason=blocked))
            return await self._sit_out(Outcome("unchanged", blocked))
        lease = Lease(d.rt, d.db, self.session, self.holder, d.config)
        sat_out = await self._acquire(lease)
        if sat_out is not None:
            if not self._fence.lease_left_to_host:
                await lease.release()
            return await self._sit_out(self._refused(sat_out))
        heartbeat = Heartbeat(d.rt, self._fence, self.session, interval_s=d.config.heartbeat_interval_s)
        heartbeat.start()
        try:
            async with d.rt.open_nursery() as nursery:
                nursery.start_soon(lease.run_refresher, name=f"refresher:{self.attempt}")
                nursery.start_soon(heartbeat.run, name=f"heartbeat:{self.attempt}")
                try:
                    return await self._under_lease(messages, snapshot)
                finally:
                    heartbeat.stop()
                    # FIX late-worker-leaves-lease-to-host (R2): a worker outliving its host's timeout would free the lease before the backoff is recorded
                    if self._fence.lease_left_to_host:
                        lease.stop_refresher()
                    else:
                        await lease.release()
        finally:
            if self._admitted:
                await self._fence.finish_commit()

    async def _sit_out(self, outcome: Outcome) -> Outcome:
        """This attempt never worked under the lease: it retires its claim and hands back `outcome`."""
        # FIX lock-loser-retires-claim (R21): a loser's newer claim would make the lease owner's hard-cancel rollback look stale
        await self._d.compressor.retire(self.attempt, self.generation)
        return outcome

    async def _acquire(self, lease: Lease) -> str | None:
        """Win the lease with the fence lock held; None on success, else why this attempt sits out."""
        if not await self._fence.begin_lock_setup():
            return "fence_cancelled"
        captured = False
        try:
            won = await self._try_lease(lease)
            if won:
                # FIX cancel-frees-lease-by-hook (R3): a host that gives up frees exactly this holder's lease, before the worker returns
                self._fence.publish_release_hook(lease.release)
                captured = await self._capture_watermark()
        finally:
            await self._fence.finish_lock_setup()
        if not won:
            return "lock_contended"
        # FIX watermark-fail-closed (R14): with no watermark the commit cannot tell concurrent appends from the snapshot; archiving all loses them
        if not captured:
            return "watermark_unknown"
        return "fence_cancelled" if self._fence.is_cancelled else None

    async def _try_lease(self, lease: Lease) -> bool:
        try:
            return await lease.acquire(self._d.processes)
        except Exception as exc:  # sit out; the caller's holder-qualified release cleans up a half-taken row
            self._d.rt.emit(LeaseAcquireFailed(session=self.session, holder=self.holder, error=repr(exc)))
            return False

    async def _capture_watermark(self) -> bool:
        """Rows above the watermark arrive during the summary; the commit keeps them live, after it.

        False if the read failed: the attempt then sits out (its caller fails closed).
        """
        try:
            # FIX watermark-after-acquire (R14): without it the commit archives every active row, concurrent appends included
            self.watermark = await self._d.db.call("active_watermark", self.session)
        except Exception as exc:
            self._d.rt.emit(CompactionWatermarkFailed(session=self.session, attempt=self.attempt, error=repr(exc)))
            return False
        self._d.rt.emit(CompactionWatermark(session=self.session, attempt=self.attempt, watermark=self.watermark))
        return True

    async def _under_lease(self, messages: list[Message], snapshot: CompressorState) -> Outcome:
        d = self._d
        adopted = await self._adopt_if_rotated()
        if adopted is not None:
            return adopted
        cooldown_row: CooldownRow = await d.db.call("cooldown_row", self.session)
        if self._force:
            # FIX forced-clear-vetoed-when-cancelled (R2): a /compress stopped before it got here must not lift the cooldown
            await d.cooldowns.clear(self.session, self.attempt, veto=lambda: self._fence.is_cancelled)
        else:
            blocked = self._blocked_under_lease(cooldown_row)
            if blocked is not None:
                return self._refused(blocked)
        given = list(messages)  # the caller's transcript as handed over; a failed commit gives back this, not the re-read
        messages, worked_from = await self._with_rows_committed_before_lease(messages)
        d.rt.emit(CompactionInput(session=self.session, attempt=self.attempt, rows=worked_from))
        try:
            return await self._summarize_and_commit(given, messages, cooldown_row)
        finally:
            if self._fence.hard_requested and not self._admitted:
                # FIX hard-cancel-full-rollback (R1): a hard stop leaves the cooldown row and compressor exactly as before the attempt
                durable = (self._restore_cooldown_row, cooldown_row)
                # FIX host-timeout-record-kept (R2): a stop after the host's timeout must not erase the timeout cooldown the host owns
                keep_cooldown = self._fence.timeout_recorded
                await d.compressor.restore(self.attempt, self.generation, snapshot, durable, keep_cooldown=keep_cooldown)

    async def _with_rows_committed_before_lease(self, messages: list[Message]) -> tuple[list[Message], list[int]]:
        """The snapshot, or the durable transcript up to the watermark if another writer added rows meanwhile; and
        the durable rows it stands for (a row a maybe-written message of the caller stands for is among them: the
        commit retires it with the rest).

        Rows above the watermark stay out: the commit clones them after the compacted rows.
        """
        rows = await self._d.db.call("active_messages", self.session)
        covered = [row for row in rows if self.watermark is None or row.id <= self.watermark]
        known = set(input_rows(messages))
        # FIX reread-transcript-under-lease (R14): a row committed between our snapshot and our lease is under the watermark; unseen, the commit archives it
        if all(row.id in known for row in covered):
            return messages, input_rows(messages)
        self._d.rt.emit(CompactionInputReread(session=self.session, attempt=self.attempt, rows=len(covered)))
        pending = unpersisted(messages)
        # FIX reread-skips-own-indeterminate-rows (R10): a failed turn's append may have committed; its row re-read beside the unsaved message puts the turn in the handoff twice
        unclaimed = {row.id for row in rows_not_written_for([row for row in covered if row.id not in known], pending)}
        reread = [from_row(row) for row in covered if row.id in known or row.id in unclaimed] + pending
        return reread, [row.id for row in covered]

    def _blocked_under_lease(self, row: CooldownRow) -> str | None:
        """The automatic gate again, on the row read under the lease: another agent may have failed meanwhile."""
        # FIX cooldown-rechecked-under-lease (R2): a cooldown recorded between our gate and our lease still holds us off
        if row.until is not None and row.until > self._d.rt.now() and not self._bypass_cooldown:
            return "cooldown"
        if row.ineffective_count >= self._d.config.breaker_threshold:
            return "ineffective"
        return None

    async def _restore_cooldown_row(self, row: CooldownRow) -> None:
        await self._d.db.call("restore_cooldown_row", self.session, row)
        self._d.rt.emit(CooldownRestored(session=self.session, attempt=self.attempt))

    async def _adopt_if_rotated(self) -> Outcome | None:
        """Another path rotated this session while we waited: adopt its live tip and sit out (step 8)."""
        d = self._d
        row = await d.db.call("get_session", self.session)
        # FIX adopt-rotated-parent-after-acquire (R19): rotating an already-rotated parent leaves orphan siblings
        if row is not None and row.rotated:
            tip = await d.db.call("compression_tip", self.session)
            return self._refused("parent_rotated") if tip is None else await self._adopt(SessionId(tip))
        return None

    async def _adopt(self, tip: SessionId) -> Outcome:
        rows = await self._d.db.call("active_messages", tip)
        self._d.rt.emit(SessionAdopted(from_session=self.session, to_session=tip, attempt=self.attempt))
        return Outcome("adopted", "parent_rotated", [from_row(row) for row in rows], tip)

    async def _summarize_and_commit(self, given: list[Message], messages: list[Message], cooldown_row: CooldownRow) -> Outcome:
        d = self._d
        before = copied(messages)  # what a failed commit restores, whatever the engine does to its input
        flushed = unpersisted(before)  # the copies of the caller's unflushed messages, which a rotation flushes
        caller = CallerCopies(self._caller_unsaved, flushed)
        try:
            summary, candidate = await self._summarize(messages, before)
        except AttemptAborted as aborted:
            return self._refused(str(aborted))
        except ProviderError as exc:
            seconds = d.config.summary_failure_cooldown_s
            await d.cooldowns.record_failure(self.session, seconds, f"summary_failed: {exc}", self.attempt)
            return self._refused("summary_failed")
        refusal = self._screen(before, candidate)
        if refusal is not None:
            return self._refused(refusal)
        await d.rt.checkpoint(COMPACTOR_BEFORE_BEGIN_COMMIT)
        current = partial(d.compressor.is_working_current, self.generation)
        # FIX superseded-candidate-discarded (R21): a newer attempt that started its summary, even while this one waited here, makes it stale
        if not await self._fence.begin_commit(current=current):
            return self._refused("commit_fence_cancelled" if current() else "superseded")
        self._admitted = True
        if estimate_tokens(candidate) > estimate_tokens(before):
            return await self._refuse_growth()
        messages[:] = candidate
        try:
            commit = self._commit_in_place(messages, caller) if d.config.in_place else self._commit_rotation(messages, flushed, caller)
            outcome, carried = await commit
        except Exception as exc:
            d.rt.emit(CompactionCommitFailed(session=self.session, attempt=self.attempt, error=repr(exc)))
            settle_caller_writes(caller, [])  # a copy the caller's turn wrote meanwhile goes back with the turn's row
            # FIX failed-commit-returns-caller-list (R4): a re-read input is the attempt's own view; the caller gets its list back, with the stamps of rows the attempt flushed for it
            restored = caller.handed_back(given)
            # FIX restore-snapshot-on-failed-commit (R12): the compacted list never became durable; handing it back would double the rows
            messages[:] = restored
            seconds = d.config.split_failure_cooldown_s
            await d.cooldowns.record_failure(self.session, seconds, f"session_split_failed: {exc}", self.attempt)
            return Outcome("failed", type(exc).__name__, messages)
        await self._accept(summary, messages, cooldown_row, estimate_tokens(before))
        messages += await self._carried_rows(outcome.session_id or self.session, carried)
        return outcome

    async def _summarize(self, messages: list[Message], before: list[Message]) -> tuple[str, list[Message]]:
        """Summarize all but the newest `keep_recent` messages (nothing to do: an unchanged candidate)."""
        d, fence = self._d, self._fence
        split = max(len(before) - d.config.keep_recent, 0)
        if split == 0:
            return "", [without_markers(m) for m in before]
        if fence.is_cancelled:
            raise AttemptAborted("hard_cancelled" if fence.hard_requested else "fence_cancelled")
        d.compressor.install_cancelled_check(self.generation, lambda: fence.is_cancelled)
        try:
            d.compressor.mark_working(self.generation)
            d.rt.emit(CompactionSummaryStarted(attempt=self.attempt, generation=self.generation))
            summary = await self._summary_or_static_fallback(messages[:split])
        finally:
            d.compressor.clear_cancelled_check_if_owner(self.generation)
        return summary, build_candidate(before, summary, d.rt.now(), d.config.keep_recent)

    async def _summary_or_static_fallback(self, messages: list[Message]) -> str:
        """The model's summary; if the model fails and the static fallback is on, a deterministic one.

        Only a healthy summary clears the failure cooldown; a fallback candidate is screened like any other,
        so a successor that started its summary meanwhile still supersedes it.
        """
        d = self._d
        try:
            summary = await self._dispatch(messages)
        except ProviderError as exc:
            if not d.config.static_fallback_summary:
                raise
            d.rt.emit(CompactionStaticFallback(attempt=self.attempt, error=str(exc)))
            await d.rt.checkpoint(COMPACTOR_STATIC_FALLBACK)
            return static_summary(messages)
        d.rt.emit(CompactionSummaryDone(attempt=self.attempt, chars=len(summary)))
        await d.rt.checkpoint(COMPACTOR_AFTER_SUMMARY)
        await d.cooldowns.clear_on_success(self.session, self.attempt, self.generation)
        return summary

    async def _dispatch(self, messages: list[Message]) -> str:
        """The provider call runs isolated: a hard cancel unwinds this attempt at once, the call runs on."""
        d = self._d
        with d.rt.cancel_scope() as scope:
            self._fence.set_interrupt_scope(scope)
            try:
                summary = await d.rt.run_isolated(
                    d.provider.summarize, messages, self._on_progress, name=f"{SUMMARY_TASK}{self.attempt}"
                )
            except ProviderError:
                raise
            except Exception as exc:  # a plugin's or the OS's InterruptedError is no Ctrl+C: only the fence stops an attempt
                # FIX provider-exception-is-a-failure (R1): unclassified, a provider's own exception arms no cooldown and the next turn retries at once
                raise ProviderError(f"{type(exc).__name__}: {exc}") from exc
            finally:
                self._fence.clear_interrupt_scope()
        if scope.cancelled_caught:
            raise AttemptAborted("hard_cancelled")
        return summary

    def _on_progress(self) -> None:
        # FIX zombie-progress-suppressed (R26): a cancelled attempt's late ticks must not re-arm "compression in progress"
        if self._fence.is_cancelled:
            return
        self._fence.touch_progress()
        self._d.rt.emit(CompactionSummaryProgress(attempt=self.attempt))

    def _screen(self, before: list[Message], candidate: list[Message]) -> str | None:
        """Refuse, before admission, a candidate that changes nothing (step 12); whether it is still ours is
        judged by the admission itself."""
        if same_content(candidate, before):
            self._d.cooldowns.note_structural_noop()
            return "no_progress"
        return None

    async def _refuse_growth(self) -> Outcome:
        """The admitted candidate would grow the transcript: refuse it, and count it toward the breaker."""
        d = self._d
        # FIX would-grow-counts-strike (R13): an uncounted refusal lets every turn re-issue the same growing summary
        strikes = await d.db.call("bump_ineffective", self.session)
        d.rt.emit(CompactionStrike(session=self.session, attempt=self.attempt, strikes=strikes))
        return self._refused("would_grow")

    async def _commit_in_place(self, messages: list[Message], caller: CallerCopies) -> tuple[Outcome, list[int]]:
        """Archive and compact; also the rows it cloned after the candidate (another writer's appends)."""
        d = self._d
        try:
            row_ids = await d.db.call_settled(
                partial(settle_caller_writes, caller, [messages]), "archive_and_compact", self.session, messages,
                holder=self.holder, watermark=self.watermark, tail_count=d.config.tail_count,
            )
        finally:  # an error after the COMMIT leaves the candidate durable all the same
            caller.hand_back_writes()
        d.rt.emit(CommitArchived(session=self.session, attempt=self.attempt, rows=len(row_ids)))
        # FIX stamp-compacted-markers (R12): the compacted dicts are durable now; unmarked, the next flush re-inserts them all
        stamp(messages, row_ids)
        return Outcome("committed", "in_place", messages, self.session, self.generation), row_ids[len(messages):]

    async def _commit_rotation(
        self, messages: list[Message], flushed: list[Message], caller: CallerCopies,
    ) -> tuple[Outcome, list[int]]:
        """Flush, publish the child and bind to it; also the rows it cloned into the child after the handoff."""
        d = self._d
        parent = self.session
        # FIX rotation-ceiling-before-flush (R14): rows above it are our own flush, already in the handoff; cloning them duplicates
        ceiling = await d.db.call("active_watermark", parent)
        await d.rt.checkpoint(COMPACTOR_BEFORE_PARENT_FLUSH)
        pending = unpersisted(flushed)
        # FIX deliberate-end-preflush-guard (R11): the flush's own transaction refuses the parent, or every failed rotation grows it; a check read before it misses an end made meanwhile
        refuse_ended = UNPUBLISHABLE_END_REASONS
        try:
            settle = partial(settle_caller_writes, caller, [pending, messages])
            own_rows = await persist(d.rt, d.db, parent, pending, refuse_ended=refuse_ended, settle=settle) if pending else []
        finally:  # an error after the COMMIT leaves the flush durable all the same
            caller.hand_back_writes()
        child = parent.minted_child(self.holder, d.rt.now())
        row_ids = await d.db.call(
            "publish_child", parent, child, messages, holder=self.holder, watermark=self.watermark, ceiling=ceiling,
            ttl_s=d.config.lease_ttl_s, require_refresh=True, own_rows=own_rows,
        )
        d.rt.emit(CommitPublished(parent=parent, child=child, attempt=self.attempt))
        # FIX stamp-handoff-markers (R10): the handoff rows (the user turn's anchor copy included) are durable in the child
        stamp(messages, row_ids)
        d.bind_session(child)
        return Outcome("rotated", "rotation", messages, child, self.generation), row_ids[len(messages):]

    async def _carried_rows(self, session: SessionId, carried: list[int]) -> list[Message]:
        """The rows the commit cloned after the candidate (another writer's appends during the summary), as live
        dicts: the caller answers its next turn from them, and the next attempt summarizes them."""
        d = self._d
        # FIX take-in-carried-rows (R14): without them the agent answers as if the other device's message was never sent
        if not carried:
            return []
        try:
            rows = await d.db.call("active_messages", session)
        except Exception as exc:  # the commit stands; the next attempt's re-read under the lease takes the rows in
            d.rt.emit(CompactionCarriedUnread(session=session, attempt=self.attempt, error=repr(exc)))
            return []
        wanted = set(carried)
        return [from_row(row) for row in rows if row.id in wanted]

    async def _accept(self, summary: str, messages: list[Message], cooldown_row: CooldownRow, tokens_before: int) -> None:
        """Post-commit bookkeeping, written only by the attempt that still owns the compressor."""
        d = self._d
        if d.compressor.is_working_current(self.generation):
            state = d.compressor.state
            state.previous_summary = summary
            state.compression_count += 1
        if cooldown_row.ineffective_count and estimate_tokens(messages) < d.config.threshold_tokens:
            try:
                await d.db.call("reset_ineffective", self.session)
            except Exception as exc:  # the commit stands; a stale strike only delays the next automatic attempt
                d.rt.emit(CompactionStrikeResetFailed(session=self.session, attempt=self.attempt, error=repr(exc)))
        d.rt.emit(CompactionCommitted(
            session=self.session, attempt=self.attempt, tokens=estimate_tokens(messages), tokens_before=tokens_before,
        ))

    def _refused(self, reason: str) -> Outcome:
        self._d.rt.emit(CompactionRefused(session=self.session, attempt=self.attempt, reason=reason))
        return Outcome("unchanged", reason)


def settle_caller_writes(caller: CallerCopies, lists: list[list[Message]]) -> None:
    """In the step of the attempt's first write of its copies: a copy whose original the caller's turn wrote
    meanwhile (a /compress beside a running turn) leaves each of `lists` (the candidate, the rotation's
    pre-publish flush); the turn's row is above the watermark, and the commit carries it as any other."""
    # FIX commit-takes-caller-writes (R10): written by the attempt from its copy as well, the turn's message is live twice
    written = caller.take_caller_writes()
    for messages in lists:
        without_copies_of(messages, written)


def input_rows(messages: list[Message]) -> list[int]:
    """The durable rows an attempt works from (its own unflushed messages have none yet)."""
    return sorted(m[ROW_ID] for m in messages if m.get(ROW_ID) is not None)


def static_summary(messages: list[Message]) -> str:
    """The deterministic fallback summary: what was compacted, by count and role, with no model involved."""
    users = sum(1 for m in messages if m["role"] == "user")
    return f"[static summary of {len(messages)} messages: {users} from the user, {len(messages) - users} replies]"


def build_candidate(before: list[Message], summary: str, now: float, keep_recent: int) -> list[Message]:
    """Summary, then the newest `keep_recent` messages verbatim (marker-free copies the commit re-stamps).

    The candidate always carries a user turn: if the kept tail has none, the last user message is anchored
    in front of it.
    """
    split = max(len(before) - keep_recent, 0)
    head, tail = before[:split], before[split:]
    if not any(m["role"] == "user" for m in tail):
        tail = [m for m in head if m["role"] == "user"][-1:] + tail
    return [new_message("user", summary, now, is_summary=True)] + [without_markers(m) for m in tail]
