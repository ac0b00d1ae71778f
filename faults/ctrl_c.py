"""ctrl_c: the user presses Ctrl+C in the terminal frontend.

Effect: a hard cancel of the agent's running turn (through its commit fence: a summary in flight is
abandoned and rolled back, an admitted commit is waited for), then the frontend's grace period, then the
frontend accepts the next turn whatever the old one is still doing (`frontend.ctrl_c_grace_expired`).
Where: an action, at its moment (`at`, `after_event`, or a point hit).
Parameters: `agent` (default: the first agent).
Trace: `fault.fired fault_kind=ctrl_c`, `frontend.ctrl_c`, `hard_cancel.requested`, `frontend.ctrl_c_grace_expired`.
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
