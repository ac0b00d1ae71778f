"""ctrl_c: the user presses Ctrl+C in the terminal frontend.

Effect: a hard cancel of the agent's running turn (through its commit fence: a summary in flight is
abandoned and rolled back, an admitted commit is waited for) and, beside it, the frontend's grace period from
the press; once the grace has passed the frontend abandons the turn if it still runs and accepts the next one
whatever the old one is still doing (`frontend.ctrl_c_grace_expired`).
Where: an action, at its moment (`at`, `after_event`, or a point hit).
Parameters: `agent` (default: the first agent).
Trace: `fault.fired fault_kind=ctrl_c`, `frontend.ctrl_c`, `hard_cancel.requested`, `frontend.ctrl_c_grace_expired`
(in the task `grace:<the pressing task>`), `hard_cancel.finished`.
"""

from __future__ import annotations

from contract.events import CtrlCFired
from contract.params import reference
from faults.base import Fault, FaultContext, Placement


class CtrlC(Fault):
    kind = "ctrl_c"
    where = Placement.ACTION
    params = {"agent": reference("The agent whose terminal gets the Ctrl+C.", namespace="agent", default=None)}

    async def act(self, ctx: FaultContext) -> None:
        ctx.emit(CtrlCFired(**self.firing(), agent=self.args["agent"]))
        await ctx.ctrl_c(self.args["agent"])
