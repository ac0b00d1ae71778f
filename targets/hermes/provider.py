"""The scripted models a hermes run talks to instead of a network: the summary model and the main model.

The summary model replaces the name `call_llm` in the loaded `agent.context_compressor` (the release
imports it by name and calls it inside `_generate_summary`); the main model replaces the agent's
`_interruptible_api_call` and `_interruptible_streaming_api_call` (what the turn loop calls). Replies have
the shape of an OpenAI chat completion, which is all either caller reads.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

# A gate nobody opens must not hang a run forever: a real-time run gives up after this long.
GATE_LIMIT_S = 60.0


def reply(text: str) -> SimpleNamespace:
    """A chat completion whose one choice says `text` and stops."""
    message = SimpleNamespace(role="assistant", content=text, tool_calls=None, reasoning=None,
                              reasoning_content=None, refusal=None)
    usage = SimpleNamespace(prompt_tokens=10, completion_tokens=5, total_tokens=15,
                            prompt_tokens_details=None, completion_tokens_details=None)
    return SimpleNamespace(id="scripted", model="scripted",
                           choices=[SimpleNamespace(index=0, message=message, finish_reason="stop")], usage=usage)


class GatedSummary:
    """`call_llm` for the compressor: the first call says it started, then waits for `release` (as hermes's
    own tests gate a summary on an Event); later calls answer at once."""

    def __init__(self, text: str = "SUMMARY of the earlier conversation") -> None:
        self.text = text
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, **kwargs: Any) -> SimpleNamespace:
        self.calls += 1
        if self.calls == 1:
            self.started.set()
            if not self.release.wait(GATE_LIMIT_S):
                raise TimeoutError(f"the summary gate stayed closed for {GATE_LIMIT_S:.0f}s")
        return reply(self.text)


def script_summary(summary: Any) -> None:
    """Make the loaded release's compressor call `summary` instead of the network."""
    from agent import context_compressor

    context_compressor.call_llm = summary


def script_main_model(agent: Any, text: str, *, numbered: bool = False,
                      before: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Make `agent`'s turns get `text` from the main model, streaming or not; `numbered`: its n-th answer says
    `text #n`, so that no two answers are one message (two agents answering at one virtual instant would
    otherwise write rows an oracle cannot tell from a duplicated one: same role, content and timestamp).
    `before(api_kwargs)` runs first on each call: whatever it raises is the provider's error for that call."""
    calls = itertools.count(1)

    def answer(api_kwargs: dict[str, Any]) -> SimpleNamespace:
        if before is not None:
            before(api_kwargs)
        return reply(f"{text} #{next(calls)}" if numbered else text)

    agent._interruptible_api_call = answer
    agent._interruptible_streaming_api_call = lambda api_kwargs, on_first_delta=None: answer(api_kwargs)


def context_length_exceeded(url: str, message: str) -> Exception:
    """The error the release's OpenAI client raises when the provider refuses a request as longer than the
    model's context window: HTTP 400 whose body's code is `context_length_exceeded` (what hermes's error
    classifier reads, agent/error_classifier.py, and so sends the turn into its overflow recovery)."""
    import httpx
    import openai

    body = {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                      "code": "context_length_exceeded"}}
    response = httpx.Response(400, request=httpx.Request("POST", f"{url}/chat/completions"), json=body)
    return openai.BadRequestError(f"Error code: 400 - {body}", response=response, body=body)
