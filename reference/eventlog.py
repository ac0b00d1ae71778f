"""The event log of a real run: one JSON line per event, written the moment it happens.

A line is `{"t", "now", "process", "pid", "task", "kind", "fields"}`; `sim/stress/log.py` reads them back.
Each line is flushed at once, so a SIGKILL loses only events that had not happened yet (at worst the last
line, cut short, which the reader drops).
"""

from __future__ import annotations

import json
import time
from typing import Any, TextIO

from contract.history import HistoryEvent
from reference.lease import Process


def write_event(out: TextIO, time_s: float, process: str, pid: int, task: str, kind: str, fields: dict[str, Any],
                now_s: float | None = None) -> None:
    """Append one event line (an event's kind and its trace fields) and flush it; `now_s` is the clock reading
    the store operation behind it used."""
    line = {"t": time_s, "now": time_s if now_s is None else now_s, "process": process, "pid": pid, "task": task,
            "kind": kind, "fields": fields}
    out.write(json.dumps(line, default=str) + "\n")
    out.flush()


class EventLog:
    """Appends each event as one JSON line, ordered across processes by the store's commit order.

    An event's order key (`t`) is the moment its process's last write transaction held SQLite's write lock,
    if one committed since the previous event; else the wall clock. Writers are serialized by that lock, so
    a release and the acquire it let through sort in the order they happened, whatever the scheduler did
    between a commit and its event. Keys never go backwards within a process. Its time (`now`) is the clock
    reading that transaction was given (a lease's expiry is that reading plus the TTL), or the key.
    """

    def __init__(self, out: TextIO, process: Process) -> None:
        self._out = out
        self._process = process
        self._now: float | None = None
        self._stamp: tuple[float, float | None] | None = None
        self._last = 0.0

    def note_now(self, now: float | None) -> None:
        """The clock reading the next store operation uses (None: it takes none)."""
        self._now = now

    def on_commit(self, op: str, phase: str) -> None:
        """The store's hook: runs inside every write transaction, before its COMMIT."""
        if phase == "before_commit":
            self._stamp = (time.time(), self._now)

    def __call__(self, record: HistoryEvent) -> None:
        stamp, self._stamp = self._stamp, None
        self._last = max(self._last, stamp[0] if stamp is not None else record.time)
        now = stamp[1] if stamp is not None else None
        write_event(self._out, self._last, self._process.name, self._process.pid, record.task, record.kind,
                    record.fields, now)
