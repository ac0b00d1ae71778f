"""A scenario's target as the harness runs it: what it can be asked, whether a scenario fits it, the invariants
that judge it, and the system a run of it builds.

The reference answers from the registry of names and builds its `ScenarioSystem`; a released target answers
from its module (`sim.scenario.targets`), which knows nothing of the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sim.invariants import INVARIANTS
from sim.scenario.model import FRONTENDS, DriveAction
from sim.scenario.names import reference_points, registry
from sim.scenario.scenario_error import ScenarioError
from sim.scenario.system import ScenarioSystem
from sim.scenario.targets import FAMILIES, REFERENCE, Capabilities, applies, plugin, selects


def capabilities(target: str) -> Capabilities:
    """What `target` can be asked: a release declares it; the reference can be asked everything the registry names
    except the points only a released target has."""
    found = plugin(target)
    if found is not None:
        return found[0].capabilities(found[1])
    names = registry()
    return Capabilities(target=REFERENCE, drives=frozenset(str(action) for action in DriveAction),
                        faults={kind: tuple(reference_points()) for kind in names.fault_kinds}, refused={},
                        settings=tuple(names.config_fields), fixed={}, frontends=frozenset(FRONTENDS),
                        events=frozenset(names.events))


def check(scenario: Any) -> None:
    """Bad input (ScenarioError) for anything the scenario's target cannot do: on the reference, a point only a
    released target has (the fault would never fire)."""
    found = plugin(scenario.target)
    if found is not None:
        target, version = found
        target.check(scenario, version)
        return
    for index, fault in enumerate(scenario.faults):
        point = fault.trigger.point
        if point is not None and not selects(point, reference_points()):
            raise ScenarioError(scenario.path, f"fault[{index}].point", "a point of the reference (python -m sim list points)",
                                f"{point!r}, a point of {', '.join(sorted(FAMILIES))} only")


def invariants_for(scenario: Any) -> list[type]:
    """The invariant classes a run of `scenario` checks: the ones it names (or all), those that apply to its
    target; a named one that does not apply is bad input, with the reason."""
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
        return ScenarioSystem(world, scenario)
    return found[0].make_system(world, scenario, invariants)
