"""crash_in_transaction: a process dies in the middle of a store transaction.

Effect: the process named by `process` dies inside the transaction of the store operation named by the
trigger's point (`db.<op>`), as the `crash` fault kills it (its tasks stop, its memory and cleanup are lost):
- `phase = "before_commit"`: the transaction never commits; SQLite rolls it back, so every reader (another
  process, the next incarnation) sees the state from before it began. A write split over two transactions
  is exactly what this exposes: the first one stays (R20's orphan parent).
- `phase = "after_commit"`: the write is durable and its caller never learns of it.
The point names the operation, not the caller: use it on an operation only that process calls.
Where: the store's own fault hook around COMMIT, for the operation the point `db.<op>` names.
Parameters: `process`, `phase` (default before_commit).
Trace: `fault.fired fault_kind=crash_in_transaction op=<op> phase=<phase>`, then `process.crashed`.
"""

from __future__ import annotations

from collections.abc import Callable

from contract.events import StoreFaultFired
from contract.params import choice, reference
from faults.base import Fault, FaultContext, Placement


class DiedInTransaction(BaseException):
    """Unwinds the dying process's store call; a BaseException, so no `except Exception` in it can go on.

    The process dies (`die`) once the store call has unwound, so after SQLite rolled the transaction back, as
    it does for a connection that dies inside one: nothing (an invariant judging the crash, another process)
    reads the store halfway through a transaction. The caller's connection calls `die` (`sim.scenario.processes`).
    """

    def __init__(self, message: str, die: Callable[[], None]) -> None:
        super().__init__(message)
        self.die = die


class CrashInTransaction(Fault):
    kind = "crash_in_transaction"
    where = Placement.STORE
    params = {
        "process": reference("The process that dies (the caller of the operation).", namespace="process", example='"p1"'),
        "phase": choice("Die before the COMMIT (rolled back) or right after it (durable, never reported).",
                        values=("before_commit", "after_commit"), default="before_commit"),
    }

    def applies(self, op: str, phase: str) -> bool:
        return phase == self.args["phase"] and self.matches(f"db.{op}")

    def at_store(self, ctx: FaultContext, op: str, phase: str) -> None:
        ctx.emit(StoreFaultFired(**self.firing(), op=op, phase=phase))
        process = self.args["process"]
        raise DiedInTransaction(f"process {process} died inside {op} ({phase})", lambda: ctx.crash(process))
