"""db_write_failure: a store write fails with an SQLite error.

Effect: a write to the store operation named by the trigger's point (`db.<op>`; the trigger's `nth`, `at`,
`after_event` or `probability` picks which call) raises `sqlite3.OperationalError` inside its transaction:
- `phase = "before_commit"`: the transaction rolls back; nothing was written; the caller sees the error.
- `phase = "after_commit"`: the write is durable but the caller sees the error: an indeterminate outcome,
  as when the connection drops after COMMIT. Code that treats the error as "nothing happened" breaks here.
Where: the store's own fault hook around COMMIT, for the operation the point `db.<op>` names.
Parameters: `phase` (default before_commit), `times` (default 1).
Trace: `fault.fired fault_kind=db_write_failure op=<op> phase=<phase>`.
"""

from __future__ import annotations

import sqlite3

from contract.events import StoreFaultFired
from contract.params import choice
from faults.base import TIMES, Fault, FaultContext, Placement


class DbWriteFailure(Fault):
    kind = "db_write_failure"
    where = Placement.STORE
    error = "disk I/O error (injected)"
    params = {
        "phase": choice("Fail before the COMMIT (rolled back) or after it (durable, but reported failed).",
                        values=("before_commit", "after_commit"), default="before_commit"),
        "times": TIMES,
    }

    def applies(self, op: str, phase: str) -> bool:
        return phase == self.args["phase"] and self.matches(f"db.{op}")

    def at_store(self, ctx: FaultContext, op: str, phase: str) -> None:
        ctx.emit(StoreFaultFired(**self.firing(), op=op, phase=phase))
        raise sqlite3.OperationalError(self.error)
