"""The history of a run: every event with its sequence number, time and task.

Both runtimes record one (`World`'s history, `TrioRuntime.events`); invariant checkers read it, the trace
renders it, and its canonical form is what the digest hashes. The trace shows an event as its `kind` and
its `fields` (`Event.trace_fields()`), so typing the events changed nothing a trace says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contract.events.base import Event


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    seq: int
    time: float
    task: str
    event: Event

    @property
    def kind(self) -> str:
        return self.event.kind

    @property
    def fields(self) -> dict[str, Any]:
        return self.event.trace_fields()

    def canonical(self) -> dict[str, Any]:
        """A plain dict with a fixed key order, for JSONL and hashing."""
        return {"seq": self.seq, "t": round(self.time, 9), "task": self.task, "kind": self.kind, "fields": self.fields}
