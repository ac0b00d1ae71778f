"""The seams of a loaded hermes release, hooked once per process: events for the oracle, points for the faults.

Each hook wraps one of hermes's own functions (by module or class attribute, never by editing a file) and
asks the system of the run in progress (`ACTIVE`) what to do; outside a run, or on a thread that is not the
run's, it calls the original and nothing else. What each hook adds:

| hermes call | point (faults) | events |
|---|---|---|
| `agent.context_compressor.call_llm` (the summary model; scripted) | `provider.summary` | `compaction.input`, `compaction.summary_started` |
| `agent.conversation_compression.compress_context` (one attempt) | - | `attempt.claimed`, `compaction.finished` |
| `agent.conversation_compression._compression_lock_holder` | - | none: `agent=` (an address) becomes the agent's name; `:proc=P:attempt=N` names the attempt |
| `ContextCompressor._automatic_compression_blocked` (0.19.0: an automatic attempt's gate) | - | `compaction.blocked` (`cooldown`, `structural_backoff`) |
| `ContextCompressor._generate_summary` | - | none; an attempt it skipped for the failure cooldown that ends unchanged is `compaction.refused` (`cooldown`) |
| the agent's main model (scripted, `provider.script_main_model`) | `turn.model` | `turn.context_overflow` when the provider refuses the context as too long |
| `SessionDB.<op>` for every public write | `db.<op>` (the reference's name where it has one, `POINT_NAMES`) | per op, below |
| `SessionDB._execute_write` (the transaction) | store faults of `db.<op>`: before COMMIT inside it, after COMMIT outside | - |
| `append_message` | | `append.ok`, `turn.persisted` / `append.failed` |
| `create_session` with the attempt's session as parent | | `commit.published` (the rotation's child exists) |
| `archive_and_compact` (0.18.2+) | | `commit.archived` / `compaction.commit_failed` |
| `try_acquire_compression_lock` | | `lease.acquired` / `lease.contended` / `lease.acquire_failed` |
| `refresh_compression_lock` (0.18.2+) | | `lease.refreshed` / `lease.refresh_failed` |
| `release_compression_lock` | | `lease.released` / `lease.release_failed` |
| `reopen_session` (0.19.0: a rotation whose child could not be made) | | `session.reopened` |
| `end_session` | | - |

hermes catches store errors in several of these (an acquire fails open, a release logs): a hook knows of
such an error from the `_execute_write` hook beneath it, so an acquire that failed is `lease.acquire_failed`,
never `lease.contended`.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from targets.hermes.system import HermesSystem

# The run in progress, set by HermesSystem around each run (a process runs one at a time).
ACTIVE: list[HermesSystem] = []

# The SessionDB writes a scenario may name as points (`db.<op>`) and fault.
WRITE_OPS = ("append_message", "create_session", "end_session", "reopen_session", "archive_and_compact", "replace_messages",
             "try_acquire_compression_lock", "refresh_compression_lock", "release_compression_lock",
             "record_compression_failure_cooldown", "set_session_title")

# The reference's name of a point where a hermes write of another name does the same thing (`db.refresh_lease` is
# hermes's `refresh_compression_lock`), so that a scenario names one point on every target; other writes keep theirs.
POINT_NAMES = {"try_acquire_compression_lock": "try_acquire_lease", "refresh_compression_lock": "refresh_lease",
               "release_compression_lock": "release_lease", "record_compression_failure_cooldown": "record_cooldown"}

_installed: list[str] = []


def install() -> None:
    """Hook the loaded release's seams (once per process)."""
    if _installed:
        return
    context_compressor = sys.modules["agent.context_compressor"]
    compression = sys.modules["agent.conversation_compression"]
    session_db = sys.modules["hermes_state"].SessionDB
    context_compressor.call_llm = _summary_model  # type: ignore[attr-defined]  # hermes-agent's module, untyped here
    compressor = context_compressor.ContextCompressor
    if hasattr(compressor, "_automatic_compression_blocked"):  # hermes calls it on the class: hook it there
        compressor._automatic_compression_blocked = _hooked(compressor._automatic_compression_blocked, _gate)
    compressor._generate_summary = _hooked(compressor._generate_summary, _summary_generation)
    compression.compress_context = _hooked(compression.compress_context, _attempt)  # type: ignore[attr-defined]  # as above
    if hasattr(compression, "_compression_lock_holder"):
        compression._compression_lock_holder = _hooked(compression._compression_lock_holder, _holder)  # type: ignore[attr-defined]  # as above
    for op in WRITE_OPS:
        if hasattr(session_db, op):
            setattr(session_db, op, _hooked(getattr(session_db, op), functools.partial(_write, op)))
    session_db._execute_write = _hooked(session_db._execute_write, _transaction)
    _installed.append("installed")


def _system() -> HermesSystem | None:
    system = ACTIVE[-1] if ACTIVE else None
    return system if system is not None and system.owns_caller() else None


def _hooked(original: Callable[..., Any], hook: Callable[..., Any]) -> Callable[..., Any]:
    """`original` for any caller outside a run; `hook(system, original, *args)` for the run's threads."""

    @functools.wraps(original)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        system = _system()
        if system is None:
            return original(*args, **kwargs)
        return hook(system, original, *args, **kwargs)

    return hooked


def _summary_model(**kwargs: Any) -> Any:
    system = _system()
    if system is None:
        raise RuntimeError("hermes's summary model was called outside a simulated run")
    return system.summarize(kwargs)


def _gate(system: HermesSystem, original: Callable[..., Any], compressor: Any) -> Any:
    blocked = original(compressor)
    if blocked:
        system.gate_blocked(compressor)
    return blocked


def _summary_generation(system: HermesSystem, original: Callable[..., Any], compressor: Any, *args: Any, **kwargs: Any) -> Any:
    cooling = system.in_cooldown(compressor)
    summary = original(compressor, *args, **kwargs)
    if summary is None and cooling:
        system.summary_skipped_for_cooldown()
    return summary


def _attempt(system: HermesSystem, original: Callable[..., Any], agent: Any, *args: Any, **kwargs: Any) -> Any:
    return system.attempt(agent, lambda: original(agent, *args, **kwargs))


def _holder(system: HermesSystem, original: Callable[..., Any], agent: Any) -> str:
    """The lease holder id, its `agent=` part (the agent object's address) replaced by the agent's name, the
    attempt taking it added (hermes only compares holder ids whole)."""
    return re.sub(r"agent=[0-9a-fx]+", f"agent={system.name_of(agent)}", original(agent)) + system.holder_suffix()


def _write(op: str, system: HermesSystem, original: Callable[..., Any], db: Any, *args: Any, **kwargs: Any) -> Any:
    return system.write(op, db, lambda: original(db, *args, **kwargs), args, kwargs)


def _transaction(system: HermesSystem, original: Callable[..., Any], db: Any, fn: Callable[..., Any], *args: Any,
                 **kwargs: Any) -> Any:
    return system.transaction(db, lambda inner: original(db, inner, *args, **kwargs), fn)
