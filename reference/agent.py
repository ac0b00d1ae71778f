"""The agent: the turn loop that persists every message once, compresses when the context grows, and
follows its session across rotations (§2 steps 1-3, 11, 18, 19).

Durability is decided per message by the `_db_persisted` marker alone (R10/R12). Compression runs as a
pooled job the host waits on with a budget; a hard interrupt (Ctrl+C) goes through the active fence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contract.events import (
    HardCancelFinished,
    HardCancelRequested,
    HostReturned,
    HostStarted,
    SessionAdopted,
    SessionAutoReset,
    SessionCloseCleared,
    SessionReopened,
    TurnContextOverflow,
    TurnOverflowDeferred,
    TurnPersisted,
)
from contract.ids import AttemptId, SessionId
from contract.points import TURN_FLUSH, TURN_MODEL
from contract.runtime import Runtime
from reference.attempt import Compressor
from reference.compactor import CompactionJob, CompactorDeps, Outcome, Summarizer
from reference.config import CompactionConfig
from reference.cooldown import Cooldowns
from reference.db import Database
from reference.fence import CommitFence, FenceStack
from reference.host import HostWait
from reference.lease import Process, ProcessProbe
from reference.pool import CompressionPool
from reference.provider import ContextLengthExceeded
from reference.store import EXPLICIT_CLOSE_REASONS, SessionClosedByCompression
from reference.transcript import (
    ROW_ID,
    Message,
    appended_meanwhile,
    estimate_tokens,
    fingerprint,
    from_row,
    loaded_beside_unsaved,
    new_message,
    persist,
    take_stamps,
    unpersisted,
)


class PersistenceFailed(Exception):
    """The turn could not be saved: its session was closed by compression and no live tip could be adopted.

    The message says so, instead of the old "often a full disk" guess that sent users after the wrong cause.
    """

    cause = "compression_closed"

    def __init__(self, session: str) -> None:
        super().__init__(
            f"session {session!r} was closed by compression and no live continuation could be adopted; "
            "the turn was not saved"
        )
        self.session = session


@dataclass
class TurnResult:
    session_id: str
    persisted: list[int]
    compaction: Outcome | None
    interrupted: bool


# Refusals that prove compression cannot shrink this context now: the breaker, or a candidate that changed
# nothing or would grow. Anything else (a cooldown, a backoff, a busy lease, a timeout) is transient.
EXHAUSTION_REASONS = frozenset({"ineffective", "no_progress", "would_grow"})

# Outcomes whose list is what a commit left live in the session.
COMMITTED = frozenset({"committed", "rotated"})


def handed_back(outcome: Outcome, caller: list[Message], held: int) -> list[Message]:
    """The caller's transcript as the attempt leaves it: a commit's whole list (the live rows it left), the
    caller's messages in any other list handed back, else the caller's own list as it is now."""
    if outcome.messages is None:
        return caller[:held]
    return outcome.messages if outcome.status in COMMITTED else outcome.messages[:held]


def default_reply(text: str) -> str:
    return f"ack: {text}"


class Agent:
    """One conversation on one session. Several agents (and processes) may share a store."""

    def __init__(
        self,
        rt: Runtime,
        db: Database,
        provider: Summarizer,
        *,
        session_id: str,
        process: Process,
        config: CompactionConfig | None = None,
        pool: CompressionPool | None = None,
        processes: ProcessProbe | None = None,
        reply: Callable[[str], str] = default_reply,
    ) -> None:
        self._rt = rt
        self._db = db
        self.config = config or CompactionConfig()
        self.process = process
        self.pool = pool or CompressionPool(rt, self.config.pool_cap)
        self.session_id = SessionId(session_id)
        self.caller_session_id = self.session_id
        self.messages: list[Message] = []
        self.fences = FenceStack()
        self.compressor = Compressor(rt)
        self.cooldowns = Cooldowns(rt, db, self.compressor, self.config)
        self._deps = CompactorDeps(
            rt, db, provider, self.config, self.compressor, self.cooldowns, self.pool, self.process, processes,
            self._bind_session,
        )
        self._reply = reply
        self._hard_event = rt.event()
        self._turns = 0
        self._newest_commit = 0  # the claim of the newest commit whose transcript this agent took
        self._turns_running = 0  # turns in progress now: a Ctrl+C between them stops nothing

    async def open(self) -> None:
        """Create the session row, or load the durable transcript of an existing one."""
        if await self._db.call("get_session", self.session_id) is None:
            await self._db.call("create_session", self.session_id)
        else:
            self.messages = [from_row(row) for row in await self._db.call("active_messages", self.session_id)]

    # ---- the turn loop ---------------------------------------------------------------------------

    async def run_turn(self, text: str, *, platform_message_id: str | None = None) -> TurnResult:
        """Recover the session, take the user turn, compress if over threshold, reply, persist once."""
        self._turns += 1
        self._hard_event = self._rt.event()
        self._turns_running += 1
        try:
            return await self._run_turn(text, platform_message_id)
        finally:
            self._turns_running -= 1

    async def _run_turn(self, text: str, platform_message_id: str | None) -> TurnResult:
        await self._recover_session()
        extra = {} if platform_message_id is None else {"platform_message_id": platform_message_id}
        self.messages.append(new_message("user", text, self._rt.now(), **extra))
        if platform_message_id is not None and self.config.gateway_writes_on_receipt:
            await self._write_on_receipt(self.messages[-1])
        compaction = None
        if estimate_tokens(self.messages) >= self.config.threshold_tokens:
            compaction = await self.compress()
        interrupted = self._hard_event.is_set()
        if not interrupted and self._overflows():
            interrupted = not await self._recover_overflow()
        if not interrupted:
            interrupted = not await self._answer(text)
        persisted = await self.flush()
        return TurnResult(self.session_id, persisted, compaction, interrupted)

    async def flush(self) -> list[int]:
        """Write every message not yet durable; the marker is the only thing that says "already written"."""
        await self._rt.checkpoint(TURN_FLUSH)
        pending = unpersisted(self.messages)
        if not pending:
            return []
        return await self._persist_turn_messages(pending)

    async def _persist_turn_messages(self, pending: list[Message]) -> list[int]:
        """Append this turn's messages (following a rotation) and report each row the user can rely on."""
        row_ids = await self._append_following_rotation(pending)
        for message, row_id in zip(pending, row_ids):
            self._rt.emit(TurnPersisted(
                session=self.session_id, caller_session=self.caller_session_id, turn=self._turns, role=message["role"],
                row=row_id,
            ))
        return row_ids

    async def _write_on_receipt(self, message: Message) -> None:
        """The gateway's write of a platform message as it takes it, before the turn runs (#104653).

        Fail-open: if it fails, the message stays unmarked and the turn's flush writes it; if the failed write
        did land (an error after its COMMIT), the store finds the row by its platform message id.
        """
        try:
            await self._persist_turn_messages([message])
        except Exception:  # recorded as append.failed; the flush is the second writer, never a lost message
            return

    async def _append_following_rotation(self, pending: list[Message]) -> list[int]:
        """Append to the session; if it was rotated meanwhile, adopt its live tip once and retry there."""
        adopted = False
        while True:
            target = self.session_id
            try:
                if unpersisted(pending):
                    await persist(self._rt, self._db, target, unpersisted(pending))
                return [message[ROW_ID] for message in pending]
            except SessionClosedByCompression as closed:
                # FIX adopt-tip-on-closed-write (R15): follow the chain to its live tip once per flush; else fail closed, naming compression
                if adopted or not await self._adopt_tip(target):
                    raise PersistenceFailed(target) from closed
                adopted = True
                take_stamps(pending, self.messages)  # what the agent's own rotation already wrote into the tip

    async def _recover_session(self) -> None:
        """Turn start: a stale explicit close is cleared; a rotated session continues in its tip; a rotation
        that left no child is reopened."""
        row = await self._db.call("get_session", self.session_id)
        if row is not None and row.end_reason in EXPLICIT_CLOSE_REASONS:
            await self._clear_explicit_close()
        if row is None or not row.rotated or await self._adopt_tip(self.session_id):
            return
        # FIX reopen-orphan-at-turn-start (R20): a parent closed without a published child refuses every write forever
        if await self._db.call("reopen_orphaned", self.session_id):
            self._rt.emit(SessionReopened(session=self.session_id))

    async def _clear_explicit_close(self) -> None:
        """This agent is starting a turn on its session, so an explicit close on it missed a live conversation.

        Only the routing host knows that: publication refuses every explicit close, and a close made during
        this turn stays until the next turn starts (that turn's rotation fails closed).
        """
        # FIX routing-host-clears-explicit-close (R11): publication refuses an explicit close forever; left on a routed session it wedges every rotation
        cleared = await self._db.call("reopen_if_explicitly_closed", self.session_id)
        if cleared is not None:
            self._rt.emit(SessionCloseCleared(session=self.session_id, reason=cleared))

    async def _adopt_tip(self, closed: SessionId) -> bool:
        """Follow `closed`, a session found rotated, to the tip its chain continues in; True if there is one.

        The agent may be there already: its own attempt (a /compress beside a gateway turn) rotated `closed` and
        re-pointed it while this turn's write to `closed` was in flight.
        """
        found = await self._db.call("compression_tip", closed)
        # FIX closed-write-follows-own-rotation (R15/R18): judged against the agent's current session, the tip it already moved to looked like no continuation
        if found is None or found == closed:
            return False
        if found == self.session_id:
            return True
        tip = SessionId(found)
        # FIX adopt-loads-live-rows (R15): the tip's summarized rows sit beside their summary; loaded, the agent answers from both
        rows = await self._db.call("active_messages", tip)
        self._rt.emit(SessionAdopted(from_session=self.session_id, to_session=tip))
        self.messages = loaded_beside_unsaved([from_row(row) for row in rows], self.messages)
        self.session_id = self.caller_session_id = tip
        return True

    async def _answer(self, text: str) -> bool:
        """The main model answers the turn. Its refusal of the context as too long (`context_length_exceeded`, a
        fault at `turn.model`) is a provider-proven overflow, recovered as one before the answer; False: the
        recovery deferred the turn, which gets no reply."""
        try:
            await self._rt.checkpoint(TURN_MODEL)
        except ContextLengthExceeded:
            if not await self._recover_overflow():
                return False
        self.messages.append(new_message("assistant", self._reply(text), self._rt.now()))
        return True

    # ---- context overflow (R23) -------------------------------------------------------------------

    def _overflows(self) -> bool:
        """The model would refuse this context as too long (context_length_exceeded)."""
        limit = self.config.context_limit_tokens
        return limit > 0 and estimate_tokens(self.messages) > limit

    async def _recover_overflow(self) -> bool:
        """Provider-proven overflow: compress once, past the failure cooldown; reset the session only if
        compression is exhausted. True if the turn may go on to its reply (False: deferred, no reply)."""
        self._rt.emit(TurnContextOverflow(session=self.session_id, tokens=estimate_tokens(self.messages)))
        # FIX overflow-bypasses-cooldown (R23): the provider proved the overflow; a timeout cooldown must not veto the one attempt that can fix it
        outcome = await self.compress(bypass_cooldown=True)
        if not self._overflows():
            return True
        # FIX transient-block-is-not-exhaustion (R23): a cooldown, backoff or busy lease defers recovery; only a refusal that cannot shrink proves exhaustion
        if outcome.reason not in EXHAUSTION_REASONS:
            self._rt.emit(TurnOverflowDeferred(session=self.session_id, reason=outcome.reason))
            return False
        await self._auto_reset(outcome.reason)
        return True

    async def _auto_reset(self, reason: str) -> None:
        """Compression is exhausted: end the session as a reset and go on in a fresh one (the gateway's
        "Session auto-reset"); only this turn's unsaved messages move along."""
        old = self.session_id
        fresh = old.minted_child(f"{self.process.holder(0)}:{old}:reset:{self._turns}", self._rt.now())
        await self._db.call("end_session", old, reason="session_reset")
        await self._db.call("create_session", fresh, parent=old, model_config={"_reset_from": old})
        self.session_id = self.caller_session_id = fresh
        self.messages = unpersisted(self.messages)
        self._rt.emit(SessionAutoReset(from_session=old, to_session=fresh, reason=reason))

    # ---- compression -----------------------------------------------------------------------------

    async def compress(self, *, force: bool = False, bypass_cooldown: bool = False) -> Outcome:
        """Run one pooled attempt under the host's budget; `force` (manual /compress) skips the gates,
        `bypass_cooldown` (overflow recovery) only the failure cooldown."""
        # FIX command-starts-unstopped (R1): a stop latched earlier (an idle prompt, a stopped /compress) would refuse this /compress's commit
        if not self._turns_running:
            self._hard_event = self._rt.event()  # a /compress typed at the prompt starts unstopped, as a turn does
        number = self.process.next_attempt()
        attempt = AttemptId.of(self.process.name, number)
        # the caller's transcript is the list it holds now, as long as it is now; a turn of this agent that runs
        # meanwhile (a message typed while /compress runs) appends after it or adopts a rotated session's tip in a
        # new list, and those messages are that turn's, not this caller's
        caller, held = self.messages, len(self.messages)
        before = fingerprint(self.messages)
        mode = "forced" if force else "overflow" if bypass_cooldown else "automatic"
        self._rt.emit(HostStarted(attempt=attempt, session=self.session_id, mode=mode))
        # FIX compress-beside-turn-starts-unstopped (R1): a /compress typed while a turn runs would share the stop pressed on that turn before it
        stop = self._rt.event() if force and self._turns_running else self._hard_event
        fence = CommitFence(self._rt, attempt, ceiling_s=self.config.ceiling_timeout_s, hard_event=stop)
        self.fences.push(fence)
        taken: list[Message] = []
        try:
            if not self.pool.try_admit():
                outcome = Outcome("saturated", "pool_saturated")
            else:
                job = CompactionJob(
                    self._deps, fence, number=number, session=self.session_id, source=self.messages, force=force,
                    bypass_cooldown=bypass_cooldown,
                )
                outcome = await HostWait(self._rt, self.config, self.cooldowns, job, fence, self.session_id).run()
                taken = job.taken
        finally:
            self.fences.remove(fence)
        # FIX late-commit-keeps-newer-transcript (R21): a commit that returns after a newer one reached the agent would hand back the transcript that one replaced
        superseded = outcome.status in COMMITTED and outcome.generation < self._newest_commit
        if not superseded:
            self._apply(outcome, taken)
        # FIX rebind-caller-session (R18): the worker re-pointed the agent; the host's own binding must follow it
        self.caller_session_id = self.session_id
        handed = self.messages if superseded else handed_back(outcome, caller, held)
        self._rt.emit(HostReturned(
            attempt=attempt, status=outcome.status, session=self.session_id, caller_session=self.caller_session_id,
            transcript_before=before, transcript_after=fingerprint(handed),
        ))
        return outcome

    def _apply(self, outcome: Outcome, taken: list[Message]) -> None:
        """Take the list the outcome hands back; what a turn of this agent appended meanwhile stays after it."""
        if outcome.status in COMMITTED:
            self._newest_commit = outcome.generation
        if outcome.status == "adopted" and outcome.session_id is not None:
            self.session_id = SessionId(outcome.session_id)
            self.messages = loaded_beside_unsaved(outcome.messages or [], self.messages)
        elif outcome.messages is not None:
            # FIX keep-appends-made-during-attempt (R4): a message typed while the attempt ran is in no list it handed back; replaced, the turn's flush never saves it
            self.messages = outcome.messages + appended_meanwhile(self.messages, taken, outcome.messages)

    def _bind_session(self, session_id: SessionId) -> None:
        """The worker's re-point after a rotation (the agent's attribute, not the host's own binding)."""
        self.session_id = session_id

    async def hard_interrupt(self) -> bool:
        """Ctrl+C: stop the turn and cancel the active attempt unless its commit was already admitted.

        True if an attempt was cancelled. A running summary is unwound at once and rolled back; its lease is
        freed by the worker, or after a short grace by the fence's holder-scoped hook.
        """
        session = self.session_id
        self._rt.emit(HardCancelRequested(session=session))
        self._hard_event.set()
        self.fences.press()  # a /compress typed beside a turn has a stop of its own: a press reaches it while it is the active one
        fence = self.fences.top
        # FIX hard-cancel-through-fence (R1): a plain interrupt is masked during the summary; only the fence stops it safely
        cancelled = fence is not None and await self._cancel_hard(fence)
        self._rt.emit(HardCancelFinished(session=session, cancelled=cancelled))
        return cancelled

    async def _cancel_hard(self, fence: CommitFence) -> bool:
        """Cancel through the fence (waiting out an admitted commit), then let the worker roll back and
        release; after the grace the holder-scoped hook frees the lease if the worker has not."""
        if not await fence.cancel_before_commit(hard=True, release=False):
            return False
        with self._rt.move_on_after(self.config.cancelled_worker_grace_s):
            await fence.worker_done.wait()
        await fence.release_cancelled()
        return True
