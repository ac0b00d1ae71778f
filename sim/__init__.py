"""compaction-sim's deterministic simulation kernel and harness.

The Python API that the CLI, the tests and the pytest plugin share:

- `explore(program, *args, strategy=..., runs=... | time_budget_s=..., seed=...)` searches the schedules
  of any async `program(rt, *args)`, or of a plain `program(*args)` that uses threads, for a failure, and
  shrinks it; `replay(failure_or_repro, program, *args)` reruns one. `NotSimulated` is what a thread gets
  for a call the thread runtime does not model (a subprocess, a socket).
- `World(seed, strategy).run(main)` is one run, read from its `RunResult` (outcome, history, decisions).
- `unwrap(error)` digs a task's exception out of the exception groups it reached the root task in.
- The strategies, by class or by name (`STRATEGIES`): random walk, PCT, task-relative PCT, preemption-bounded DFS, the portfolio,
  and the unsteered FIFO schedule; a run's decisions are `TaskChoice`s and `Draw`s (`Default` where a sparse
  recording left a choice at its default).
"""

from sim.core.timefreeze import frozen_time
from sim.core.world import RunOutcome, RunResult, World
from sim.kernel.decisions import Default, Draw, TaskChoice
from sim.kernel.errors import BudgetExceeded, Cancelled, Deadlock, DivergenceError, TooSlowError, unwrap
from sim.programs.exploration import Exploration, explore, replay
from sim.programs.failure import Failure
from sim.strategies.by_name import STRATEGIES
from sim.strategies.dfs import PreemptionBoundedDFS
from sim.strategies.fifo import Fifo
from sim.strategies.pct import PCT
from sim.strategies.portfolio import Portfolio
from sim.strategies.random_walk import RandomWalk
from sim.strategies.replay import ReplayStrategy
from sim.strategies.strategy import Strategy
from sim.strategies.task_pct import TaskPCT
from sim.threads.unmodelled import NotSimulated

__all__ = [
    "BudgetExceeded", "Cancelled", "Deadlock", "Default", "DivergenceError", "Draw", "Exploration", "Failure", "Fifo",
    "NotSimulated", "PCT", "Portfolio",
    "PreemptionBoundedDFS", "RandomWalk", "ReplayStrategy", "RunOutcome", "RunResult", "STRATEGIES", "Strategy", "TaskChoice",
    "TaskPCT", "TooSlowError", "World", "explore", "frozen_time", "replay", "unwrap",
]
