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

from faults.base import Fault, FaultContext
from sim.scenario.schema import Reference, Str


class MessageMidCompression(Fault):
    kind = "message_mid_compression"
    where = "action"
    params = {
        "session": Reference("The session the message is written to.", namespace="session", default=None),
        "text": Str("The message text.", default="a message that arrived during the summary"),
    }

    async def act(self, ctx: FaultContext) -> None:
        ctx.emit("fault.fired", **self.fired_fields())
        await ctx.external_append(self.args["session"], self.args["text"])
