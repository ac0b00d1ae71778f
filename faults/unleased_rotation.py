"""unleased_rotation: a writer that does not take the compression lease rotates the session.

Effect: an older version of the agent sharing the same state.db (it predates the compression lease and the
atomic publish) rotates the live head of `session`'s lineage: it creates a continuation child carrying copies
of the head's active rows, then closes the head as `compression`, without ever looking at the lease. An
attempt of the reference that holds the lease and already checked that its session was still open then
finds the parent rotated under it when it publishes: its publication must refuse to rotate the parent a
second time (R19).
Where: an action, at its moment.
Parameters: `session` (default: the first session; the live head of its lineage is rotated).
Trace: `fault.fired fault_kind=unleased_rotation`, then `external.rotated parent=<head> child=<child>`.
"""

from __future__ import annotations

from contract.events import FaultFired
from contract.params import reference
from faults.base import Fault, FaultContext, Placement


class UnleasedRotation(Fault):
    kind = "unleased_rotation"
    where = Placement.ACTION
    params = {
        "session": reference("A session of the lineage whose live head is rotated.", namespace="session", default=None),
    }

    async def act(self, ctx: FaultContext) -> None:
        ctx.emit(FaultFired(**self.firing()))
        await ctx.unleased_rotation(self.args["session"])
