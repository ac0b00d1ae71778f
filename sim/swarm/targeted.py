"""A workload on its target: cut, once, to what the target can take, so no generated run is thrown away.

The generator draws from the workload as it is; on a released target it must draw nothing the target would
refuse as bad input (`sim.scenario.targets.Capabilities`), or runs would be made only to be discarded. So at load the
workload loses what the target cannot take: fault kinds it lacks, points it has not, `after_event` kinds it never
emits, parameters it cannot honour, action kinds whose drive it cannot take, settings it lacks or has at one
value only, gateway agents (all, or where it draws what the target's gateway cannot take). Each cut says what
and why. A workload file that names its target itself must need
no cut (what it asks beyond the target is bad input naming the key); one given `--target` is cut and told so.
On the reference only points that a released target alone has are cut, which no reference workload names: every
reference workload draws what it drew before.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from contract.vocabulary import TITLE_SOURCES
from sim.scenario import targeting, targets
from sim.swarm.workload_model import AFTER_EVENT, ActionKind, ActionRate, FaultDraw, Workload

# The drive action each action kind makes (`sim.swarm.generate._action`).
ACTION_DRIVES = {
    ActionKind.TURN: "turn", ActionKind.MESSAGE: "message", ActionKind.COMPRESS: "compress", ActionKind.CTRL_C: "ctrl_c",
    ActionKind.CTRL_C_REPEAT: "ctrl_c", ActionKind.CTRL_C_TYPED: "ctrl_c", ActionKind.END_SESSION: "end_session",
    ActionKind.RESTART: "restart", ActionKind.TITLE: "title",
}


@dataclass(frozen=True)
class Cut:
    """A part of a workload its target cannot take: its key (as a path of keys), and why."""

    keys: tuple[str, ...]
    why: str

    def __str__(self) -> str:
        return f"{'.'.join(self.keys)} ({self.why})"


def on_target(workload: Workload, target: str) -> tuple[Workload, list[Cut]]:
    """The workload with only what `target` (a parsed target name) can take, and what was cut."""
    can = targeting.capabilities(target)
    cuts: list[Cut] = []
    faults = {}
    for kind, draw in workload.swarm.faults.items():
        kept = _fault_on(draw, can, cuts)
        if kept is not None:
            faults[kind] = kept
    actions = workload.swarm.actions
    for kind in ActionKind:
        rate = actions.of(kind)
        refused = _refused_action(kind, can)
        if rate.rate != 0 and refused is not None:
            cuts.append(Cut(("swarm", "actions", str(kind)), refused))
            actions = dataclasses.replace(actions, **{str(kind): ActionRate(0.0, rate.probability)})
    world = _world_on(workload.swarm.world, can, cuts, _terminal_only(actions, faults, can))
    swarm = dataclasses.replace(workload.swarm, faults=faults, actions=actions, world=world)
    sources = tuple(source for source in TITLE_SOURCES if source in can.title_sources)
    return dataclasses.replace(workload, target=target, swarm=swarm, title_sources=sources), cuts


def _refused_action(kind: ActionKind, can: targets.Capabilities) -> str | None:
    """Why the target cannot take the drives an action kind makes (None: it can). A generated title comes from a
    source the target takes (`Workload.title_sources`), so only a target that takes none refuses titles."""
    if ACTION_DRIVES[kind] not in can.drives:
        return f"{can.target} takes no {ACTION_DRIVES[kind]} drive"
    if kind is ActionKind.TITLE and not can.title_sources:
        return f"{can.target} takes a title from no source"
    return None


def _fault_on(draw: FaultDraw, can: targets.Capabilities, cuts: list[Cut]) -> FaultDraw | None:
    """One fault kind as the target can take it, or None if it can take none of it."""
    key = ("swarm", "faults", draw.kind)
    if draw.kind not in can.faults:
        cuts.append(Cut(key, f"{can.target} has no {draw.kind} fault"))
        return None
    changes: dict[str, Any] = {}
    if draw.points is not None:
        # A prefix selects the target's points it matches; a point named outright that the target lacks is cut.
        points = tuple(point for point in draw.points if point in can.faults[draw.kind])
        lacking = [point for point in draw.written if point in draw.points and point not in points]
        if lacking or not points:
            cuts.append(Cut((*key, "points"), f"{can.target} has no point {_few(lacking or list(draw.written))} for {draw.kind}"))
        if not points and draw.at_point:
            return None
        changes["points"] = points or None  # an action kind left without points acts at a time
    after_events = tuple(kind for kind in draw.after_events if kind in can.events)
    if len(after_events) < len(draw.after_events):
        lacking = [kind for kind in draw.after_events if kind not in after_events]
        cuts.append(Cut((*key, "after_events"), f"{can.target} never emits {_few(lacking)}"))
        changes["after_events"] = after_events
        if not after_events:
            changes["triggers"] = tuple(form for form in draw.triggers if form != AFTER_EVENT)
            if not changes["triggers"] and changes.get("points", draw.points) is not None:
                return None
    refused = [name for name in can.refused.get(draw.kind, ()) if name in draw.params]
    if refused:
        cuts.append(Cut((*key, refused[0]), f"{can.target} cannot honour {', '.join(refused)}"))
        changes["params"] = {name: value for name, value in draw.params.items() if name not in refused}
    return dataclasses.replace(draw, **changes)


def _terminal_only(actions: Any, faults: dict[str, FaultDraw], can: targets.Capabilities) -> list[str]:
    """What the workload draws that the target takes for terminal agents only: action kinds, the ctrl_c fault."""
    drawn = [str(kind) for kind in ActionKind if actions.of(kind).rate and ACTION_DRIVES[kind] in can.terminal_only]
    return drawn + [f"the {kind} fault" for kind in faults if kind in can.terminal_only]


def _world_on(world: Any, can: targets.Capabilities, cuts: list[Cut], terminal_only: list[str]) -> Any:
    """The world's ranges without gateway agents (if the target has none, or none that take all the workload draws
    for any agent) or settings the target lacks (or has at one value only)."""
    changes: dict[str, Any] = {}
    if world.gateway and "gateway" not in can.frontends:
        cuts.append(Cut(("swarm", "world", "gateway"), f"{can.target} has no gateway agents"))
        changes["gateway"] = 0.0
    elif world.gateway and terminal_only:
        cuts.append(Cut(("swarm", "world", "gateway"), f"{can.target}'s gateway agents take no {_few(terminal_only)}"))
        changes["gateway"] = 0.0
    config = {}
    for name, value in world.config.items():
        if name in can.settings:
            config[name] = value
        elif name in can.fixed:
            cuts.append(Cut(("swarm", "world", "config", name), f"{can.target} has it at {can.fixed[name][0]!r} only"))
        else:
            cuts.append(Cut(("swarm", "world", "config", name), f"{can.target} has no such setting"))
    if len(config) < len(world.config):
        changes["config"] = config
    return dataclasses.replace(world, **changes) if changes else world


def _few(names: list[str], shown: int = 4) -> str:
    """Names for a one-line message: the first few, then how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")
