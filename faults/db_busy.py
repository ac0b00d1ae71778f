"""db_busy: the database is locked by another connection when a write wants to commit.

Effect: the matching write raises `sqlite3.OperationalError("database is locked")` before its COMMIT, so
it is rolled back, as SQLite reports SQLITE_BUSY after its busy timeout. Callers must treat it as "not
written" and must not report a busy store as a compression lease conflict (R1, R14).
Where: the store's fault hook, before COMMIT, for the operation the point `db.<op>` names.
Parameters: `times` (default 1).
Trace: `fault.fired fault_kind=db_busy op=<op> phase=before_commit`.
"""

from __future__ import annotations

from faults.base import TIMES
from faults.db_write_failure import DbWriteFailure


class DbBusy(DbWriteFailure):
    kind = "db_busy"
    error = "database is locked"
    params = {
        "times": TIMES,
    }

    def applies(self, op: str, phase: str) -> bool:
        return phase == "before_commit" and self.matches(f"db.{op}")
