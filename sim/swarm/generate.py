"""From a workload, a root seed and a run index to one concrete scripted scenario.

Everything is drawn from named streams (`sim.swarm.streams`): the world, the config, each action kind and
each fault kind have their own, so one kind's draws never shift another's. The result is an ordinary
scenario document (explicit drives at times, faults at times or at the nth hit of a point, parameters
drawn) checked by the scenario loader, so a generated run is a scripted run: `run_once(scenario, seed)`
replays it byte for byte, and the same document written as TOML is a scenario file that fails the same way.

After the active phase come the quiet phase and the probes: no more actions or faults; once everything
drawn has had time to end (the longest stall, restart delay, timeout and lease TTL), each agent gets one
probe turn (a gateway agent a probe message), so the end-of-run checks judge a system that had to recover.

A feedback campaign passes a `Bias` (`sim.swarm.feedback`): it scales each kind's chance to be enabled and
weights each fault's point, on the same streams, so the neutral bias draws exactly the plain run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contract.streams import derive_seed
from sim.invariants.lineage_reads import FORK_MARKERS
from sim.scenario.loader import scenario_from_document
from sim.scenario.model import Scenario
from sim.scenario.names import registry
from sim.scenario.targets import REFERENCE
from sim.swarm.feedback import NO_BIAS, Bias, enable_key
from sim.swarm.streams import Stream, Streams
from sim.swarm.workload_model import AFTER_EVENT, ActionKind, FaultDraw, Workload

MAX_ACTIONS_PER_AGENT = 60  # per action kind: a bound on one run's length whatever the rate
SEED_MASK = (1 << 63) - 1  # a run seed fits a scenario's explore.seed (a TOML integer)
# An automatic end, a deliberate one and an explicit close: each is handled differently by lineage (#106459).
END_REASONS = ("tui_shutdown", "session_reset", "idle", "cli_close")
TITLE_POOL = 3  # titles are drawn from a few shared texts, so conversations compete for one (numbering, refusal)
PROBE_TEXT = "probe"
DURATION_PARAMS = ("duration", "past_host_by", "restart_after")  # parameters that keep something busy for a while
RECOVERY_KEYS = ("ceiling_timeout_s", "lease_ttl_s", "ctrl_c_grace_s", "provider_latency_s")
GRACE_S = 60.0  # after the quiet phase, before the probes, beyond everything the run drew


def generate(workload: Workload, root_seed: int, run_index: int, bias: Bias = NO_BIAS) -> Scenario:
    """The scenario of run `run_index` of the campaign with `root_seed`, checked by the scenario loader; a
    feedback campaign passes the bias its earlier runs' coverage gives (`sim.swarm.feedback`)."""
    document = scenario_document(workload, root_seed, run_index, bias)
    return scenario_from_document(document, generated_path(workload, root_seed, run_index), registry())


def generated_name(workload: Workload, root_seed: int, run_index: int) -> str:
    return f"{workload.name}_seed{root_seed}_run{run_index}"


def generated_path(workload: Workload, root_seed: int, run_index: int) -> Path:
    """Where the run's scenario comes from, until it is written out: the workload, marked with the run."""
    return Path(f"{workload.path}#{generated_name(workload, root_seed, run_index)}")


def scenario_document(workload: Workload, root_seed: int, run_index: int, bias: Bias = NO_BIAS) -> dict[str, Any]:
    """The run's scenario as a TOML document (what an exported failure's file holds)."""
    streams = Streams(root_seed, run_index)
    swarm = workload.swarm
    world = _world(workload, streams)
    on = set(enabled_kinds(workload, root_seed, run_index, bias))
    faults: list[dict[str, Any]] = []
    for kind, draw in swarm.faults.items():
        if enable_key(workload, "fault", kind) in on:
            faults += _faults(draw, world, swarm.active_s, streams(f"fault.{kind}"), bias.point_weights(kind))
    drives = [drive for kind in ActionKind if enable_key(workload, "action", str(kind)) in on
              for drive in _actions(workload, kind, world, streams)]
    drives = _openings(world) + sorted(drives, key=lambda drive: drive["at"])
    probe_at = _probe_time(swarm.active_s + swarm.quiet_s, world["config"], faults)
    drives += _probes(world, probe_at)
    return {
        "name": generated_name(workload, root_seed, run_index),
        "description": f"Generated from the workload {workload.name}: root seed {root_seed}, run {run_index}"
                       f"{'' if bias == NO_BIAS else ', biased by the coverage of the runs before it'}.",
        **({} if workload.target == REFERENCE else {"target": workload.target}),
        "world": world,
        "drive": drives,
        "fault": faults,
        "expect": {"invariants": _invariants(workload)},
        "explore": {
            "runs": 1,
            "seed": derive_seed(root_seed, f"swarm.{run_index}.schedule") & SEED_MASK,
            "strategy": streams("strategy").pick(swarm.strategies),
            "max_steps": swarm.max_steps,
            "max_store_mb": swarm.max_store_mb,
            "max_time": probe_at + 6 * 3600.0,
        },
    }


def _invariants(workload: Workload) -> Any:
    names = workload.expect.invariants
    return names if names == "all" else list(names)


def enabled_kinds(workload: Workload, root_seed: int, run_index: int, bias: Bias = NO_BIAS) -> list[str]:
    """Swarm testing: the fault and action kinds on in this run (`enable_key` names), each on with its own
    chance (or the workload's), scaled by the bias; one draw from the kind's `enable.<kind>` stream, faults
    first, as the plain generator always drew them."""
    streams = Streams(root_seed, run_index)
    swarm = workload.swarm
    kinds = [(enable_key(workload, "fault", kind), draw.probability, kind) for kind, draw in swarm.faults.items()]
    kinds += [(enable_key(workload, "action", str(kind)), swarm.actions.of(kind).probability, str(kind))
              for kind in ActionKind if swarm.actions.of(kind).rate != 0]
    return [key for key, probability, kind in kinds
            if streams(f"enable.{kind}").chance(bias.chance(key, swarm.enable if probability is None else probability))]


# ---- the world ----------------------------------------------------------------------------------


def _world(workload: Workload, streams: Streams) -> dict[str, Any]:
    ranges = workload.swarm.world
    stream = streams("world")
    shapes = streams("world.lineage")  # forks and orphans: their own stream, so the other world draws stay put
    sessions: list[dict[str, Any]] = []
    for number in range(1, int(stream.span(ranges.sessions)) + 1):
        session: dict[str, Any] = {"id": f"s{number}", "messages": stream.span(ranges.messages)}
        if sessions and stream.chance(ranges.lineage):
            # A continuation: its parent was ended by the compression that created it, so one head stays live.
            session["parent"] = sessions[-1]["id"]
            sessions[-1]["end_reason"] = "compression"
        elif sessions and shapes.chance(ranges.fork):
            session["parent"] = sessions[-1]["id"]
            session["model_config"] = {shapes.pick(FORK_MARKERS): sessions[-1]["id"]}
        sessions.append(session)
    agent_count = int(stream.span(ranges.agents))
    process_count = min(int(stream.span(ranges.processes)), agent_count)
    agents = []
    for number in range(1, agent_count + 1):
        process = number if number <= process_count else 1 + stream.below(process_count)
        agents.append({"name": f"a{number}", "process": f"p{process}", "session": stream.pick(sessions)["id"],
                       "frontend": "gateway" if stream.chance(ranges.gateway) else "cli"})
    # At most one orphan, and only where an agent starts: that agent's opening turn heals it, and any other
    # lineage change before then (another orphan's healing among them) would see it.
    started = {agent["session"] for agent in agents}
    orphan = next((session for session in sessions if "end_reason" not in session and session["id"] in started
                   and shapes.chance(ranges.orphan)), None)
    if orphan is not None:
        orphan["end_reason"] = "compression"
    return {"sessions": sessions, "config": _config(workload, streams("config")), "agents": agents}


def _config(workload: Workload, stream: Stream) -> dict[str, Any]:
    config = {key: _rounded(stream.value(draw)) for key, draw in workload.swarm.world.config.items()}
    if "idle_timeout_s" in config and "ceiling_timeout_s" in config:
        # The reference refuses a total ceiling below the idle timeout: a drawn pair must respect it.
        config["ceiling_timeout_s"] = max(config["ceiling_timeout_s"], config["idle_timeout_s"])
    return config


def _rounded(value: Any) -> Any:
    """Floats to the millisecond, so a generated file reads like a written one."""
    return round(value, 3) if isinstance(value, float) else value


def _agents(world: dict[str, Any], frontend: str | None = None) -> list[str]:
    return [agent["name"] for agent in world["agents"] if frontend is None or agent["frontend"] == frontend]


# ---- actions --------------------------------------------------------------------------------------

# Who an action kind applies to: terminal agents (cli), gateway agents, or any.
_TARGETS = {ActionKind.TURN: "cli", ActionKind.MESSAGE: "gateway", ActionKind.CTRL_C: "cli", ActionKind.CTRL_C_REPEAT: "cli",
            ActionKind.CTRL_C_TYPED: "cli"}


def _actions(workload: Workload, kind: ActionKind, world: dict[str, Any], streams: Streams) -> list[dict[str, Any]]:
    swarm = workload.swarm
    rate = swarm.actions.of(kind)
    stream = streams(f"action.{kind}")
    drives = []
    for agent in _agents(world, _TARGETS.get(kind)):
        count = min(stream.poisson(rate.rate * swarm.active_s / 60.0), MAX_ACTIONS_PER_AGENT)
        times = sorted(_rounded(stream.unit() * swarm.active_s) for _ in range(count))
        for number, at in enumerate(times, start=1):
            drives += _action(kind, agent, at, number, stream, workload.title_sources)
    return drives


def _action(kind: ActionKind, agent: str, at: float, number: int, stream: Stream,
            title_sources: Sequence[str]) -> list[dict[str, Any]]:
    """The drives of one action (a repeated Ctrl+C is two or three presses within a second); a title comes from
    one of the sources its target takes."""
    base = {"at": at, "agent": agent}
    if kind is ActionKind.TURN:
        return [{**base, "turn": f"turn {number} of {agent}"}]
    if kind is ActionKind.MESSAGE:
        return [{**base, "message": f"message {number} to {agent}"}]
    if kind is ActionKind.TITLE:
        return [{**base, "title": f"title {1 + stream.below(TITLE_POOL)}", "title_source": stream.pick(title_sources)}]
    if kind is ActionKind.END_SESSION:
        return [{**base, "command": "end_session", "end_reason": stream.pick(END_REASONS)}]
    if kind is ActionKind.CTRL_C_TYPED:
        return [{**base, "command": "ctrl_c", "typed": f"typed {number} of {agent}"}]
    if kind is ActionKind.CTRL_C_REPEAT:
        presses = 2 + stream.below(2)
        return [{**base, "at": _rounded(at + stream.unit()) if press else at, "command": "ctrl_c"} for press in range(presses)]
    return [{**base, "command": str(kind)}]


# ---- faults ---------------------------------------------------------------------------------------


def _faults(draw: FaultDraw, world: dict[str, Any], active_s: float, stream: Stream,
            point_weights: tuple[float, ...] | None) -> list[dict[str, Any]]:
    faults = []
    for number in range(1, int(stream.span(draw.count)) + 1):
        fault = {"kind": draw.kind, **_trigger(draw, active_s, stream, point_weights), "until": active_s}
        for name, namespace in draw.world_params.items():
            fault[name] = stream.pick(_names(world, namespace, draw.kind))
        fault.update({name: _rounded(stream.value(value)) for name, value in draw.params.items()})
        # Texts are how invariants tell messages apart: two faults writing one default text would be a
        # duplicate turn that nobody sent twice.
        fault.update({name: f"{draw.kind} {number}: {name}" for name in draw.texts})
        faults.append(fault)
    return [fault for fault in faults if all(value is not None for value in fault.values())]


def _names(world: dict[str, Any], namespace: str, kind: str) -> list[Any]:
    """What a fault parameter may name in this world (Ctrl+C reaches terminal agents only)."""
    if namespace == "session":
        return [session["id"] for session in world["sessions"]]
    if namespace == "process":
        return sorted({agent["process"] for agent in world["agents"]})
    names = _agents(world, "cli" if kind == "ctrl_c" else None)
    return names or [None]


def _trigger(draw: FaultDraw, active_s: float, stream: Stream, point_weights: tuple[float, ...] | None) -> dict[str, Any]:
    """At the nth hit of a drawn point (uniformly, or by the feedback's weights), at its first hit after a drawn
    time, at each hit by chance, or at its first hit after a drawn step of the protocol (the first event of a
    kind: a commit admitted, a summary started), which no time or count can aim at across runs."""
    at = {"at": _rounded(stream.unit() * active_s)}
    if draw.points is None:
        return at
    point = stream.pick(draw.points) if point_weights is None else stream.weighted(draw.points, point_weights)
    form = stream.pick(draw.triggers)
    if form == "nth":
        return {"point": point, "nth": stream.span(draw.nth)}
    if form == "per_hit":
        return {"point": point, "probability": 1.0, "per_hit": _rounded(stream.span(draw.per_hit))}
    if form == AFTER_EVENT:
        return {"point": point, "after_event": stream.pick(draw.after_events)}
    return {"point": point, **at} if draw.at_point else at


def _openings(world: dict[str, Any]) -> list[dict[str, Any]]:
    """A turn at the start by the first agent on each orphan: the orphan is state a crash left before the run,
    which the turn that starts on it heals; before that turn nothing may touch the lineage, or it sees the orphan."""
    parents = {session.get("parent") for session in world["sessions"] if "model_config" not in session}
    orphans = {session["id"] for session in world["sessions"]
               if session.get("end_reason") == "compression" and session["id"] not in parents}
    firsts = {agent["session"]: agent for agent in reversed(world["agents"])}
    return [{"at": 0.0, "agent": agent["name"],
             ("message" if agent["frontend"] == "gateway" else "turn"): f"opening turn of {agent['name']}"}
            for sid, agent in firsts.items() if sid in orphans]


# ---- the quiet phase and the probes ----------------------------------------------------------------


def _probe_time(quiet_until: float, config: dict[str, Any], faults: list[dict[str, Any]]) -> float:
    """When everything the run drew has had time to end: the quiet phase, plus the longest fault duration and
    the drawn recovery times (a timeout, a lease TTL), so the probes meet a system that could have recovered."""
    longest = max((fault[name] for fault in faults for name in DURATION_PARAMS if name in fault), default=0.0)
    recovery = sum(config.get(key, 0.0) for key in RECOVERY_KEYS)
    return _rounded(quiet_until + longest + recovery + GRACE_S)


def _probes(world: dict[str, Any], at: float) -> list[dict[str, Any]]:
    """One probe per agent: a turn at a terminal, a message through the gateway."""
    return [{"at": at, "agent": agent["name"],
             ("message" if agent["frontend"] == "gateway" else "turn"): f"{PROBE_TEXT} {agent['name']}"}
            for agent in world["agents"]]
