"""crash: a simulated process dies, and may be restarted.

Effect: every task of the process stops at once; its memory (transcripts, fences, attempt state) is lost
and nothing it would have done in cleanup reaches the store: transactions it committed stay, the ones it
had not begun never happen. Its pid is dead from then on, so its lease is provably stale (R24). With
`restart_after`, a new process starts its agents again on their sessions and reloads them from the store;
its pid is a new one, or with `pid = "recycled"` the dead process's own pid, which the kernel handed on: only
the start recorded in a holder id then tells the dead holder from the live process on its pid.
A crash of a process that is already dead (waiting for its restart, or for good) does nothing and is not traced,
and a restart that finds the process running again (restarted meanwhile) does nothing either.
Where: an action, at its moment.
Parameters: `process`, `restart_after` (optional), `pid` (`new` or `recycled`).
Trace: `fault.fired fault_kind=crash process=<name>`, `process.crashed`, and `process.restarted` after a restart.
"""

from __future__ import annotations

from contract.events import CrashFired
from contract.params import choice, duration, reference
from faults.base import Fault, FaultContext, Placement


class Crash(Fault):
    kind = "crash"
    where = Placement.ACTION
    params = {
        "process": reference("The process that dies.", namespace="process", example='"p1"'),
        "restart_after": duration("Restart the process this long after the crash (omit: stays dead).", default=None, example='"5s"'),
        "pid": choice("The restarted process's pid: a fresh one, or the dead process's, recycled.", values=("new", "recycled"),
                      default="new", example='"recycled"'),
    }

    async def act(self, ctx: FaultContext) -> None:
        """Kill the process, then restart it if asked. A process that is already dead cannot die again, and the
        restart that follows its death is its first crash's: a second one would run two incarnations at once."""
        if not ctx.alive(self.args["process"]):
            return
        ctx.emit(CrashFired(**self.firing(), process=self.args["process"]))
        ctx.crash(self.args["process"])
        if self.args["restart_after"] is not None:
            await ctx.rt.sleep(self.args["restart_after"])
            if ctx.alive(self.args["process"]):
                return  # restarted meanwhile (a user's restart): a supervisor starts a dead process, not a second copy
            await ctx.restart(self.args["process"], recycle_pid=self.args["pid"] == "recycled")
