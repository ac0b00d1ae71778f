"""The stress run's logs as one history: the reader of `reference/eventlog.py`'s JSONL lines.

Each line is `{"t", "now", "process", "pid", "task", "kind", "fields"}`. Lines from all logs are merged by
`t` (each worker stamps an event with the moment its last write held SQLite's lock, so writes sort in commit
order) and numbered; a task name is prefixed with its process, so tasks of different processes never mix.
The parent's `process.crashed` / `process.exited` lines name only a pid: they get the process name of the
last `process.started` with that pid. A line cut short by SIGKILL (the last of a log) is dropped. Each line
becomes a typed event (`contract.events.from_trace`), so the invariants read a real run as they read a
simulated one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.events import ProcessCrashed, ProcessExited, ProcessStarted, from_trace
from contract.history import HistoryEvent

DEATHS = (ProcessCrashed, ProcessExited)
_DEATH_KINDS = {cls.kind for cls in DEATHS}


def read_lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(text))
        except json.JSONDecodeError:
            continue  # the write a SIGKILL interrupted
    return lines


@dataclass(frozen=True)
class MergedHistory:
    """The events in commit order, each with its order key (`keys[i]` for `events[i]`).

    An event's time is the clock reading its store operation used (what a lease's expiry was computed from);
    its key is when that operation held the write lock, which orders events across processes and says
    whether a process had died by then.
    """

    events: list[HistoryEvent]
    keys: list[float]


def merged_history(paths: Iterable[Path]) -> MergedHistory:
    """Every log's events in one commit order, as the simulator's history events."""
    lines = [(line["t"], index, position, line) for index, path in enumerate(sorted(paths))
             for position, line in enumerate(read_lines(path))]
    lines.sort(key=lambda entry: entry[:3])
    names: dict[int, str] = {}
    events = []
    for seq, (_, _, _, line) in enumerate(lines):
        fields = dict(line["fields"])
        if line["kind"] == ProcessStarted.kind:
            names[int(fields["pid"])] = fields["process"]
        elif line["kind"] in _DEATH_KINDS:
            fields.setdefault("process", names.get(int(fields["pid"]), f"pid{fields['pid']}"))
        task = f"{line['process']}/{line['task']}"
        events.append(HistoryEvent(seq, line.get("now", line["t"]), task, from_trace(line["kind"], fields)))
    return MergedHistory(events, [entry[0] for entry in lines])
