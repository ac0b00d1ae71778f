"""The stress run's logs as one history: the reader of `reference/eventlog.py`'s JSONL lines.

Each line is `{"t", "process", "pid", "task", "kind", "fields"}`. Lines from all logs are merged by time
(each worker stamps an event with the moment its last write held SQLite's lock, so writes sort in commit
order) and numbered; a task name is prefixed with its process, so tasks of different processes never mix.
The parent's `process.crashed` / `process.exited` lines name only a pid: they get the process name of the
last `process.started` with that pid. A line cut short by SIGKILL (the last of a log) is dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from sim.history import HistoryEvent

DEATHS = ("process.crashed", "process.exited")


def read_lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(text))
        except json.JSONDecodeError:
            continue  # the write a SIGKILL interrupted
    return lines


def merged_history(paths: Iterable[Path]) -> list[HistoryEvent]:
    """Every log's events in one time order, as the simulator's history events."""
    lines = [(line["t"], index, position, line) for index, path in enumerate(sorted(paths))
             for position, line in enumerate(read_lines(path))]
    lines.sort(key=lambda entry: entry[:3])
    names: dict[int, str] = {}
    history = []
    for seq, (_, _, _, line) in enumerate(lines):
        fields = dict(line["fields"])
        if line["kind"] == "process.started":
            names[int(fields["pid"])] = fields["process"]
        elif line["kind"] in DEATHS:
            fields.setdefault("process", names.get(int(fields["pid"]), f"pid{fields['pid']}"))
        history.append(HistoryEvent(seq, line["t"], f"{line['process']}/{line['task']}", line["kind"], fields))
    return history
