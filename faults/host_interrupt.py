"""host_interrupt: an exception unwinds the host while it waits for the compression worker.

Effect: raises `HostInterrupted` at the point, as when a KeyboardInterrupt reaches the turn thread, a signal
handler raises, or a bug throws while the host is blocked on the worker's result. The host's wait is left
without a settled result, so it must revoke commit admission on its way out (R5) without freeing the lease
under a commit that is already running (R6); the turn fails and the frontend reports it.
Where: `host.wait` (the top of each host wait slice).
Parameters: `times` (default 1).
Trace: `fault.fired fault_kind=host_interrupt point=<label>`, then `host.unwind` and `fence.revoked`.
"""

from __future__ import annotations

from contract.events import PointFaultFired
from faults.base import TIMES, Fault, FaultContext, Placement


class HostInterrupted(Exception):
    """The host's wait was interrupted (injected)."""


class HostInterrupt(Fault):
    kind = "host_interrupt"
    where = Placement.POINT
    params = {
        "times": TIMES,
    }

    async def at_point(self, ctx: FaultContext, label: str) -> None:
        ctx.emit(PointFaultFired(**self.firing(), point=label))
        raise HostInterrupted(f"the host was interrupted at {label} (injected)")
