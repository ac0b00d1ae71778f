"""The names scenario files may use, collected from the code that defines them.

Points and events are read from the reference's source (every `rt.checkpoint("...")` label, every
`emit("...")` kind, and `db.<op>` for each store operation), so a new point or event is usable in a scenario
as soon as the code has it, and a misspelt one is an error at load time instead of a fault that never fires.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Collection, Mapping

from faults import FAULT_KINDS
from reference.fixes import FIXES
from reference.store import SessionStore
from sim.invariants import INVARIANTS
from sim.strategies.registry import STRATEGIES as RUNNER_STRATEGIES
from sim.scenario.schema import Registered, Spec
from sim.scenario.system import config_fields

ROOT = Path(__file__).resolve().parent.parent
_CHECKPOINT = re.compile(r"checkpoint\(\s*\"([a-z_.]+)\"")
_EMIT = re.compile(r"(?:emit|record)\(\s*\"([a-z_]+\.[a-z_.]+)\"")
STRATEGIES = tuple(RUNNER_STRATEGIES)

_POINT = Registered("Where the fault acts: a named point (a trailing * selects a prefix).", source="points",
                    noun="a named point", glob=True, example='"provider.summary"')


def _scan(pattern: re.Pattern[str], *folders: str) -> set[str]:
    names: set[str] = set()
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            names.update(pattern.findall(path.read_text(encoding="utf-8")))
    return names


def store_operations() -> list[str]:
    return [name for name, _ in inspect.getmembers(SessionStore, inspect.isfunction) if not name.startswith("_")]


def fault_params(kind: str) -> Mapping[str, Spec]:
    """A kind's parameters; faults that act at a point require the trigger's `point`."""
    fault = FAULT_KINDS[kind]
    return {"point": _POINT, **fault.params} if fault.where in ("point", "store") else fault.params


@dataclass(frozen=True)
class Registry:
    fault_kinds: Mapping[str, Mapping[str, Spec]]
    invariants: Collection[str]
    points: Collection[str]
    events: Collection[str]
    config_fields: Mapping[str, type]
    mutants: Collection[str]
    strategies: Collection[str]
    coverage_marks: Collection[str]


@cache
def registry() -> Registry:
    """The registry of this checkout (built once per process)."""
    points = _scan(_CHECKPOINT, "reference") | {f"db.{op}" for op in store_operations()}
    events = _scan(_EMIT, "reference", "sim", "faults")
    return Registry(
        fault_kinds={kind: fault_params(kind) for kind in FAULT_KINDS},
        invariants=tuple(INVARIANTS),
        points=frozenset(points),
        events=frozenset(events),
        config_fields=config_fields(),
        mutants=tuple(fix.name for fix in FIXES),
        strategies=STRATEGIES,
        coverage_marks=frozenset(events),
    )
