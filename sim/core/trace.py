"""Rendering a run's history: fixed-column text for people, JSONL for tools, and the trace digest.

The digest is SHA-256 over the canonical JSONL (sorted keys, fixed float rounding) including the decision
list, so two runs of one program have the same digest exactly when they made the same choices and did the
same things in the same order at the same times.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from contract.history import HistoryEvent
from sim.kernel.decisions import Decision
from sim.strategies.serialization import to_json

TIME_WIDTH = 12
TASK_WIDTH = 18
KIND_WIDTH = 30


def _fields_text(fields: dict[str, Any]) -> str:
    return " ".join(f"{key}={_value_text(value)}" for key, value in sorted(fields.items()))


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) and value and " " not in value else json.dumps(value, sort_keys=True, default=str)


def render_text(events: Iterable[HistoryEvent]) -> str:
    """One event per line: virtual time, task, kind, then the fields as key=value."""
    lines = []
    for event in events:
        time = f"{event.time:.6f}s".rjust(TIME_WIDTH)
        lines.append(f"{time}  {event.task[:TASK_WIDTH]:<{TASK_WIDTH}}  {event.kind[:KIND_WIDTH]:<{KIND_WIDTH}}  {_fields_text(event.fields)}".rstrip())
    return "\n".join(lines)


def jsonl_lines(events: Iterable[HistoryEvent], decisions: Sequence[Decision]) -> list[str]:
    """The canonical trace: one JSON object per event, then one line with the decision list."""
    lines = [json.dumps(event.canonical(), sort_keys=True, separators=(",", ":"), default=str) for event in events]
    lines.append(json.dumps({"decisions": [to_json(d) for d in decisions]}, separators=(",", ":")))
    return lines


def render_jsonl(events: Iterable[HistoryEvent], decisions: Sequence[Decision]) -> str:
    return "\n".join(jsonl_lines(events, decisions)) + "\n"


def digest(events: Iterable[HistoryEvent], decisions: Sequence[Decision]) -> str:
    hasher = hashlib.sha256()
    for line in jsonl_lines(events, decisions):
        hasher.update(line.encode())
        hasher.update(b"\n")
    return hasher.hexdigest()
