"""Liveness after quiet: once nothing has happened for longer than any attempt or lease can last, the system
must serve a user again.

Every attempt ends within the host's total ceiling and every lease within one TTL after its holder stops
refreshing it, so a turn that begins after a silence of at least `ceiling_timeout_s + lease_ttl_s` meets a
system with nothing left in flight: whatever happened before (stalls, crashes, Ctrl+C, failed writes), it is
owed its reply, unless something of its own excuses it (`TurnAfterQuietPersists.at_end` names each). A platform
message delivered after such a silence is the same promise one step earlier. Generated workloads end with such
a probe turn per agent (`sim.swarm`); a scripted scenario whose drives leave such a gap is held to the same rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from contract.events import (
    FrontendCtrlC,
    FrontendTurnAbandoned,
    FrontendTurnFailed,
    FrontendTurnSubmitted,
    GatewayDelivered,
    GatewayTurnStarted,
    PointFaultFired,
    ProcessCrashed,
    ProcessRestarted,
    StoreFaultFired,
    TurnOverflowDeferred,
    TurnPersisted,
)
from contract.events.base import Event
from contract.history import HistoryEvent
from sim.invariants.invariant import Violation
from sim.invariants.lineage_reads import JudgesRefusedTurns

_TURN_STARTS = (FrontendTurnSubmitted, GatewayTurnStarted)
_TURN_ENDS = (FrontendTurnFailed, FrontendTurnAbandoned)


class TurnAfterQuietPersists(JudgesRefusedTurns):
    """A turn that starts after a silence longer than the host's ceiling plus one lease TTL persists its reply,
    and the user sees no error for it (unless they press Ctrl+C, its process is killed, or the model refused its
    context and recovery had to defer it); a platform message delivered then is taken by its gateway."""

    name = "turn_after_quiet_persists"
    settings = frozenset({'ceiling_timeout_s', 'lease_ttl_s'})
    races = ("R1", "R15", "R20", "R24")

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        config = self.system.config
        quiet_s = config.ceiling_timeout_s + config.lease_ttl_s
        for index, silence_s in _after_silence(history, quiet_s, (GatewayDelivered,)):
            if not self._taken_or_excused(history, index):
                record = history[index]
                assert isinstance(record.event, GatewayDelivered), record
                return self.violation(f"a platform message for {record.event.agent} delivered after {silence_s:g}s of quiet "
                                      "was never taken by its gateway", record)
        for index, silence_s in _after_silence(history, quiet_s, _TURN_STARTS):
            record = history[index]
            outcome = self._outcome(history, index)
            if outcome is not None and isinstance(outcome.event, FrontendCtrlC):
                continue  # the user stopped it: a reply is not owed
            if outcome is not None and isinstance(outcome.event, ProcessCrashed):
                continue  # its process was killed under it (maybe at the turn's own instant, after a stall)
            if outcome is not None and self.refused_in_ended_conversation(history, record, outcome):
                continue  # its conversation was reset or switched away from: there is nowhere to write it
            if outcome is not None and isinstance(outcome.event, TurnOverflowDeferred):
                continue  # the model refused its context and one compression could not bring it under: no reply (R23)
            if outcome is not None and isinstance(outcome.event, FrontendTurnFailed) \
                    and fault_raised_in_turn(history, record, outcome):
                continue  # an injected fault raised in it (its write, its read, its host's wait): the error it shows is that fault's
            if outcome is None or not isinstance(outcome.event, TurnPersisted):
                assert isinstance(record.event, _TURN_STARTS), record
                shown = "it never finished" if outcome is None else f"{outcome.kind} {outcome.fields}"
                return self.violation(f"a turn of {record.event.agent} started after {silence_s:g}s of quiet and was not "
                                      f"persisted: {shown}", record, outcome)
        return None

    def _taken_or_excused(self, history: Sequence[HistoryEvent[Event]], start: int) -> bool:
        """Whether the platform message delivered at `start` started its turn, or its gateway's process was down at
        the delivery (crashed, not yet restarted) or crashed after it."""
        delivered = history[start].event
        assert isinstance(delivered, GatewayDelivered), history[start]
        process = self._process_of_agent(delivered.agent)
        down = False
        for record in history[:start]:
            if isinstance(record.event, (ProcessCrashed, ProcessRestarted)) and self.system.process_of(record.event.process) == process:
                down = isinstance(record.event, ProcessCrashed)
        if down:
            return True
        for record in history[start + 1:]:
            event = record.event
            if isinstance(event, GatewayTurnStarted) and event.agent == delivered.agent and \
                    event.platform_message_id == delivered.platform_message_id:
                return True
            if isinstance(event, ProcessCrashed) and self.system.process_of(event.process) == process:
                return True
        return False

    def _process_of_agent(self, agent: str) -> str | None:
        slot = self.system.agents.get(agent)
        return None if slot is None else slot.spec.process

    def _outcome(self, history: Sequence[HistoryEvent[Event]], start: int) -> HistoryEvent[Event] | None:
        """How the turn at `start` ended: its persisted reply, its error or its deferred overflow (on its own task),
        the user's Ctrl+C, the crash of its agent's process, or nothing."""
        started = history[start].event
        assert isinstance(started, _TURN_STARTS), history[start]
        task, agent = history[start].task, started.agent
        process = self._process_of_agent(agent)
        for record in history[start + 1:]:
            event = record.event
            if isinstance(event, FrontendCtrlC) and event.agent == agent:
                return record
            if isinstance(event, ProcessCrashed) and self.system.process_of(event.process) == process:
                return record
            if record.task != task:
                continue
            if isinstance(event, TurnPersisted) and event.role == "assistant" or isinstance(event, TurnOverflowDeferred):
                return record
            if isinstance(event, (*_TURN_ENDS, *_TURN_STARTS)):
                return record

        return None


def fault_raised_in_turn(history: Sequence[HistoryEvent[Event]], start: HistoryEvent[Event],
                         failed: HistoryEvent[Event]) -> bool:

    """Whether an injected fault raised in the turn's own task between its `start` and its `failed` outcome (a
    store write failed around its COMMIT, or a point fault raised: a store read, the host's wait): the error the
    turn shows is the fault's documented effect.

    A silence is quiet only for what came before it: a fault window armed before it may still be open after it,
    and the turn itself may then meet it (a busy store as it adopts a rotated session's tip, say).
    """
    return any(record.task == failed.task and isinstance(record.event, (StoreFaultFired, PointFaultFired))
               for record in history[start.seq + 1:failed.seq])



def _after_silence(history: Sequence[HistoryEvent[Event]], quiet_s: float, kinds: tuple[type[Event], ...]) -> list[tuple[int, float]]:
    """The events of `kinds` (turn starts, deliveries) at an instant preceded by at least `quiet_s` without any
    event, with that silence.

    Events at the turn's own instant (a gateway's delivery, another agent's probe) do not break the silence.
    """
    found = []
    current = earlier = None  # the latest instant with events, and the one before it
    for index, record in enumerate(history):
        if record.time != current:
            current, earlier = record.time, current
        if isinstance(record.event, kinds) and earlier is not None and record.time - earlier >= quiet_s:
            found.append((index, record.time - earlier))
    return found
