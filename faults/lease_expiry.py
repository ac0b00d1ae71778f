"""lease_expiry: the compression lease lapses under a live attempt.

Effect: the lease expires while its attempt still runs; how depends on `mode`:
- `missed_refreshes`: the next `times` refreshes fail (the refresher's DB write raises), as on a flaky disk;
  the refresher tolerates `int(ttl/interval)` failures, then stops so the lease self-expires within one TTL.
- `clock`: the refresher stalls for `duration`, so virtual time passes the lease's expiry while the
  attempt still runs (a suspended laptop, a long GC pause); its commit must then fail in the transaction.
Where: `lease.refresh` (the refresher, before each refresh transaction).
Parameters: `mode` (default missed_refreshes), `duration` (for clock; default 10m), `times` (default 1).
Trace: `fault.fired fault_kind=lease_expiry mode=...`, then `lease.refresh_failed` or a commit refused for a lost lease.
"""

from __future__ import annotations

import sqlite3

from contract.events import LeaseExpiryFired
from contract.params import choice, duration
from faults.base import TIMES, Fault, FaultContext, Placement


class LeaseExpiry(Fault):
    kind = "lease_expiry"
    where = Placement.POINT
    params = {
        "mode": choice("How the lease lapses.", values=("missed_refreshes", "clock"), default="missed_refreshes"),
        "duration": duration("For mode clock: how long the refresher stalls.", default=600.0, example='"10m"'),
        "times": TIMES,
    }

    async def at_point(self, ctx: FaultContext, label: str) -> None:
        ctx.emit(LeaseExpiryFired(**self.firing(), point=label, mode=self.args["mode"]))
        if self.args["mode"] == "clock":
            await ctx.rt.sleep(self.args["duration"])
        else:
            raise sqlite3.OperationalError("disk I/O error (injected: missed lease refresh)")
