"""Invariants of context-overflow recovery: a transient block is never taken for exhaustion (R23).

The classes of refusal are spelled out here rather than imported, so the checker does not trust the
reference's own taxonomy: a breaker (`ineffective`), a candidate that changed nothing (`no_progress`) or
would grow (`would_grow`) prove compression cannot shrink the context; anything else is transient.
"""

from __future__ import annotations

from sim.history import HistoryEvent
from sim.invariants.base import Invariant, Violation

EXHAUSTED = frozenset({"ineffective", "no_progress", "would_grow"})


class NoFalseAutoReset(Invariant):
    name = "no_false_auto_reset"
    races = ("R23",)
    description = "A session is auto-reset for an overflow only when the last compression attempt on it proved compression exhausted, never after a transient block."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._last: dict[str, HistoryEvent] = {}  # session -> its last finished attempt

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "compaction.finished":
            self._last[fields["session"]] = event
        elif event.kind == "session.auto_reset":
            last = self._last.get(fields["from"])
            if last is None or last.fields.get("reason") not in EXHAUSTED:
                why = "no attempt" if last is None else f"{last.fields.get('status')} ({last.fields.get('reason')})"
                return self.violation(f"{fields['from']} was auto-reset though its last compression was {why}, not exhausted", last, event)
        return None


class OverflowRecoveryIgnoresCooldown(Invariant):
    name = "overflow_recovery_ignores_cooldown"
    races = ("R23",)
    description = "The compression a provider-proven context overflow triggers is never blocked by a failure cooldown."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._overflow: dict[str, HistoryEvent] = {}  # task -> its overflow, until its recovery returns
        self._blocked: dict[str, HistoryEvent] = {}  # attempt -> its cooldown block

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "turn.context_overflow":
            self._overflow[event.task] = event
        elif event.kind in ("compaction.blocked", "compaction.refused") and fields["reason"] == "cooldown":
            self._blocked[fields["attempt"]] = event
        elif event.kind == "host.returned" and event.task in self._overflow:
            overflow = self._overflow.pop(event.task)
            blocked = self._blocked.get(fields["attempt"])
            if blocked is not None:
                return self.violation(
                    f"the recovery of {overflow.fields['session']}'s context overflow (attempt {fields['attempt']}) "
                    "was blocked by a failure cooldown", overflow, blocked,
                )
        return None
