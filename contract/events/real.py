"""Real runs (`reference/stress_worker.py`, `sim/stress/`).

A stress run records these beside the reference's own events: worker processes on one SQLite file, struck by
their parent with signals. A worker writes its events to its own JSONL log; the parent writes the signals it
sends and the deaths it sees (`process.crashed` for a SIGKILL, `process.exited` for any other end) to its
own, naming the worker by pid and slot; the log reader names the process from the worker's `process.started`.
"""

from __future__ import annotations

from contract.events.base import Event, event, trace
from contract.events.faults import FaultFired


@event
class ProcessStopping(Event):
    """A real stress worker is stopping cleanly (SIGTERM, or SIGINT at the prompt)."""

    kind = "process.stopping"
    process: str
    signal: str = trace(note="the signal's name, `SIGTERM` or `SIGINT`")


@event
class ProcessExited(Event):
    """The stress parent saw a worker end other than by its SIGKILL (a clean stop, or it died by itself), while it
    was certainly dead and not yet reaped."""

    kind = "process.exited"
    feeds = ("R24",)
    process: str = trace(note="named by the log reader, from the worker's own `process.started`")
    pid: int
    slot: str


@event
class StressSignal(Event):
    """The stress parent sent a worker a signal (SIGINT, SIGKILL, SIGSTOP and its SIGCONT)."""

    kind = "stress.signal"
    pid: int
    slot: str
    signal: str = trace(note="the signal's name")


@event
class StressLeasePlanted(Event):
    """The stress parent planted an unexpired lease row whose holder names a live process of this host, on its
    pid, started at another time than the holder records: the kernel recycled a dead holder's pid. The workers'
    real dead-holder probe must find it dead and reclaim the row."""

    kind = "stress.lease_planted"
    feeds = ("R24",)
    session: str
    holder: str


@event
class RealStoreBusyFired(FaultFired):
    """SQLite itself answered "database is locked" to a real worker's store call: a stress run's own `db_busy`,
    with no scenario, so no fault index and no firing number."""

    # A FaultFired whose fault and firing may be absent: no handler of FaultFired reads either field.
    fault: int | None = trace(omit_if_none=True, default=None, note="absent: no scenario declared it")  # type: ignore[assignment]  # wider than FaultFired's int: see above
    firing: int | None = trace(omit_if_none=True, default=None, note="absent")  # type: ignore[assignment]  # as `fault`
    op: str = trace(note="the store operation")
    phase: str = trace(note="`real`")
