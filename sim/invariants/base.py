"""What an invariant is, what it may look at, and what it reports.

An invariant is a small stateful checker for one run. Safety properties are checked as each event is
recorded (`on_event`): every step that changes something observable records an event, so this is "after
every step" without paying for a check on steps that changed nothing. Liveness properties, and safety
properties of the final state, are checked once the run is quiescent (`at_end`). A violation names the
invariant, explains itself in one line, and lists the events that witness it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Sequence

from sim.history import HistoryEvent

_HOLDER_ATTEMPT = re.compile(r"proc=([^:]+):(?:[a-z]+=[^:]*:)*?attempt=(\d+)")


@dataclass(frozen=True)
class Violation:
    invariant: str
    explanation: str
    witnesses: tuple[int, ...]
    time: float

    def as_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "explanation": self.explanation, "witnesses": list(self.witnesses), "time": self.time}


class SystemView(Protocol):
    """What invariants may read of the system under test besides the history."""

    store: Any
    config: Any

    def holder_is_dead(self, holder: str) -> bool: ...


class Invariant:
    name: ClassVar[str]
    races: ClassVar[tuple[str, ...]]
    description: ClassVar[str]

    def __init__(self, system: SystemView) -> None:
        self.system = system

    def on_event(self, event: HistoryEvent) -> Violation | None:
        return None

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        return None

    def violation(self, explanation: str, *witnesses: HistoryEvent | None) -> Violation:
        """A violation witnessed by `witnesses` (a None, for a check with no triggering event, is skipped)."""
        present = [event for event in witnesses if event is not None]
        time = max((event.time for event in present), default=0.0)
        return Violation(self.name, explanation, tuple(event.seq for event in present), time)


def attempt_of_holder(holder: str) -> str | None:
    """The attempt id (`<process>.<n>`) a lease holder id names."""
    match = _HOLDER_ATTEMPT.search(holder)
    return None if match is None else f"{match.group(1)}.{match.group(2)}"
