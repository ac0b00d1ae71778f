"""Scenario files: load and validate them into frozen `Scenario` values, or fail with one `ScenarioError`.

`model` holds the loaded values, each field declaring the key it is read from and its spec (`declare` binds
the two and derives the tables); `schema` holds the spec vocabulary (a fault kind's parameter declarations
become specs there), `loader` the reading, the derived defaults and the cross-key rules (`toml_writer` writes a
document back), `docs` the key reference rendered from the tables; `names` is the registry of names a file may
use, `targets` and `targeting` the systems a scenario can run on, `catalogue` where the project's scenarios live.
The scenario harness that runs a loaded scenario is `system` and its parts (`builder`, `processes`, `drives`,
`fault_context`, `view`), driven by `runner`.
"""

from sim.scenario.loader import ScenarioRegistry, load_paths, load_scenario
from sim.scenario.model import AgentSpec, DriveAction, DriveSpec, ExpectSpec, ExploreSpec, FaultSpec, Scenario, SessionSpec, TriggerSpec, WorldSpec
from sim.scenario.scenario_error import ScenarioError

__all__ = [
    "AgentSpec", "DriveAction", "DriveSpec", "ExpectSpec", "ExploreSpec", "FaultSpec", "Scenario", "ScenarioError",
    "ScenarioRegistry", "SessionSpec", "TriggerSpec", "WorldSpec", "load_paths", "load_scenario",
]
