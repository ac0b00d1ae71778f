"""stall: a named point blocks for a while.

Effect: the task that reaches the point sleeps `duration` of virtual time there, before the step the point
guards (a provider summary that goes silent, a DB transaction that cannot start, a refresher that falls
behind, a host wait that is slow to wake).
Where: any named point (`provider.summary`, `provider.progress`, `db.<op>`, `lease.refresh`, `host.wait`...).
Parameters: `duration`, `times` (default 1).
Trace: `fault.fired fault_kind=stall point=<label> duration=<s>`, then the stalled task's next event `duration` later.
"""

from __future__ import annotations

from contract.events import StallFired
from contract.params import duration
from faults.base import TIMES, Fault, FaultContext, Placement


class Stall(Fault):
    kind = "stall"
    where = Placement.POINT
    params = {
        "duration": duration("How long the point blocks.", example='"10m"'),
        "times": TIMES,
    }

    async def at_point(self, ctx: FaultContext, label: str) -> None:
        ctx.emit(StallFired(**self.firing(), point=label, duration_s=self.args["duration"]))
        await ctx.rt.sleep(self.args["duration"])
