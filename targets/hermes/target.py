"""hermes-agent as a target of the scenario language: what it can be asked to do, and what the oracle can judge.

A scenario names it `target = "hermes==0.19.0"` (or `--target`). The release runs in a process of its own
(releases share module names), which `sim.scenario.targets` starts; `enter` loads the release there, stubs its probes
and hooks its seams. Asking a release for something it cannot do (a drive, a fault, a point, a setting) is
bad input naming the target and what it can do instead, never a silent pass. What it can do is declared once,
`capabilities(version)`: `check` reads it, and so does a generated workload, which draws nothing else
(`sim.swarm.targeted`).

**Drives**: `turn` (typed at its terminal; while a turn runs, the terminal's typed interrupt), `message` (a
platform message to its gateway, `gateway.py`), `ctrl_c` and `compress` (/compress) at the terminal, `end_session`,
`title` (/title: the user's, `SessionDB.set_session_title`; hermes keeps no title source, so a world's session
title is the user's too). **Faults**: `stall` and `provider_error` at `provider.summary` and `turn.model` (the
main model; `raises = "context_length_exceeded"` is the provider's refusal of a context too long),
`stall` at `db.<op>`, `db_write_failure` and `db_busy` at `db.<op>` (inside `_execute_write`: before COMMIT in
the transaction, after it outside), `ctrl_c`, `message_mid_compression` (another process's SessionDB appends),
`crash` of a process (no restart). A lease lapses by the virtual clock (a stall past its TTL), as it would.
**Settings**: `threshold_tokens`, `in_place` and `lease_ttl_s` (0.18.2+: the releases before have no in-place
compaction and a fixed TTL), `ctrl_c_grace_s` only at hermes's own 10 s, `static_fallback_summary` (hermes's
`compression.abort_on_summary_failure` negated; on by default there, as in hermes's default config).

**The oracle**: the events the hooks emit (`EMITS`, `observe.py`) and the mechanisms no release has
(`ABSENT`: a fence, a host wait, a pool, a watermark, a heartbeat, a durable generation claim...). An
invariant applies when every event it needs is emitted and every other it reads is emitted or absent
(`sim.invariants.applicability`); `python -m sim list invariants --target hermes==0.19.0` lists both sides.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sim.scenario.scenario_error import ScenarioError
from sim.scenario.targets import Capabilities, TargetUnavailable, selects
from targets.hermes.observe import POINT_NAMES, WRITE_OPS

FAMILY = "hermes"
RELEASES = ("0.16.0", "0.17.0", "0.18.2", "0.19.0")
IN_PLACE_FROM = "0.18.2"  # in-place compaction, the lease refresher and its TTL setting

DRIVES = frozenset({"turn", "message", "ctrl_c", "compress", "end_session", "title"})
SUMMARY = "provider.summary"
MAIN = "turn.model"  # the reference's name of the same call, so one scenario names it on every target
IN_PLACE_OPS = ("archive_and_compact", "refresh_compression_lock", "record_compression_failure_cooldown")  # 0.18.2+
def _point(op: str) -> str:
    """The point before a store write: the reference's name where the write does what one of its own does."""
    return f"db.{POINT_NAMES.get(op, op)}"


POINTS = {
    SUMMARY: "hermes-agent: the summary model's call (`call_llm` in agent/context_compressor.py), the lease held",
    MAIN: "hermes-agent: the turn's call of the main model (`_interruptible_api_call`, agent/conversation_loop.py)",
    **{_point(op): f"hermes-agent: before `SessionDB.{op}`; its store faults act inside `_execute_write`"
       + (f" ({IN_PLACE_FROM}+)" if op in IN_PLACE_OPS else "") for op in WRITE_OPS},
}
# Each fault kind and where it may act: at the summary, at the main model, at a store write, or (an action) at
# a hit of the summary or a store write.
FAULTS = {
    "stall": ("summary", "main", "store"),
    "provider_error": ("summary", "main"),
    "db_write_failure": ("store",),
    "db_busy": ("store",),
    "ctrl_c": ("summary", "store"),
    "message_mid_compression": ("summary", "store"),
    "crash": ("summary", "store"),
}
REFUSED = {"crash": ("restart_after",)}  # the harness restarts no hermes process
SETTINGS = ("threshold_tokens", "in_place", "lease_ttl_s", "ctrl_c_grace_s", "static_fallback_summary")
FRONTENDS = frozenset({"cli", "gateway"})  # its terminal (cli.py) and its gateway's message path (gateway/run.py)
TERMINAL_ONLY = frozenset({"ctrl_c", "compress"})  # the harness drives these at hermes's terminal only
HOLDERS_NAME_ATTEMPTS = True  # `pid:tid:agent:nonce`, to which the holder hook adds `:proc=<process>:attempt=<n>`
CTRL_C_GRACE_S = 10.0  # cli.py: 50 joins of 0.2 s

EMITS = frozenset({
    "frontend.turn_submitted", "frontend.ctrl_c", "frontend.ctrl_c_grace_expired", "frontend.turn_abandoned",
    "frontend.turn_failed", "frontend.session_ended", "turn.persisted", "append.ok", "append.failed",
    "attempt.claimed", "compaction.input", "compaction.summary_started", "compaction.finished", "commit.archived",
    "commit.published", "compaction.commit_failed", "lease.acquired", "lease.contended", "lease.acquire_failed",
    "lease.refreshed", "lease.refresh_failed", "lease.released", "lease.release_failed", "process.crashed",
    "fault.fired", "task.spawn", "task.exit", "session.reopened", "session.titled", "frontend.title_failed",
    "session.title_indeterminate", "turn.context_overflow", "compaction.blocked", "compaction.refused",
    "session.auto_reset",
})
ABSENT = frozenset({
    "fence.begin_ok", "fence.begin_refused", "fence.cancel_won", "fence.revoked", "fence.finish",
    "host.started", "host.returned", "host.timeout", "host.unwind", "host.commit_overrun",
    "pool.saturated", "compaction.watermark", "compaction.watermark_failed", "compaction.input_reread",
    "attempt.restored", "activity.labeled", "compaction.summary_progress", "isolated.abandoned",
    "hard_cancel.requested", "compaction.carried_unread", "external.rotated", "compaction.static_fallback",
    "lease.expired_giveup", "session.adopted", "compaction.strike", "compaction.strike_reset_failed",
})


def parse(version: str) -> str:
    """A release the harness runs; ValueError naming them otherwise."""
    if version not in RELEASES:
        raise ValueError(f"hermes=={version}: the harness runs hermes-agent {', '.join(RELEASES)}")
    return version


def capabilities(version: str) -> Capabilities:
    """What this release can be asked: the store writes it has, and its settings (fixed ones before 0.18.2)."""
    ops = [op for op in WRITE_OPS if op not in IN_PLACE_OPS or not _older(version, IN_PLACE_FROM)]
    where = {"summary": (SUMMARY,), "main": (MAIN,), "store": tuple(_point(op) for op in ops)}
    fixed = {"ctrl_c_grace_s": (CTRL_C_GRACE_S, "its terminal waits that long after a typed interrupt")}
    if _older(version, IN_PLACE_FROM):
        fixed |= {key: (value, f"it has no {key} setting before {IN_PLACE_FROM}") for key, value in _FIXED_BEFORE.items()}
    return Capabilities(
        target=f"{FAMILY}=={version}", drives=DRIVES,
        faults={kind: tuple(point for place in places for point in where[place]) for kind, places in FAULTS.items()},
        refused=REFUSED, settings=tuple(key for key in SETTINGS if key not in fixed), fixed=fixed,
        frontends=FRONTENDS, events=EMITS, title_sources=frozenset({"user"}), terminal_only=TERMINAL_ONLY)


def check(scenario: Any, version: str) -> None:
    """Bad input for anything this release cannot be asked (ScenarioError naming the file, key and target)."""
    can = capabilities(version)
    path, target = scenario.path, can.target
    for index, drive in enumerate(scenario.drives):
        if str(drive.action) not in can.drives:
            raise ScenarioError(path, f"drive[{index}]", f"a drive {target} can take ({', '.join(sorted(can.drives))})",
                                f"a {drive.action} drive")
    for index, fault in enumerate(scenario.faults):
        points = can.faults.get(fault.kind)
        if points is None:
            raise ScenarioError(path, f"fault[{index}].kind", f"a fault {target} can take ({', '.join(sorted(can.faults))})",
                                repr(fault.kind))
        point = fault.trigger.point
        if point is not None and not selects(point, points):
            raise ScenarioError(path, f"fault[{index}].point", f"a point of {target} for {fault.kind} ({_listed(points)})",
                                repr(point))
        for param in can.refused.get(fault.kind, ()):
            if fault.params.get(param) is not None:
                raise ScenarioError(path, f"fault[{index}].{param}", f"none: {target} cannot honour {param} (its processes are not restarted)",
                                    repr(fault.params[param]))
    for index, drive in enumerate(scenario.drives):
        if drive.title is not None and drive.title_source not in can.title_sources:
            raise ScenarioError(path, f"drive[{index}].title_source", f"\"user\": {target} keeps no title source (its /title is the user's)",
                                repr(drive.title_source))
    for index, session in enumerate(scenario.world.sessions):
        if session.title_source not in (None, *can.title_sources):
            raise ScenarioError(path, f"world.sessions[{index}].title_source", f"none or \"user\": {target} keeps no title source",
                                repr(session.title_source))
    for key, value in scenario.world.config.items():
        _check_setting(path, can, key, value)
    _check_gateway_agents(scenario, can)


def _check_gateway_agents(scenario: Any, can: Capabilities) -> None:
    """Bad input for what only hermes's terminal takes (a /compress, a Ctrl+C) asked of a gateway agent."""
    agents = scenario.world.agents
    gateways = {agent.name for agent in agents if agent.frontend == "gateway"}
    for index, drive in enumerate(scenario.drives):
        if drive.agent in gateways and str(drive.action) in can.terminal_only:
            raise ScenarioError(scenario.path, f"drive[{index}]", f"a drive {can.target}'s gateway takes (message, end_session, title)",
                                f"a {drive.action} drive for the gateway agent {drive.agent}")
    for index, fault in enumerate(scenario.faults):
        pressed = fault.params.get("agent") or (agents[0].name if agents else None)
        if fault.kind in can.terminal_only and pressed in gateways:
            raise ScenarioError(scenario.path, f"fault[{index}].agent", f"a terminal agent: {can.target}'s gateway has no {fault.kind}",
                                repr(pressed))


def _listed(points: tuple[str, ...]) -> str:
    """The points a kind may act at, the store's as one `db.<op>` with its ops."""
    store = [point.removeprefix("db.") for point in points if point.startswith("db.")]
    return ", ".join([point for point in points if not point.startswith("db.")]
                     + ([f"db.<op> for op in {', '.join(store)}"] if store else []))


def _check_setting(path: str, can: Capabilities, key: str, value: Any) -> None:
    where = f"world.config.{key}"
    if key in can.fixed:
        fixed, why = can.fixed[key]
        if value != fixed:
            raise ScenarioError(path, where, f"{fixed!r}: {can.target} has it at that value only ({why})", repr(value))
    elif key not in can.settings:
        raise ScenarioError(path, where, f"a setting {can.target} has ({', '.join(SETTINGS)})", repr(key))


_FIXED_BEFORE = {"in_place": False, "lease_ttl_s": 300.0}


def compacts_in_place(version: str) -> bool:
    """Whether the release has in-place compaction (and the lease refresher with its TTL setting)."""
    return not _older(version, IN_PLACE_FROM)


def _older(version: str, than: str) -> bool:
    return tuple(map(int, version.split("."))) < tuple(map(int, than.split(".")))


def settings(scenario: Any) -> dict[str, Any]:
    """The run's settings by the reference's names (what an invariant may read of `config`)."""
    return {"lease_ttl_s": 300.0, "ctrl_c_grace_s": CTRL_C_GRACE_S, "static_fallback_summary": True, **scenario.world.config}


def apply_settings(agent: Any, values: dict[str, Any]) -> None:
    """Set a fresh AIAgent as the scenario says."""
    if "threshold_tokens" in values:
        agent.context_compressor.threshold_tokens = values["threshold_tokens"]
    if "in_place" in values and hasattr(agent, "compression_in_place"):
        agent.compression_in_place = values["in_place"]
    if "lease_ttl_s" in values:
        agent._compression_lock_ttl_seconds = values["lease_ttl_s"]
    # hermes's `compression.abort_on_summary_failure` (default false: a failed summary becomes a static handoff)
    agent.context_compressor.abort_on_summary_failure = not values["static_fallback_summary"]


# ---- the process that runs a release ----------------------------------------------------------------------


_loaded: list[str] = []
_home: list[Path] = []


def enter(version: str) -> None:
    """Load the release into this process (once), its probes stubbed and its seams hooked."""
    from targets.hermes import loader, observe, probes, tls

    reason = missing(version)
    if reason is not None:
        raise TargetUnavailable(reason)
    if _loaded:
        if _loaded[0] != version:
            raise ScenarioError("", "target", f"hermes=={_loaded[0]}, the release this process runs", f"hermes=={version}")
        return
    home = loader.make_home(f"hermes-{version}-")
    probes.write_config(home)
    loader.load(version, home)
    probes.stub_probes()
    tls.share_contexts()
    _warm_up(home)
    observe.install()
    _loaded.append(version)
    _home.append(home)


def _warm_up(home: Path) -> None:
    """One agent's turn and compaction at load, outside any run: what hermes does once per process (the log
    listener thread of hermes_logging, module caches, the imports its functions make on first use) happens here,
    for real, so that every run starts from the same process state, not the first one from a fresher one."""
    import contextlib
    import io

    import hermes_state
    import run_agent
    from agent import context_compressor

    from targets.hermes.baseline import history
    from targets.hermes.provider import reply, script_main_model

    context_compressor.call_llm = lambda **kwargs: reply("a warm-up summary")
    with contextlib.redirect_stdout(io.StringIO()):
        db = hermes_state.SessionDB(db_path=home / "warm-up.db")
        agent = run_agent.AIAgent(base_url="http://127.0.0.1:9/v1", api_key="offline", provider="custom", model="scripted",
                                  quiet_mode=True, skip_context_files=True, skip_memory=True, enabled_toolsets=[],
                                  session_db=db, session_id="warm-up")
        script_main_model(agent, "a warm-up answer")
        earlier = history()
        agent._persist_session(earlier, [])
        agent.run_conversation(user_message="a warm-up question", conversation_history=earlier)
        agent._compress_context(earlier, None, force=True)


def missing(version: str) -> str | None:
    """Why the release cannot run on this machine (not installed, and the message says how to), or None."""
    from targets.hermes.store import ReleaseMissing, release

    try:
        release(version).require()
    except ReleaseMissing as error:
        return str(error)
    return None


def loaded() -> str | None:
    return _loaded[0] if _loaded else None


_runs = [0]


def make_system(world: Any, scenario: Any, invariants: Any) -> Any:
    from targets.hermes.system import HermesSystem

    _runs[0] += 1
    folder = _home[0] / "runs" / f"run{_runs[0]}"
    return HermesSystem(world, scenario, folder, invariants, settings(scenario))


@contextmanager
def batch() -> Iterator[None]:
    from sim.threads.patching import threads_patched

    with threads_patched():
        yield
