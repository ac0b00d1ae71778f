"""A scripted summarizing model: latency, progress ticks, stalls, errors and output size, in runtime time.

Each call follows a `ProviderScript` (call k uses `scripts[k]`, the last one repeating), so a test says
"the first summary stalls for 1000 s, the retry is quick" without any randomness.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contract.points import PROVIDER_PROGRESS, PROVIDER_SUMMARY
from contract.runtime import Runtime
from contract.vocabulary import CHARS_PER_TOKEN
from reference.transcript import Message, estimate_tokens

ProgressCallback = Callable[[], None]


class ProviderError(Exception):
    """The summary call failed (auth, network, overload): the attempt aborts and records a cooldown."""


class ContextLengthExceeded(ProviderError):
    """The provider refused the request as longer than the model's context window (`context_length_exceeded`): at
    the main model's call a provider-proven overflow, which the turn recovers from by compressing (R23)."""


@dataclass(frozen=True)
class ProviderScript:
    """How one summary call behaves. Progress ticks arrive every `tick_s` for `latency_s` seconds.

    `stall_before_s` / `stall_after_s` add silent time before the first tick and after the last one;
    `error` raises ProviderError (after the ticks); `output_ratio` sizes the summary against the input's
    tokens (above 1.0 the summary would grow the transcript); `mutates_input` makes the call reorder and
    truncate the list it is given, as a plugin engine is allowed to.
    """

    latency_s: float = 2.0
    tick_s: float = 0.5
    stall_before_s: float = 0.0
    stall_after_s: float = 0.0
    error: str | None = None
    output_ratio: float = 0.25
    mutates_input: bool = False


class ScriptedProvider:
    def __init__(self, rt: Runtime, *scripts: ProviderScript) -> None:
        self._rt = rt
        self._scripts = scripts or (ProviderScript(),)
        self.calls = 0

    def script_for(self, call: int) -> ProviderScript:
        return self._scripts[min(call, len(self._scripts) - 1)]

    async def summarize(self, messages: list[Message], on_progress: ProgressCallback) -> str:
        """Summarize `messages` (the part of the transcript being compacted); `on_progress` fires per tick."""
        script = self.script_for(self.calls)
        self.calls += 1
        await self._rt.checkpoint(PROVIDER_SUMMARY)
        count, input_tokens = len(messages), estimate_tokens(messages)
        await self._rt.sleep(script.stall_before_s)
        await self._stream(script, on_progress)
        await self._rt.sleep(script.stall_after_s)
        if script.mutates_input:
            for message in messages:
                message["content"] = message["content"][: len(message["content"]) // 2]
        if script.error is not None:
            raise ProviderError(script.error)
        return _summary_text(count, int(input_tokens * script.output_ratio))

    async def _stream(self, script: ProviderScript, on_progress: ProgressCallback) -> None:
        elapsed = 0.0
        while elapsed < script.latency_s:
            step = min(script.tick_s, script.latency_s - elapsed)
            await self._rt.sleep(step)
            elapsed += step
            await self._rt.checkpoint(PROVIDER_PROGRESS)
            on_progress()


def _summary_text(count: int, tokens: int) -> str:
    """Deterministic filler of about `tokens` tokens, so growth checks see the size the script asked for."""
    head = f"[summary of {count} messages]"
    return head + "." * max(0, tokens * CHARS_PER_TOKEN - len(head))
