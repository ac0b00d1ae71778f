"""late_worker: the summary worker finishes only after its host has given up on it.

Effect: the worker stalls at the point for `past_host_by` seconds beyond the host's whole budget (the
scenario's total ceiling), so the host times out or is cancelled first and the worker then returns into
an attempt nobody waits for. Its result must be discarded and it must write no compressor state (R2, R21).
Where: a point inside the worker; `provider.progress` (mid-stream) or `provider.summary` (before the call).
Parameters: `past_host_by` (default 60s), `times` (default 1).
Trace: `fault.fired fault_kind=late_worker point=<label> stall=<s>`; later `isolated.discarded` or a refused commit.
"""

from __future__ import annotations

from contract.events import LateWorkerFired
from contract.params import duration
from faults.base import TIMES, Fault, FaultContext, Placement


class LateWorker(Fault):
    kind = "late_worker"
    where = Placement.POINT
    params = {
        "past_host_by": duration("How long after the host's total ceiling the worker wakes.", default=60.0, example='"1m"'),
        "times": TIMES,
    }

    async def at_point(self, ctx: FaultContext, label: str) -> None:
        stall_s = ctx.host_ceiling_s() + self.args["past_host_by"]
        ctx.emit(LateWorkerFired(**self.firing(), point=label, stall_s=stall_s))
        await ctx.rt.sleep(stall_s)
