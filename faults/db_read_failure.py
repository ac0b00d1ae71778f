"""db_read_failure: a store read fails with an SQLite error.

Effect: raises `sqlite3.OperationalError` at the point `db.<op>`, just before that operation's transaction
starts, so the caller sees the error and nothing was read (reads have no COMMIT for `db_write_failure` to
bracket). A watermark read that fails this way must make the attempt sit out, not archive everything.
Where: a `db.<op>` point (usually a read such as `db.active_watermark` or `db.get_session`).
Parameters: `times` (default 1).
Trace: `fault.fired fault_kind=db_read_failure point=<label>`.
"""

from __future__ import annotations

import sqlite3

from contract.events import PointFaultFired
from faults.base import TIMES, Fault, FaultContext, Placement


class DbReadFailure(Fault):
    kind = "db_read_failure"
    where = Placement.POINT
    params = {
        "times": TIMES,
    }

    async def at_point(self, ctx: FaultContext, label: str) -> None:
        ctx.emit(PointFaultFired(**self.firing(), point=label))
        raise sqlite3.OperationalError("disk I/O error (injected read failure)")
