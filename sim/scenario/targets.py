"""The systems a scenario can run on: the reference (in this process), or a released program (its own process).

A scenario's `target` (or `--target`) is `reference` or `<family>==<version>`; `hermes==0.19.0` is hermes-agent
as released (`targets/hermes/`). A released target's modules would clash with another release's, so each runs
in a process that loaded it first: a command given scenarios of another target than the one loaded re-runs
itself in a child process for them (`sim.cli.common.in_target_process`), the way `--mutant` runs under a mutated reference.

What a target must provide (its module in `FAMILIES`): `parse(version)`, `capabilities(version)` (what a
scenario may ask of it: `check` refuses the rest as bad input, and a generated workload draws from nothing else),
`POINTS` (the points its releases have, which scenario files may name), `EMITS`/`ABSENT` (for which invariants
apply), `enter(version)` (load it into this process), `make_system(world, scenario, invariants)` and `batch()`.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
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
    terminal_only: frozenset[str] = frozenset()  # drives (and the ctrl_c fault) it takes for terminal agents only


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


def applies(invariant: type, target: str) -> str | None:
    """Why `invariant` does not apply to `target` (None: it does)."""
    found = plugin(target)
    if found is None:
        return None
    module = found[0]
    return invariant.applicability(module.EMITS, module.ABSENT, frozenset(module.SETTINGS),  # type: ignore[attr-defined]  # an Invariant class, typed `type` so this module imports nothing of sim.invariants
                                   module.HOLDERS_NAME_ATTEMPTS)


def batch(scenario: Any) -> AbstractContextManager[Any]:
    """What a batch of the scenario's runs shares on its target (a released one patches threading for them); a
    workload, whose runs share its target, opens one the same way."""
    found = plugin(scenario.target)
    return nullcontext() if found is None else found[0].batch()
