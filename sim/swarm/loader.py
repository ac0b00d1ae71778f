"""Workload files in, validated `Workload` values out; a mistake is one ScenarioError naming file, key, expectation.

A workload is a scenario file whose `[swarm]` table replaces the scripted `[world]`, `[[drive]]` and
`[[fault]]`; it is read with the scenario loader's reader and checked with the same specs and registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sim.scenario.declare import build
from sim.scenario.loader import SWARM_TABLE, ScenarioRegistry, load_paths, name_or_stem, read_document
from sim.scenario.model import ExpectSpec
from sim.scenario.schema import Context, Location
from sim.swarm.model import WORKLOAD, ActionRate, ActionRates, SwarmSpec, Workload, WorldRanges


def load_workload(path: str | Path, registry: ScenarioRegistry) -> Workload:
    """Read, parse and validate one workload file."""
    file = str(path)
    document = read_document(path)
    root = Location(file)
    if SWARM_TABLE not in document:
        raise root.key(SWARM_TABLE).error("a [swarm] table (a scripted scenario runs with python -m sim run)", "none")
    checked = WORKLOAD.check(document, root, Context(registry))
    swarm = checked["swarm"]
    _check_world(swarm["world"], root.key("swarm").key("world"))
    spec = build(
        SwarmSpec, swarm,
        world=build(WorldRanges, swarm["world"]),
        actions=build(ActionRates, swarm["actions"], **{kind: build(ActionRate, rate) for kind, rate in swarm["actions"].items()}),
    )
    return build(Workload, checked, path=file, name=name_or_stem(checked["name"], Path(path), root), swarm=spec,
                 expect=build(ExpectSpec, checked["expect"]))


def load_workloads(paths: Iterable[str | Path], registry: ScenarioRegistry) -> list[Workload]:
    """Workload files and folders (each folder's `*.toml`, sorted), each file once, names unique."""
    return load_paths(paths, registry, load=load_workload)


def _check_world(world: dict[str, Any], where: Location) -> None:
    """Processes hold agents: more processes than agents would leave one empty."""
    if world["processes"].low > world["agents"].high:
        raise where.key("processes").error("at most as many processes as agents (swarm.world.agents)",
                                           f"at least {world['processes'].low} for at most {world['agents'].high} agents")
