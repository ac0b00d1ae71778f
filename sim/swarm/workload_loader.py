"""Workload files in, validated `Workload` values out; a mistake is one ScenarioError naming file, key, expectation.

A workload is a scenario file whose `[swarm]` table replaces the scripted `[world]`, `[[drive]]` and
`[[fault]]`; it is read with the scenario loader's reader and checked with the same specs and registry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from contract.vocabulary import TITLE_SOURCES
from sim.scenario import targets
from sim.scenario.declare import build
from sim.scenario.loader import SWARM_TABLE, ScenarioRegistry, load_paths, name_or_stem, read_document
from sim.scenario.model import ExpectSpec
from sim.scenario.schema import Context, Location
from sim.swarm.targeted import on_target
from sim.swarm.workload_model import WORKLOAD, ActionRate, ActionRates, SwarmSpec, Workload, WorldRanges


def load_workload(path: str | Path, registry: ScenarioRegistry, target: str | None = None) -> Workload:
    """Read, parse and validate one workload file, cut to what its target can take (`target`, a parsed name, given
    with --target; else the file's own, which must need no cut: `sim.swarm.targeted`)."""
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
    workload = build(Workload, checked, path=file, name=name_or_stem(checked["name"], Path(path), root), swarm=spec,
                     expect=build(ExpectSpec, checked["expect"]), cuts=(), title_sources=TITLE_SOURCES)
    if target is None:
        try:
            target = targets.parse(workload.target)
        except ValueError as error:
            raise root.key("target").error(str(error).partition(": ")[2], repr(workload.target)) from None
    fitted, cuts = on_target(workload, target)
    if cuts and target == workload.target:
        where = root
        for name in cuts[0].keys:
            where = where.key(name)
        raise where.error(f"what {target} can take", cuts[0].why)
    return dataclasses.replace(fitted, cuts=tuple(cuts))


def load_workloads(paths: Iterable[str | Path], registry: ScenarioRegistry, target: str | None = None) -> list[Workload]:
    """Workload files and folders (each folder's `*.toml`, sorted), each file once, names unique; on `target` if
    given (--target), else each on its own."""
    return load_paths(paths, registry, load=lambda path, names: load_workload(path, names, target))


def _check_world(world: dict[str, Any], where: Location) -> None:
    """Processes hold agents: more processes than agents would leave one empty."""
    if world["processes"].low > world["agents"].high:
        raise where.key("processes").error("at most as many processes as agents (swarm.world.agents)",
                                           f"at least {world['processes'].low} for at most {world['agents'].high} agents")
