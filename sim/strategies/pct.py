"""PCT, probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi and Nagarakatte, ASPLOS 2010).

Why not only a random walk: a race that needs d ordering constraints between tasks (its depth) is hit by a
uniform walk with a chance that falls exponentially in the number of scheduling steps between those events.
PCT runs strictly by priority and changes priorities at d-1 random points, which finds any bug of depth d
with probability at least 1 / (n * k^(d-1)) per run for n tasks and k steps, however long the run.

How it maps onto this kernel:

- Tasks appear over time, so a task gets its random priority when it is first seen among the runnable ones
  (unseen tasks in tid order, so the assignment depends on the seed only). Initial priorities lie in
  [d, d+1); change point i lowers to i (1 <= i <= d-1), below every initial priority.
- A step is one choice between two or more runnable tasks (a step with one runnable task asks nothing), so
  the horizon k counts choices. At a change point the task about to run, the highest-priority runnable one,
  is lowered, and the choice is made with the new priorities: each change point is a preemption.
- Runs of one program have similar lengths, so without an explicit horizon k becomes the longest run seen
  so far (the first run guesses INITIAL_HORIZON): change points then fall inside the run instead of past
  its end. A fixed `horizon` makes every run a function of its seed.
- Random draws come from per-stream generators seeded like the random walk's.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from contract.streams import derive_seed
from sim.strategies.random_walk import NOT_BEGUN, Streams
from sim.strategies.strategy import Strategy

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task

DEFAULT_DEPTH = 3
INITIAL_HORIZON = 100


class HorizonEstimate:
    """The longest run seen so far, in choices: the horizon PCT draws its change points over."""

    def __init__(self) -> None:
        self.longest = 0

    def observe(self, choices: int) -> None:
        self.longest = max(self.longest, choices)


class Prioritised(Strategy):
    """What PCT and task-relative PCT share: the highest-priority runnable task runs; a task gets a random
    priority in [d, d+1) when first seen among the runnable ones (unseen tasks in tid order, so the assignment
    depends on the seed only); a change point lowers a task below every initial priority; random draws come from
    per-stream generators seeded like the random walk's."""

    def __init__(self, depth: int, salt: str) -> None:
        self.depth = depth
        self._salt = salt
        self._rng = NOT_BEGUN
        self._priorities: dict[int, float] = {}
        self._streams = Streams()

    @property
    def priorities(self) -> dict[int, float]:
        """Task tid -> its current priority, for the tasks seen so far in this run."""
        return dict(self._priorities)

    def _begin_priorities(self, seed: int) -> None:
        self._rng = random.Random(derive_seed(seed, self._salt))
        self._priorities = {}
        self._streams.begin(seed)

    def draw(self, stream: str, bound: int) -> int:
        return self._streams.draw(stream, bound)

    def _highest_after_seeing(self, runnable: Sequence[Task]) -> int:
        """The highest-priority runnable task, once every task first seen here has its priority."""
        for tid in sorted(task.tid for task in runnable if task.tid not in self._priorities):
            self._priorities[tid] = self.depth + self._rng.random()
        return self._highest(runnable)

    def _lowered(self, runnable: Sequence[Task], top: int, priority: int) -> int:
        """The highest-priority runnable task once the task at `top` is lowered to `priority` (a change point)."""
        self._priorities[runnable[top].tid] = priority
        return self._highest(runnable)

    def _highest(self, runnable: Sequence[Task]) -> int:
        priorities = self._priorities
        return max(range(len(runnable)), key=lambda index: priorities[runnable[index].tid])


class PCT(Prioritised):
    """Highest priority runs; d-1 priority change points spread uniformly over the expected run length."""

    def __init__(self, depth: int = DEFAULT_DEPTH, horizon: int | None = None) -> None:
        if depth < 1:
            raise ValueError(f"PCT depth must be at least 1, got {depth}")
        if horizon is not None and horizon < 1:
            raise ValueError(f"PCT horizon must be at least 1, got {horizon}")
        super().__init__(depth, "pct")
        self.name = f"pct-d{depth}"
        self._fixed_horizon = horizon
        self._estimate = HorizonEstimate()
        self._choices = 0
        self._change_points: dict[int, int] = {}

    @property
    def horizon(self) -> int:
        """The k that change points are drawn over in the current run."""
        return self._fixed_horizon or self._estimate.longest or INITIAL_HORIZON

    @property
    def change_points(self) -> dict[int, int]:
        """Choice number (1-based) -> the priority the task about to run is lowered to there."""
        return dict(self._change_points)

    def begin(self, seed: int) -> None:
        self._choices = 0
        self._begin_priorities(seed)
        points = self._rng.sample(range(1, self.horizon + 1), min(self.depth - 1, self.horizon))
        self._change_points = {point: lowered for lowered, point in enumerate(points, start=1)}

    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        self._choices += 1
        top = self._highest_after_seeing(runnable)
        lowered = self._change_points.get(self._choices)
        return top if lowered is None else self._lowered(runnable, top, lowered)

    def end(self) -> None:
        self._estimate.observe(self._choices)
