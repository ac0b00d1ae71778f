"""second_process: another process starts an agent on the same session and works on it.

Effect: a new process (its own pid, pool and attempt counter) opens an agent on `session` and runs one
`command`: a user `turn` with `text`, or a forced `compress`. Two compactors then race for the session's
lease and lineage (R3, R19): only one may compress at a time, and a late contender must adopt, not fork.
Where: an action, at its moment.
Parameters: `session` (default: the first session), `command` (default turn), `text`.
Trace: `fault.fired fault_kind=second_process`, `process.started`, then that agent's own events.
"""

from __future__ import annotations

from contract.events import SecondProcessFired
from contract.params import choice, reference, text
from faults.base import Fault, FaultContext, Placement


class SecondProcess(Fault):
    kind = "second_process"
    where = Placement.ACTION
    params = {
        "session": reference("The session the second process works on.", namespace="session", default=None),
        "command": choice("What its agent does.", values=("turn", "compress"), default="turn"),
        "text": text("The user's text, for a turn.", default="a message from the second process"),
    }

    async def act(self, ctx: FaultContext) -> None:
        ctx.emit(SecondProcessFired(**self.firing(), command=self.args["command"]))
        await ctx.second_process(self.args["session"], self.args["command"], self.args["text"])
