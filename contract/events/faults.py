"""Fault firings (`faults/`).

Every firing of an injected fault is recorded, so a run shows that its faults happened. One kind,
`fault.fired`: the index of the fault in its scenario, its kind and the firing's number, then what
the kind adds (where it fired, for how long ...), one class per shape.
"""

from __future__ import annotations

from contract.events.base import Event, event, trace


@event
class FaultFired(Event):
    """An injected fault fired."""

    kind = "fault.fired"
    feeds = ("R5", "R6", "R21")
    fault: int = trace(note="its index among the scenario's faults")
    fault_kind: str
    firing: int = trace(note="1 for its first firing in the run")


@event
class PointFaultFired(FaultFired):
    """An injected fault fired at a named point (it raises there)."""

    point: str


@event
class StallFired(FaultFired):
    """A stall fired at a named point."""

    point: str
    duration_s: float = trace(key="duration", note="seconds the point blocks")


@event
class LateWorkerFired(FaultFired):
    """A late-worker stall fired inside the worker."""

    point: str
    stall_s: float = trace(key="stall", note="seconds the worker sleeps: past its host's whole budget")


@event
class LeaseExpiryFired(FaultFired):
    """A lease-expiry fault fired at the refresher."""

    point: str
    mode: str = trace(note="`missed_refreshes` or `clock`")


@event
class StoreFaultFired(FaultFired):
    """A store fault fired inside a transaction, around its COMMIT."""

    op: str = trace(note="the store operation")
    phase: str = trace(note="`before_commit` or `after_commit`")


@event
class CtrlCFired(FaultFired):
    """A Ctrl+C fault fired."""

    agent: str | None = trace(note="null: the first agent")


@event
class CrashFired(FaultFired):
    """A crash fault fired."""

    process: str


@event
class SecondProcessFired(FaultFired):
    """A second-process fault fired."""

    command: str = trace(note="`turn` or `compress`")
