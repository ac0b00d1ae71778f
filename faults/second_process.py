"""second_process: another process starts an agent on the same session and works on it.

Effect: a new process (its own pid, pool and attempt counter) opens an agent on `session` and runs one
`command`: a user `turn` with `text`, or a forced `compress`. Two compactors then race for the session's
lease and lineage (R3, R19): only one may compress at a time, and a late contender must adopt, not fork.
Where: an action, at its moment.
Parameters: `session` (default: the first session), `command` (default turn), `text`.
Trace: `fault.fired fault_kind=second_process`, `process.started`, then that agent's own events.
"""

from __future__ import annotations

from faults.base import Fault, FaultContext
from sim.scenario.schema import Choice, Reference, Str


class SecondProcess(Fault):
    kind = "second_process"
    where = "action"
    params = {
        "session": Reference("The session the second process works on.", namespace="session", default=None),
        "command": Choice("What its agent does.", values=("turn", "compress"), default="turn"),
        "text": Str("The user's text, for a turn.", default="a message from the second process"),
    }

    async def act(self, ctx: FaultContext) -> None:
        ctx.emit("fault.fired", **self.fired_fields(), command=self.args["command"])
        await ctx.second_process(self.args["session"], self.args["command"], self.args["text"])
