"""The TLS contexts a release builds for its HTTP clients, made once per process instead of once per client.

Every `AIAgent()` and every compaction's summary client load a CA bundle into a fresh `ssl.SSLContext`
(`ssl.create_default_context(cafile=...)`): 0.17.0+ check each configured bundle and certifi's
(`agent.ssl_guard.verify_ca_bundle`), 0.18.2+ resolve the provider client's `verify`
(`agent.ssl_verify.resolve_httpx_verify`), and httpx builds one per client when handed `verify=True`
(0.16.0-0.17.0). Measured on 0.19.0's generated runs: 13 contexts per run, 0.35 of its 0.53 CPU seconds.

`share_contexts` makes `ssl.create_default_context` answer each argument set (purpose, cafile, capath, cadata)
with the one context it made for it first. A context is a bundle's certificates and default options, the same
for every call with the same arguments; nothing in a run connects (sockets are refused under the simulator),
so no caller sets anything on it that another could see, and nothing of a session, a lease or a compaction
reads it. What the run does is unchanged: the same calls, the same clients, no scheduling point added or removed
(loading a bundle makes none). The guard still runs and still fails on a missing or empty bundle.
"""

from __future__ import annotations

import ssl
import sys
from collections.abc import Callable
from typing import Any

_made: dict[tuple[Any, ...], ssl.SSLContext] = {}


def _shared(original: Callable[..., ssl.SSLContext]) -> Callable[..., ssl.SSLContext]:
    def create_default_context(purpose: Any = ssl.Purpose.SERVER_AUTH, *, cafile: Any = None, capath: Any = None,
                               cadata: Any = None) -> ssl.SSLContext:
        key = (purpose, cafile, capath, cadata)
        try:
            made = _made.get(key)
        except TypeError:  # an unhashable argument (cadata as a bytearray): made afresh, as before
            return original(purpose, cafile=cafile, capath=capath, cadata=cadata)
        if made is None:
            made = _made[key] = original(purpose, cafile=cafile, capath=capath, cadata=cadata)
        return made

    create_default_context.__wrapped__ = original  # type: ignore[attr-defined]  # marks it as ours (and idempotent)
    return create_default_context


def share_contexts() -> list[str]:
    """Make every loaded module that holds `ssl.create_default_context` hold the sharing one (once per process);
    returns `module.create_default_context` for each one changed."""
    original = ssl.create_default_context
    if hasattr(original, "__wrapped__"):
        return []
    shared = _shared(original)
    patched = []
    for name, module in list(sys.modules.items()):
        if getattr(module, "__dict__", {}).get("create_default_context") is original:
            module.create_default_context = shared  # type: ignore[attr-defined]  # a module's global, replaced by name
            patched.append(f"{name}.create_default_context")
    return sorted(patched)
