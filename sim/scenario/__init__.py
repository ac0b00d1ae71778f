"""Scenario files: load and validate them into frozen `Scenario` values, or fail with one `ScenarioError`.

`schema` holds the declarative key specs (fault kinds declare their parameters with them), `loader` the
scenario file's keys and the loading, `model` the loaded values, `docs` the key reference rendered from
the specs.
"""

from sim.scenario.errors import ScenarioError
from sim.scenario.loader import ScenarioRegistry, load_paths, load_scenario
from sim.scenario.model import (
    AgentSpec,
    DriveAction,
    DriveSpec,
    ExpectSpec,
    ExploreSpec,
    FaultSpec,
    Scenario,
    SessionSpec,
    TriggerSpec,
    WorldSpec,
)

__all__ = [
    "AgentSpec", "DriveAction", "DriveSpec", "ExpectSpec", "ExploreSpec", "FaultSpec", "Scenario", "ScenarioError",
    "ScenarioRegistry", "SessionSpec", "TriggerSpec", "WorldSpec", "load_paths", "load_scenario",
]
