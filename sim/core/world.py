"""The World: one root seed, one strategy, one kernel, one history; a single deterministic run.

Everything a run decides (which task runs, each random draw) goes through the World's strategy and is
recorded, so the run can be reproduced from its seed or replayed from its decision list.
"""

from __future__ import annotations

import enum
import math
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from contract.events.base import Event
from contract.events.runtime import RunStopped
from contract.history import HistoryEvent
from sim.core import stopping, timefreeze, trace
from sim.kernel.decisions import Decision, Draw
from sim.kernel.errors import BudgetExceeded, Deadlock, DivergenceError, SimulationError
from sim.kernel.scheduler import DEFAULT_MAX_EVENTS, Kernel
from sim.runtime.simulated import SimRuntime
from sim.strategies.random_walk import RandomWalk
from sim.strategies.strategy import Strategy

CheckpointHook = Callable[[str], Awaitable[None]]


class RunOutcome(enum.StrEnum):
    """How a run ended: every task finished, an exception escaped the root task, or the kernel stopped it."""

    OK = "ok"
    ERROR = "error"
    DEADLOCK = "deadlock"
    BUDGET = "budget"


@dataclass
class RunResult:
    """What one run did: its outcome, and everything needed to render, hash or replay it."""

    seed: int
    strategy: str
    outcome: RunOutcome
    value: Any
    error: BaseException | None
    steps: int
    virtual_s: float
    decisions: list[Decision]
    history: list[HistoryEvent]
    task_errors: list[tuple[str, BaseException]]  # (task, what it raised) for every task that ended by an exception

    def digest(self) -> str:
        return trace.digest(self.history, self.decisions)

    def trace_text(self) -> str:
        return trace.render_text(self.history)

    def trace_jsonl(self) -> str:
        return trace.render_jsonl(self.history, self.decisions)


class World:
    def __init__(
        self,
        seed: int = 0,
        strategy: Strategy | None = None,
        *,
        max_steps: int = 1_000_000,
        max_time_s: float = math.inf,
        max_events: int = DEFAULT_MAX_EVENTS,
    ) -> None:
        self.seed = seed
        self._strategy = strategy if strategy is not None else RandomWalk()
        self._strategy.begin(seed)
        self.kernel = Kernel(self._strategy, max_steps=max_steps, max_time_s=max_time_s, max_events=max_events,
                             on_clock_advance=timefreeze.move_to)
        self.decisions: list[Decision] = self.kernel.decisions
        self.runtime = SimRuntime(self)
        self.checkpoint_hook: CheckpointHook | None = None
        self._used = False

    def draw(self, stream: str, bound: int) -> int:
        """A recorded draw in [0, bound) from the named stream, answered by the strategy. A replay that no longer
        fits is remembered as well as raised: a simulated thread's code may swallow the exception."""
        try:
            value = self._strategy.draw(stream, bound)
        except DivergenceError as divergence:
            self.kernel.divergence = self.kernel.divergence or divergence
            raise
        self.decisions.append(Draw(stream, bound, value))
        return value

    def emit(self, event: Event) -> None:
        self.runtime.emit(event)

    def run(self, main: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: str = "main") -> RunResult:
        """Run `main(runtime, *args)` and every task it starts to completion, deadlock or budget.

        Outside a `frozen_time()` batch each run starts its own wall-clock freeze, which costs more than a
        small run itself; `sim.explore` and the scenario runner batch their runs in one freeze.
        """
        if self._used:
            raise RuntimeError("a World runs once; make a new World for the next run")
        self._used = True
        outcome: dict[str, Any] = {}

        def root_done(task: Any, value: Any, exc: BaseException | None) -> None:
            outcome["value"], outcome["error"] = value, exc

        with timefreeze.frozen_time(), stopping.running(self.kernel):
            timefreeze.move_to(0.0)
            root = self.kernel.spawn(main(self.runtime, *args), name, [])
            root.on_done = root_done
            stop = self._drive()
        if self.kernel.divergence is not None:
            raise self.kernel.divergence
        self._strategy.end()
        error: BaseException | None = stop if stop is not None else outcome.get("error")
        return RunResult(
            seed=self.seed,
            strategy=self._strategy.run_name,
            outcome=_outcome(stop, error),
            value=outcome.get("value"),
            error=error,
            steps=self.kernel.steps + self.kernel.extra_steps,
            virtual_s=self.kernel.now_s,
            decisions=self.decisions,
            history=self.kernel.history,
            task_errors=self.kernel.task_errors,
        )

    def _drive(self) -> SimulationError | None:
        """Run the kernel; a deadlock or budget overrun ends the run with its report, never a hang. A run that
        cannot go on (its recording diverged, or it was interrupted) has its tasks closed before the error leaves."""
        try:
            with _driving():
                self.kernel.run()
        except SimulationError as stop:
            self.kernel.record(RunStopped(reason=stop.summary), "kernel")
            self.kernel.close_unfinished()
            return stop
        except BaseException:
            self.kernel.close_unfinished()
            raise
        return None


_driver: list[int] = []  # the OS thread running a World's kernel loop, while it runs


@contextmanager
def _driving() -> Iterator[None]:
    _driver.append(threading.get_ident())
    try:
        yield
    finally:
        _driver.pop()


def in_coroutine_task() -> bool:
    """Whether the caller runs on a World's own loop (a coroutine task of a run, not a simulated thread)."""
    return bool(_driver) and _driver[-1] == threading.get_ident()


def _outcome(stop: SimulationError | None, error: BaseException | None) -> RunOutcome:
    if isinstance(stop, Deadlock):
        return RunOutcome.DEADLOCK
    if isinstance(stop, BudgetExceeded):
        return RunOutcome.BUDGET
    return RunOutcome.OK if error is None else RunOutcome.ERROR
