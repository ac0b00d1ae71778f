"""Invariants of compressor state: stale attempts write nothing; refusals feed the breaker."""

from __future__ import annotations

from sim.history import HistoryEvent
from sim.invariants.base import Invariant, Violation

GIVEN_UP = ("fence.cancel_won", "host.timeout")


class StaleAttemptWritesNoState(Invariant):
    name = "stale_attempt_writes_no_state"
    races = ("R2", "R21")
    description = "An attempt its host gave up on never clears the cooldown; a superseded attempt never restores compressor state."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._given_up: dict[str, HistoryEvent] = {}
        self._claims: dict[str, tuple[int, HistoryEvent]] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        kind, attempt = event.kind, event.fields.get("attempt")
        if kind in GIVEN_UP:
            self._given_up.setdefault(attempt, event)
        elif kind == "cooldown.cleared" and attempt in self._given_up:
            return self.violation(f"attempt {attempt} cleared the cooldown after its host gave up on it", self._given_up[attempt], event)
        elif kind == "attempt.claimed":
            process = attempt.rsplit(".", 1)[0]
            self._claims[process] = max(self._claims.get(process, (0, event)), (event.fields["generation"], event), key=lambda c: c[0])
        elif kind == "attempt.restored":
            newest = self._claims.get(attempt.rsplit(".", 1)[0])
            if newest is not None and newest[0] > event.fields["generation"]:
                return self.violation(
                    f"attempt {attempt} (generation {event.fields['generation']}) restored compressor state over "
                    f"generation {newest[0]}", newest[1], event,
                )
        return None


class WouldGrowLatchesBreaker(Invariant):
    name = "would_grow_latches_breaker"
    races = ("R13",)
    description = "A committed compaction never grows the transcript, and at most two would-grow refusals happen in a row before the breaker blocks."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._streak: dict[str, list[HistoryEvent]] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "compaction.committed":
            self._streak.pop(fields["session"], None)
            before, after = fields.get("tokens_before"), fields.get("tokens")
            if before is not None and after is not None and after > before:
                return self.violation(f"attempt {fields['attempt']} committed {after} tokens over {before}", event)
        elif event.kind == "compaction.refused" and fields.get("reason") == "would_grow":
            streak = self._streak.setdefault(fields["session"], [])
            streak.append(event)
            if len(streak) > 2:
                return self.violation(f"{len(streak)} would-grow refusals in a row on {fields['session']}: the breaker never latched", *streak)
        return None
