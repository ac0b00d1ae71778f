"""The systems a scenario can run on: the reference (in this process), or a released program (its own process).

A scenario's `target` (or `--target`) is `reference` or `<family>==<version>`; `hermes==0.19.0` is hermes-agent
as released (`targets/hermes/`). A released target's modules would clash with another release's, so each runs
in a process that loaded it first: a command given scenarios of another target than the one loaded re-runs
itself in a child process for them (`in_target_process`), the way `--mutant` runs under a mutated reference.

What a target must provide (its module in `FAMILIES`): `parse(version)`, `check(scenario, version)` (bad input
for what it cannot do), `EMITS`/`ABSENT` (for which invariants apply), `enter(version)` (load it into this
process), `make_system(world, scenario, invariants)` and `batch()`.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any

REFERENCE = "reference"


class TargetUnavailable(Exception):
    """A released target this machine cannot run (not installed): the message names it and how to install it."""

TARGET_ENV = "COMPACTION_SIM_TARGET"  # set by a parent for the child that runs a released target
FAMILIES = {"hermes": "targets.hermes.target"}


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
    """Bad input (ScenarioError) for anything the scenario's target cannot do."""
    found = plugin(scenario.target)
    if found is not None:
        target, version = found
        target.check(scenario, version)


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
    """What a batch of the scenario's runs shares on its target (a released one patches threading for them)."""
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
    """Re-run this command (with `argv`) in a child process that loads `target` first; its exit status."""
    from sim import children

    env = {**os.environ, TARGET_ENV: target}
    return children.run([sys.executable, "-m", "sim", *argv], env=env).returncode
