"""compaction-sim's deterministic simulation kernel and harness.

The Python API that the CLI, the tests and the pytest plugin share: build a `World(seed, strategy)`, call
`run(main)` with an async `main(runtime)`, and read the `RunResult` (outcome, history, decisions, digest).
"""

from sim.kernel.errors import BudgetExceeded, Cancelled, Deadlock, DivergenceError, TooSlowError
from sim.strategies.random_walk import RandomWalk
from sim.strategies.replay import ReplayStrategy
from sim.timefreeze import frozen_time
from sim.world import RunResult, World, replay

__all__ = [
    "BudgetExceeded", "Cancelled", "Deadlock", "DivergenceError", "TooSlowError",
    "RandomWalk", "ReplayStrategy", "RunResult", "World", "frozen_time", "replay",
]
