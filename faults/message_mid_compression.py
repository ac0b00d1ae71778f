"""message_mid_compression: a message is written to the session while a compression is running.

Effect: another writer (the gateway's transcript flush, a second device) appends a user message to the
session's durable transcript, typically after `compaction.summary_started`. The append must succeed (a
compression lease never blocks appends, R1/R14) and the row must survive the commit as an active row
after the summary (the concurrent tail is cloned, R14).
Where: an action, at its moment.
Parameters: `session` (default: the first session), `text`.
Trace: `fault.fired fault_kind=message_mid_compression`, then `turn.persisted writer=external` or `append.failed`.
"""

from __future__ import annotations

from contract.events import FaultFired
from contract.params import reference, text
from faults.base import Fault, FaultContext, Placement


class MessageMidCompression(Fault):
    kind = "message_mid_compression"
    where = Placement.ACTION
    params = {
        "session": reference("The session the message is written to.", namespace="session", default=None),
        "text": text("The message text.", default="a message that arrived during the summary"),
    }

    async def act(self, ctx: FaultContext) -> None:
        ctx.emit(FaultFired(**self.firing()))
        await ctx.external_append(self.args["session"], self.args["text"])
