"""The names scenario files may use, collected from the code that declares them.

Events and points come from the contract (`contract.events`, `contract.points`) and `db.<op>` from the store's
operations, so a new point or event is usable in a scenario as soon as it is declared, and a misspelt one is
an error at load time instead of a fault that never fires. Events and points are listed with a one-line
description each (an event's docstring's first line, a point's place), for `python -m sim list`.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache

from contract.events import BY_KIND
from contract.points import REFERENCE_POINTS, STORE_POINTS, store_point
from faults import FAULT_KINDS
from faults.base import Placement
from reference.fixes import FIXES
from reference.store import SessionStore
from sim.invariants import INVARIANTS
from sim.scenario import targets
from sim.scenario.builder import config_fields
from sim.scenario.schema import Registered, Spec, spec_for
from sim.strategies.by_name import STRATEGIES as RUNNER_STRATEGIES

STRATEGIES = tuple(RUNNER_STRATEGIES)

_POINT = Registered("Where the fault acts: a named point (a trailing * selects a prefix).", source="points",
                    noun="a named point", glob=True, example='"provider.summary"')


def store_operations() -> list[str]:
    return [name for name, _ in inspect.getmembers(SessionStore, inspect.isfunction) if not name.startswith("_")]


def fault_params(kind: str) -> Mapping[str, Spec]:
    """A kind's parameters; faults that act at a point require the trigger's `point`."""
    fault = FAULT_KINDS[kind]
    params = {name: spec_for(param) for name, param in fault.params.items()}
    return {"point": _POINT, **params} if fault.where in (Placement.POINT, Placement.STORE) else params


def events() -> dict[str, str]:
    """Every event kind, with when it is emitted."""
    return {kind: cls.summary() for kind, cls in BY_KIND.items()}


@cache
def reference_points() -> dict[str, str]:
    """The reference's named points, with where each is: its own, then one per store operation."""
    documented: dict[str, str] = {point: point.where for point in (*REFERENCE_POINTS, *STORE_POINTS)}
    for op in store_operations():
        documented.setdefault(store_point(op), f"before the store operation `{op}` (not called by the reference)")
    return {str(name): where for name, where in documented.items()}


def points() -> dict[str, str]:
    """Every point a scenario may name: the reference's, then those only a released target has (`sim.scenario.targets`;
    a scenario naming one runs on that target, `check` refuses it elsewhere)."""
    return {**reference_points(), **{name: where for name, where in targets.released_points().items()
                                     if name not in reference_points()}}


@dataclass(frozen=True)
class Registry:
    fault_kinds: Mapping[str, Mapping[str, Spec]]
    invariants: Collection[str]
    points: Mapping[str, str]  # name -> where it is
    events: Mapping[str, str]  # kind -> when it is emitted
    config_fields: Mapping[str, type]
    mutants: Collection[str]
    strategies: Collection[str]
    coverage_marks: Collection[str]


@cache
def registry() -> Registry:
    """The registry of this checkout (built once per process)."""
    kinds = events()
    return Registry(
        fault_kinds={kind: fault_params(kind) for kind in FAULT_KINDS},
        invariants=tuple(INVARIANTS),
        points=points(),
        events=kinds,
        config_fields=config_fields(),
        mutants=tuple(fix.name for fix in FIXES),
        strategies=STRATEGIES,
        coverage_marks=frozenset(kinds),
    )
