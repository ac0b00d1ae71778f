"""The slow probes of `AIAgent()` and of a compaction, and how each is turned off in a loaded release.

Measured on 0.16.0-0.19.0 by recording every socket connect and every subprocess during `AIAgent()` and one
`_compress_context` (`python -m targets.hermes probes VERSION` repeats it), and by running whole turns under
the thread runtime, which refuses any connect or subprocess (`sim.NotSimulated`); five probes, in every release:

| probe | what it does offline | turned off by | why no race depends on it |
|---|---|---|---|
| context-length lookup (`agent.model_metadata.get_model_context_length`) | ~10 connects to the base URL (`/models`, `/api/show`, local-server detection), then the table default | returns the release's own `DEFAULT_FALLBACK_CONTEXT`, which is what the lookup ends at when the URL answers nothing | it sizes the window before any session exists; a scenario sets the threshold it needs |
| ollama probe (`agent.model_metadata.query_ollama_num_ctx`, for a local base URL) | 4 connects, then None | returns None, as it does offline | it only sets `_ollama_num_ctx`, a request option of the main model, which no scenario calls |
| feasibility check (`check_compression_model_feasibility`, lazily on the first compaction) | the context-length lookup again, for the summary model | the lookup above; the check itself runs unchanged | its only effect is the threshold and a warning, both computed from the stubbed lookup as offline |
| endpoint metadata lookup (`agent.model_metadata.fetch_endpoint_model_metadata`, at the end of every turn for its cost estimate) | connects to the base URL's `/models`, then `{}` | returns `{}`, what it returns when nothing answers | it only prices the turn's usage; nothing of a session, a lease or a compaction reads it |
| environment probe (`tools/env_probe.py`: python3/pip subprocesses; in 0.16-0.17 on the prompt build's thread, from 0.18 on a thread `env-probe-warm` started by `AIAgent()`) | 5 subprocesses, ~2.7 s | the release's own config key `agent.environment_probe: false` in `$HERMES_HOME/config.yaml` | it adds a line about the machine's Python to the system prompt text; nothing reads it back |

The lookups are replaced by module attribute, never by editing a file: every module of the release that
holds the original function under any name (`agent.context_compressor` imports `get_model_context_length`
by name, `agent.agent_init` imports `query_ollama_num_ctx`) gets the stub, so a function-local
`from agent.model_metadata import ...` sees it too.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# `agent.environment_probe: false` exists in every locked release (agent/agent_init.py reads it).
CONFIG_YAML = "agent:\n  environment_probe: false\n"


class ProbeStubError(Exception):
    """A probe this module knows is missing from the loaded release: the release changed under us."""


@dataclass(frozen=True)
class Probe:
    """One slow probe: where the original lives and what replaces it (built from the loaded module)."""

    name: str
    module: str
    attribute: str
    stub: Callable[[Any], Callable[..., Any]]


def _fallback_context(metadata: Any) -> Callable[..., int]:
    default = int(metadata.DEFAULT_FALLBACK_CONTEXT)

    def get_model_context_length(model: str, *args: Any, config_context_length: int | None = None,
                                 **kwargs: Any) -> int:
        # The release honours an explicit configured length before probing; so does the stub.
        if isinstance(config_context_length, int) and config_context_length > 0:
            return config_context_length
        return default

    return get_model_context_length


def _no_ollama(metadata: Any) -> Callable[..., None]:
    def query_ollama_num_ctx(*args: Any, **kwargs: Any) -> None:
        return None

    return query_ollama_num_ctx


def _no_endpoint_metadata(metadata: Any) -> Callable[..., dict[str, Any]]:
    def fetch_endpoint_model_metadata(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return {}

    return fetch_endpoint_model_metadata


PROBES = (
    Probe("context-length lookup", "agent.model_metadata", "get_model_context_length", _fallback_context),
    Probe("ollama probe", "agent.model_metadata", "query_ollama_num_ctx", _no_ollama),
    Probe("endpoint metadata lookup", "agent.model_metadata", "fetch_endpoint_model_metadata", _no_endpoint_metadata),
)


def write_config(home: Path) -> Path:
    """The HERMES_HOME config that turns the environment probe off (before `AIAgent()` reads it)."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    path.write_text(CONFIG_YAML)
    return path


def stub_probes() -> list[str]:
    """Replace each probe in every loaded module that holds it; returns `module.attribute` for each patch."""
    patched = []
    for probe in PROBES:
        home = importlib.import_module(probe.module)
        original = getattr(home, probe.attribute, None)
        if original is None:
            raise ProbeStubError(f"{probe.module}.{probe.attribute} ({probe.name}) is not in the loaded release")
        stub = probe.stub(home)
        for name, module in list(sys.modules.items()):
            if getattr(module, "__dict__", {}).get(probe.attribute) is original:
                setattr(module, probe.attribute, stub)
                patched.append(f"{name}.{probe.attribute}")
    return sorted(patched)


class ProbeWatch:
    """Records every socket connect and subprocess start while active, with the release frame that caused
    it: how the probes above were found, and how `check` proves none is left once they are stubbed."""

    def __init__(self, release_root: Path) -> None:
        self.root = str(release_root) + "/"
        self.seen: list[tuple[str, str, str]] = []

    def __enter__(self) -> ProbeWatch:
        import socket
        import subprocess

        self._originals = (socket.socket.connect, subprocess.Popen.__init__)
        watch, connect, popen = self, *self._originals

        def watched_connect(sock: Any, address: Any) -> Any:
            watch._record("connect", repr(address))
            return connect(sock, address)

        def watched_popen(process: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
            watch._record("subprocess", repr(args)[:60])
            popen(process, args, *rest, **kwargs)

        socket.socket.connect, subprocess.Popen.__init__ = watched_connect, watched_popen  # type: ignore[method-assign, assignment]  # watched for the probe, put back on exit
        return self

    def __exit__(self, *exc: object) -> None:
        import socket
        import subprocess

        socket.socket.connect, subprocess.Popen.__init__ = self._originals  # type: ignore[method-assign]  # the originals, put back

    def _record(self, kind: str, target: str) -> None:
        import traceback

        frames = [f for f in traceback.extract_stack()[:-2] if f.filename.startswith(self.root)]
        where = f"{frames[-1].filename[len(self.root):]}:{frames[-1].lineno}" if frames else "outside the release"
        self.seen.append((kind, target, where))
