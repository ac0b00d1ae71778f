"""Invariants of context-overflow recovery: a transient block is never taken for exhaustion (R23).

The classes of refusal are spelled out here rather than imported, so the checker does not trust the
reference's own taxonomy: a breaker (`ineffective`), a candidate that changed nothing (`no_progress`) or
would grow (`would_grow`) prove compression cannot shrink the context; anything else is transient.
"""

from __future__ import annotations

from contract.events import CompactionBlocked, CompactionFinished, CompactionRefused, Event, HostReturned, SessionAutoReset, TurnContextOverflow, TurnPersisted
from contract.history import HistoryEvent
from contract.ids import AttemptId, SessionId
from contract.vocabulary import message_tokens
from sim.invariants.invariant import Invariant, Violation, handles, per_run

EXHAUSTED = frozenset({"ineffective", "no_progress", "would_grow"})
ROW_MARK = "_row_id"  # the key an agent marks a message durable with: the row it was written to


class NoFalseAutoReset(Invariant):
    """A session is auto-reset for an overflow only when the last compression attempt on it proved compression
    exhausted, never after a transient block.

    A reset is judged by what it was decided on: the session's last finished attempt when the resetting turn's
    own recovery came back. The reset's writes may wait at the store long after that (a slow `create_session`),
    and an attempt that finishes meanwhile (a `/compress` whose late worker was refused) is not what the turn
    decided on. Where the recovery has no host to come back to (`host.returned`: hermes-agent compacts on the
    turn's own thread, and its gateway resets after the turn), the session's last finished attempt is that.
    """

    name = "no_false_auto_reset"
    races = ("R23",)
    needs = frozenset({"compaction.finished", "session.auto_reset"})

    _last: dict[SessionId, tuple[CompactionFinished, HistoryEvent[Event]]] = per_run(dict)  # session -> its last finished attempt
    # task -> (the session its compress came back for, that session's last finished attempt then)
    _came_back: dict[str, tuple[SessionId, tuple[CompactionFinished, HistoryEvent[Event]] | None]] = per_run(dict)

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> None:
        self._last[event.session] = (event, record)

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> None:
        self._came_back[record.task] = (event.session, self._last.get(event.session))

    @handles(SessionAutoReset)
    def auto_reset(self, event: SessionAutoReset, record: HistoryEvent[SessionAutoReset]) -> Violation | None:
        session, decided_on = self._came_back.get(record.task, (None, None))
        if session != event.from_session:
            decided_on = self._last.get(event.from_session)
        last, finished = decided_on or (None, None)
        if last is None or last.reason not in EXHAUSTED:
            why = "no attempt" if last is None else f"{last.status} ({last.reason})"
            return self.violation(f"{event.from_session} was auto-reset though its last compression was {why}, not exhausted",
                                  finished, record)
        return None


class OverflowRecoveryIgnoresCooldown(Invariant):
    """The compression a provider-proven context overflow triggers is never blocked by a failure cooldown.

    Judged when the recovery's attempt is over, on the overflowing turn's task: where its host returns
    (`host.returned`), or, where the attempt runs on the turn's own task with no host (hermes-agent), where it
    finishes (`compaction.finished`).
    """

    name = "overflow_recovery_ignores_cooldown"
    races = ("R23",)
    needs = frozenset({"turn.context_overflow", "compaction.blocked", "compaction.refused", "compaction.finished"})

    _overflow: dict[str, tuple[TurnContextOverflow, HistoryEvent[Event]]] = per_run(dict)  # task -> its overflow, until its recovery returns
    _blocked: dict[AttemptId, HistoryEvent[Event]] = per_run(dict)  # attempt -> its cooldown block

    @handles(TurnContextOverflow)
    def overflow(self, event: TurnContextOverflow, record: HistoryEvent[TurnContextOverflow]) -> None:
        self._overflow[record.task] = (event, record)

    @handles(CompactionBlocked, CompactionRefused)
    def blocked(self, event: CompactionBlocked | CompactionRefused, record: HistoryEvent[CompactionBlocked | CompactionRefused]) -> None:
        if event.reason == "cooldown":
            self._blocked[event.attempt] = record

    @handles(HostReturned, CompactionFinished)
    def recovered(self, event: HostReturned | CompactionFinished, record: HistoryEvent[HostReturned | CompactionFinished]) -> Violation | None:
        if record.task not in self._overflow:
            return None
        overflow, overflowed = self._overflow.pop(record.task)
        blocked = self._blocked.get(event.attempt)
        if blocked is not None:
            return self.violation(
                f"the recovery of {overflow.session}'s context overflow (attempt {event.attempt}) "
                "was blocked by a failure cooldown", overflowed, blocked,
            )
        return None


class ReplyFitsContext(Invariant):
    """With a context window set, every reply that becomes durable answers a context within it: the messages its
    agent held before the reply, one token per four characters and at least one per message.

    The model refuses a context longer than its window, so a turn whose context overflows must recover (compress,
    or reset the session) or go without a reply. Judged by what the agent sent (a /compress beside the turn only
    shrinks it meanwhile), not by the session's rows: a conversation reset or rotated under a turn leaves rows
    that are not its context. A reply no longer in its agent's memory when it lands is not judged.
    """

    name = "reply_fits_context"
    settings = frozenset({'context_limit_tokens'})
    races = ("R23",)

    @handles(TurnPersisted)
    def persisted(self, event: TurnPersisted, record: HistoryEvent[TurnPersisted]) -> Violation | None:
        limit = self.system.config.context_limit_tokens
        if limit <= 0 or event.role != "assistant" or event.writer is not None:
            return None
        slot = self.slot_of_task(record.task)
        if slot is None:
            return None
        held = slot.agent.messages
        at = next((index for index in range(len(held) - 1, -1, -1) if held[index].get(ROW_MARK) == event.row), None)
        if at is None:
            return None
        tokens = sum(message_tokens(message.get("content") or "") for message in held[:at])
        if tokens > limit:
            return self.violation(f"a reply (row {event.row}) answered {tokens} tokens of {slot.agent.session_id}, over the {limit}-token window", record)
        return None
