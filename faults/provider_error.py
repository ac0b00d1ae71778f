"""provider_error: a model's call fails.

Effect: raises the provider's error at the point (auth, overload, a dropped stream), so the attempt ends
with `summary_failed` and records a summary-failure cooldown; nothing may be committed. With
`raises = "interrupted_error"` the call raises a plain `InterruptedError` instead (a plugin's or the OS's
interrupted syscall, hermes-agent C/K): no Ctrl+C, so it must count as a summary failure all the same.
With `raises = "context_length_exceeded"` the provider refuses the request as longer than the model's
context window (OpenAI's error code): at the main model's call (`turn.model`) that is a provider-proven
overflow, which the turn recovers from by compressing (R23).
Where: `provider.summary` (the call fails at once), `provider.progress` (it fails mid-stream) or
`turn.model` (the turn's call of the main model).
Parameters: `message` (default "provider overloaded"), `raises` (default "provider_error"), `times` (default 1).
Trace: `fault.fired fault_kind=provider_error point=<label>`, then `compaction.refused` or `compaction.error`.
"""

from __future__ import annotations

from contract.events import PointFaultFired
from contract.params import choice, text
from faults.base import TIMES, Fault, FaultContext, Placement
from reference.provider import ContextLengthExceeded
from reference.provider import ProviderError as ReferenceProviderError

# What the provider call raises, by the `raises` parameter.
EXCEPTIONS: dict[str, type[Exception]] = {
    "provider_error": ReferenceProviderError,
    "interrupted_error": InterruptedError,
    "context_length_exceeded": ContextLengthExceeded,
}


class ProviderError(Fault):
    kind = "provider_error"
    where = Placement.POINT
    params = {
        "message": text("The error text the provider returns.", default="provider overloaded", example='"rate limited"'),
        "raises": choice(
            "The exception: the provider's own error, a plain InterruptedError (no user stop), or the provider's "
            "refusal of a request longer than the model's context window.",
            values=tuple(EXCEPTIONS), default="provider_error", example='"interrupted_error"',
        ),
        "times": TIMES,
    }

    async def at_point(self, ctx: FaultContext, label: str) -> None:
        ctx.emit(PointFaultFired(**self.firing(), point=label))
        raise EXCEPTIONS[self.args["raises"]](self.args["message"])
