"""provider_error: the summarizing model's call fails.

Effect: raises the provider's error at the point (auth, overload, a dropped stream), so the attempt ends
with `summary_failed` and records a summary-failure cooldown; nothing may be committed. With
`raises = "interrupted_error"` the call raises a plain `InterruptedError` instead (a plugin's or the OS's
interrupted syscall, hermes-agent C/K): no Ctrl+C, so it must count as a summary failure all the same.
Where: `provider.summary` (the call fails at once) or `provider.progress` (it fails mid-stream).
Parameters: `message` (default "provider overloaded"), `raises` (default "provider_error"), `times` (default 1).
Trace: `fault.fired fault_kind=provider_error point=<label>`, then `compaction.refused` or `compaction.error`.
"""

from __future__ import annotations

from contract.events import PointFaultFired
from contract.params import choice, text
from faults.base import TIMES, Fault, FaultContext, Placement
from reference.provider import ProviderError as ReferenceProviderError

# What the provider call raises, by the `raises` parameter.
EXCEPTIONS: dict[str, type[Exception]] = {
    "provider_error": ReferenceProviderError,
    "interrupted_error": InterruptedError,
}


class ProviderError(Fault):
    kind = "provider_error"
    where = Placement.POINT
    params = {
        "message": text("The error text the provider returns.", default="provider overloaded", example='"rate limited"'),
        "raises": choice(
            "The exception: the provider's own error, or a plain InterruptedError (no user stop).",
            values=tuple(EXCEPTIONS), default="provider_error", example='"interrupted_error"',
        ),
        "times": TIMES,
    }

    async def at_point(self, ctx: FaultContext, label: str) -> None:
        ctx.emit(PointFaultFired(**self.firing(), point=label))
        raise EXCEPTIONS[self.args["raises"]](self.args["message"])
