"""Generated workloads (swarm testing): workload files of ranges and rates, the generator that draws one
concrete scenario per run from them, campaigns over many runs, and their results.

`generate(workload, root_seed, run_index)` is the whole contract between a workload and the rest of the
harness: its result is an ordinary scripted `Scenario`, run with `sim.scenario.runner.run_once`.
"""

from sim.swarm.generate import generate
from sim.swarm.workload_loader import load_workload, load_workloads

__all__ = ["generate", "load_workload", "load_workloads"]
