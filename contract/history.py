"""The history of a run: every event with its sequence number, time and task.

Both runtimes record one (`World`'s history, `TrioRuntime.events`); invariant checkers read it, the trace
renders it, and its canonical form is what the digest hashes. The trace shows an event as its `kind` and
its `fields` (`Event.trace_fields()`), so typing the events changed nothing a trace says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeGuard, TypeVar

from contract.events.base import Event

E_co = TypeVar("E_co", bound=Event, covariant=True)
E = TypeVar("E", bound=Event)


@dataclass(frozen=True, slots=True)
class HistoryEvent(Generic[E_co]):
    """One recorded event; typed by its event's class, so a reader that kept a `HistoryEvent[LeaseAcquired]`
    reads its `.event` as one without a cast (a history of mixed kinds is `HistoryEvent[Event]`)."""

    seq: int
    time: float
    task: str
    event: E_co

    @property
    def kind(self) -> str:
        return self.event.kind

    @property
    def fields(self) -> dict[str, Any]:
        return self.event.trace_fields()

    def canonical(self) -> dict[str, Any]:
        """A plain dict with a fixed key order, for JSONL and hashing."""
        return {"seq": self.seq, "t": round(self.time, 9), "task": self.task, "kind": self.kind, "fields": self.fields}


def is_of(record: HistoryEvent[Event], kind: type[E]) -> TypeGuard[HistoryEvent[E]]:
    """Whether `record` holds an event of class `kind` (a subclass counts): a reader scanning a mixed history then
    reads the record as a `HistoryEvent[kind]`."""
    return isinstance(record.event, kind)
