"""The typed history of a run: every event with its virtual time, task, kind and fields.

Invariant checkers read it, the trace renders it, and its canonical form is what the digest hashes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    seq: int
    time: float
    task: str
    kind: str
    fields: dict[str, Any]

    def canonical(self) -> dict[str, Any]:
        """A plain dict with a fixed key order, for JSONL and hashing."""
        return {"seq": self.seq, "t": round(self.time, 9), "task": self.task, "kind": self.kind, "fields": self.fields}
