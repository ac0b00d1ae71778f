"""provider_error: the summarizing model's call fails.

Effect: raises the provider's error at the point (auth, overload, a dropped stream), so the attempt ends
with `summary_failed` and records a summary-failure cooldown; nothing may be committed.
Where: `provider.summary` (the call fails at once) or `provider.progress` (it fails mid-stream).
Parameters: `message` (default "provider overloaded"), `times` (default 1).
Trace: `fault.fired fault_kind=provider_error point=<label>`, then `compaction.refused` or `compaction.error`.
"""

from __future__ import annotations

from contract.events import PointFaultFired
from contract.params import text
from faults.base import TIMES, Fault, FaultContext, Placement
from reference.provider import ProviderError as ReferenceProviderError


class ProviderError(Fault):
    kind = "provider_error"
    where = Placement.POINT
    params = {
        "message": text("The error text the provider returns.", default="provider overloaded", example='"rate limited"'),
        "times": TIMES,
    }

    async def at_point(self, ctx: FaultContext, label: str) -> None:
        ctx.emit(PointFaultFired(**self.firing(), point=label))
        raise ReferenceProviderError(self.args["message"])
