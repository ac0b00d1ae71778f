"""The systems a scenario can run on: the reference (in this process), or a released program (its own process).

A scenario's `target` (or `--target`) is `reference` or `<family>==<version>`; `hermes==0.19.0` is hermes-agent
as released (`targets/hermes/`). A released target's modules would clash with another release's, so each runs
in a process that loaded it first: a command given scenarios of another target than the one loaded re-runs
itself in a child process for them (`in_target_process`), the way `--mutant` runs under a mutated reference.

What a target must provide (its module in `FAMILIES`): `parse(version)`, `capabilities(version)` (what a
scenario may ask of it: `check` refuses the rest as bad input, and a generated workload draws from nothing else),
`POINTS` (the points its releases have, which scenario files may name), `EMITS`/`ABSENT` (for which invariants
apply), `enter(version)` (load it into this process), `make_system(world, scenario, invariants)` and `batch()`.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

REFERENCE = "reference"


class TargetUnavailable(Exception):
    """A released target this machine cannot run (not installed): the message names it and how to install it."""

TARGET_ENV = "COMPACTION_SIM_TARGET"  # set by a parent for the child that runs a released target
FAMILIES = {"hermes": "targets.hermes.target"}


@dataclass(frozen=True)
class Capabilities:
    """What a released target can be asked. A scenario asking anything else of it is bad input (`check`), and a
    workload run on it draws from nothing else (`sim.swarm.targeted`), so no generated run is thrown away."""

    target: str
    drives: frozenset[str]  # drive actions (`DriveAction` values)
    faults: Mapping[str, tuple[str, ...]]  # fault kind -> the points it may act at (an action kind: any it may wait for)
    refused: Mapping[str, tuple[str, ...]]  # fault kind -> parameters the target cannot honour (they must be absent)
    settings: tuple[str, ...]  # `world.config` keys a scenario may set to any value
    fixed: Mapping[str, tuple[Any, str]]  # `world.config` keys the target has at one value only -> (value, why)
    frontends: frozenset[str]
    events: frozenset[str]  # the event kinds it emits: what an `after_event` trigger can wait for
    title_sources: frozenset[str] = frozenset({"derived", "llm", "user"})  # who may give a title drive's title


def parse(text: str) -> str:
    """A target name, checked: `reference` or `<family>==<version>` of a family and version the harness runs."""
    if text == REFERENCE:
        return text
    family, sep, version = text.partition("==")
    if not sep or family not in FAMILIES:
        raise ValueError(f"target {text!r}: expected {REFERENCE!r} or one of {', '.join(f'{f}==VERSION' for f in FAMILIES)}")
    return f"{family}=={module(family).parse(version)}"


def module(family: str) -> ModuleType:
    return importlib.import_module(FAMILIES[family])


def plugin(target: str) -> tuple[ModuleType, str] | None:
    """A released target's module and version; None for the reference."""
    if target == REFERENCE:
        return None
    family, _, version = target.partition("==")
    return module(family), version


def capabilities(target: str) -> Capabilities:
    """What `target` can be asked: a release declares it; the reference can be asked everything the registry names
    except the points only a released target has."""
    found = plugin(target)
    if found is not None:
        return found[0].capabilities(found[1])
    from sim.registry import reference_points, registry
    from sim.scenario.model import FRONTENDS, DriveAction

    names = registry()
    return Capabilities(target=REFERENCE, drives=frozenset(str(action) for action in DriveAction),
                        faults={kind: tuple(reference_points()) for kind in names.fault_kinds}, refused={},
                        settings=tuple(names.config_fields), fixed={}, frontends=frozenset(FRONTENDS),
                        events=frozenset(names.events))


@cache
def released_points() -> dict[str, str]:
    """The points the released targets' releases have (name -> where), which scenario files may name."""
    return {name: where for family in FAMILIES for name, where in module(family).POINTS.items()}


def selects(point: str, points: Collection[str]) -> bool:
    """Whether a fault's point (a name, or a prefix ending in *) names at least one of `points`."""
    return point in points or (point.endswith("*") and any(name.startswith(point[:-1]) for name in points))


def loaded() -> str:
    """The target this process runs: the reference, unless a parent started it for a released one."""
    return os.environ.get(TARGET_ENV) or REFERENCE


def enter_loaded() -> None:
    """In a child started for a released target: load it before anything else imports it."""
    found = plugin(loaded())
    if found is not None:
        target, version = found
        target.enter(version)


def unavailable(target: str) -> str | None:
    """Why `target` cannot run on this machine, or None (the reference always can)."""
    found = plugin(target)
    return None if found is None else found[0].missing(found[1])


def retarget(scenarios: Sequence[Any], target: str | None) -> list[Any]:
    """The scenarios on `target` (given with --target), or on their own."""
    return [scenario if target is None else dataclasses.replace(scenario, target=target) for scenario in scenarios]


def check(scenario: Any) -> None:
    """Bad input (ScenarioError) for anything the scenario's target cannot do: on the reference, a point only a
    released target has (the fault would never fire)."""
    found = plugin(scenario.target)
    if found is not None:
        target, version = found
        target.check(scenario, version)
        return
    from sim.registry import reference_points
    from sim.scenario.errors import ScenarioError

    for index, fault in enumerate(scenario.faults):
        point = fault.trigger.point
        if point is not None and not selects(point, reference_points()):
            raise ScenarioError(scenario.path, f"fault[{index}].point", "a point of the reference (python -m sim list points)",
                                f"{point!r}, a point of {', '.join(sorted(FAMILIES))} only")


def applies(invariant: type, target: str) -> str | None:
    """Why `invariant` does not apply to `target` (None: it does)."""
    found = plugin(target)
    if found is None:
        return None
    module = found[0]
    return invariant.applicability(module.EMITS, module.ABSENT, frozenset(module.SETTINGS),  # type: ignore[attr-defined]  # an Invariant class, typed `type` so this module imports nothing of sim.invariants
                                   module.HOLDERS_NAME_ATTEMPTS)


def invariants_for(scenario: Any) -> list[type]:
    """The invariant classes a run of `scenario` checks: the ones it names (or all), those that apply to its
    target; a named one that does not apply is bad input, with the reason."""
    from sim.invariants import INVARIANTS
    from sim.scenario.errors import ScenarioError

    names = scenario.expect.invariants
    chosen = list(INVARIANTS) if names == "all" else list(names)
    kept = []
    for name in chosen:
        reason = applies(INVARIANTS[name], scenario.target)
        if reason is None:
            kept.append(INVARIANTS[name])
        elif names != "all":
            raise ScenarioError(scenario.path, "expect.invariants", f"invariants that apply to {scenario.target}",
                                f"{name} ({reason})")
    return kept


def make_system(world: Any, scenario: Any, invariants: Sequence[type]) -> Any:
    """The system a run of `scenario` builds: the reference's, or the loaded release's."""
    found = plugin(scenario.target)
    if found is None:
        from sim.scenario.system import ScenarioSystem

        return ScenarioSystem(world, scenario)
    return found[0].make_system(world, scenario, invariants)


def batch(scenario: Any) -> AbstractContextManager[Any]:
    """What a batch of the scenario's runs shares on its target (a released one patches threading for them); a
    workload, whose runs share its target, opens one the same way."""
    found = plugin(scenario.target)
    return nullcontext() if found is None else found[0].batch()


def elsewhere(scenarios: Sequence[Any], argv: Sequence[str]) -> int | None:
    """Run this command in the process of the scenarios' target when it is not this process's (its exit status);
    None when it runs here. Scenarios of several targets are a usage error: one command runs one target."""
    from sim.cli.common import UsageError

    wanted = sorted({scenario.target for scenario in scenarios})
    if len(wanted) > 1:
        raise UsageError(f"these scenarios run on {', '.join(wanted)}: give one target's scenarios (or --target), or "
                         "compare targets with python -m sim releases")
    if not wanted or wanted[0] == loaded():
        return None
    return in_target_process(wanted[0], argv)


def in_target_process(target: str, argv: Sequence[str]) -> int:
    """Re-run this command (with `argv`) in a child process that loads `target` first; its exit status. A stop
    request is passed to the child, which stops as the command does (a swarm keeps its results), so this process
    only waits for it."""
    from sim import children, stopping

    env = {**os.environ, TARGET_ENV: target}
    with stopping.graceful():
        code = children.run([sys.executable, "-m", "sim", *argv], env=env).returncode
    return stopping.child_exit(code)
