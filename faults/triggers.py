"""When a fault fires: at a virtual time, at the Nth hit of a named point, after an event, or at random.

A trigger is consulted at each hit of its fault's point (point faults: stalls, errors, DB failures) or
tells an action fault (Ctrl+C, a crash, a second process) the moment to act. Random triggers are
BUGGIFY-style: one draw at install decides whether the fault is active in this run (probability p), then
each hit fires with probability per_hit. Every draw goes through the World, so it is recorded and replayed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

_RESOLUTION = 1_000_000

Draw = Callable[[str, int], int]


class TriggerSpecLike(Protocol):
    """What a trigger reads of its spec (read-only: a frozen spec satisfies it)."""

    @property
    def at(self) -> float | None: ...

    @property
    def after_event(self) -> str | None: ...

    @property
    def nth(self) -> int | None: ...

    @property
    def point(self) -> str | None: ...

    @property
    def probability(self) -> float | None: ...

    @property
    def per_hit(self) -> float | None: ...

    @property
    def delay(self) -> float: ...

    @property
    def until(self) -> float | None: ...


class Trigger:
    """The firing rule of one fault in one run."""

    def __init__(self, spec: TriggerSpecLike, stream: str, draw: Draw) -> None:
        self.spec = spec
        self._stream = stream
        self._draw = draw
        self.hits = 0
        self.armed_at: float | None = None if spec.at is None else spec.at + spec.delay
        self.active = True
        if spec.probability is not None:
            self.active = self._chance(spec.probability)

    def _chance(self, probability: float) -> bool:
        return self._draw(self._stream, _RESOLUTION) < probability * _RESOLUTION

    def observe(self, kind: str, time: float) -> bool:
        """Arm on the first event of the awaited kind; True if this call armed the trigger."""
        if self.spec.after_event == kind and self.armed_at is None:
            self.armed_at = time + self.spec.delay
            return True
        return False

    def expired(self, now: float) -> bool:
        """Past its `until`: the trigger no longer acts."""
        return self.spec.until is not None and now > self.spec.until

    def fires_at_hit(self, now: float) -> bool:
        """Called at each hit of the fault's point; whether the fault fires at this one."""
        self.hits += 1
        spec = self.spec
        if self.expired(now):
            return False
        if spec.nth is not None:
            return self.hits == spec.nth
        if spec.probability is not None:
            return self.active and self._chance(spec.per_hit if spec.per_hit is not None else 1.0)
        return self.armed_at is not None and now >= self.armed_at

    def describe(self) -> dict[str, Any]:
        """The trigger's settings, for the fault's trace event."""
        spec = self.spec
        fields = {"at": spec.at, "after_event": spec.after_event, "nth": spec.nth, "probability": spec.probability}
        return {key: value for key, value in fields.items() if value is not None}
