"""Hypothesis-driven choice: every scheduling choice and random draw is a value drawn from Hypothesis.

Why: a failing run found by any strategy carries every step it took, most of them irrelevant to the race.
When Hypothesis supplies each decision, its shrinker works on the decision sequence itself: it replays
shorter and smaller sequences (smaller means closer to index 0, the kernel's FIFO order, and to draw 0)
while the run still fails, and hands back a minimal failing run whose decision list is what matters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import hypothesis
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st
from hypothesis.errors import StopTest

from sim.kernel.errors import DivergenceError
from sim.scenario.model import Scenario
from sim.scenario.runner import RunReport, run_once
from sim.strategies.base import Strategy
from sim.timefreeze import frozen_time

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task

Outcome = TypeVar("Outcome")


class HypothesisChoice(Strategy):
    """Answers the kernel from a Hypothesis `data` object, so the run is one Hypothesis example."""

    name = "hypothesis"

    def __init__(self, data: Any) -> None:
        self._data = data

    def begin(self, seed: int) -> None:
        """Nothing to seed: Hypothesis owns the randomness of the example."""

    def choose_task(self, runnable: Sequence["Task"], previous: "Task | None") -> int:
        return self._ask(len(runnable))

    def draw(self, stream: str, bound: int) -> int:
        return self._ask(bound)

    def _ask(self, bound: int) -> int:
        try:
            return self._data.draw(st.integers(0, bound - 1))
        except StopTest as stop:
            raise _ExampleEnded(stop) from None


class _ExampleEnded(DivergenceError):
    """Hypothesis ended the example mid-run: a shrink candidate ran out of choices, or a run grew too long.

    That is a recording that does not fit the run, so it travels as a DivergenceError, for which the World
    closes the run's unfinished tasks; the search then hands Hypothesis its own exception back.
    """

    def __init__(self, stop: StopTest) -> None:
        super().__init__("the Hypothesis example ended before the run did")
        self.stop = stop


class _Failed(Exception):
    """Carries a failing outcome out of the Hypothesis test function; its final replay is the shrunk one."""

    def __init__(self, outcome: Any) -> None:
        super().__init__("the run failed")
        self.outcome = outcome


def shrink_failure(
    run: Callable[[Strategy], Outcome],
    failed: Callable[[Outcome], bool],
    *,
    max_examples: int = 200,
    seed: int = 0,
) -> Outcome | None:
    """Search for a failing run with Hypothesis choosing every decision; return it shrunk, or None.

    `run` performs one run under the strategy it is given. Hypothesis tries up to `max_examples` runs,
    shrinks the first failure and replays the minimal one last, which is the outcome returned. The search
    is a function of `seed`, with no example database, so it repeats exactly.
    """

    @settings(
        database=None,
        max_examples=max_examples,
        deadline=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),  # a run's size and speed are the system's, not a test smell
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
    )
    @hypothesis.seed(seed)
    @given(st.data())
    def search(data: Any) -> None:
        try:
            outcome = run(HypothesisChoice(data))
        except _ExampleEnded as ended:
            raise ended.stop from None
        if failed(outcome):
            raise _Failed(outcome)

    try:
        search()
    except _Failed as failure:
        return failure.outcome
    return None


def explore_with_hypothesis(scenario: Scenario, max_examples: int = 200, seed: int = 0) -> RunReport | None:
    """Explore `scenario` with Hypothesis making every decision; the shrunk failing run, or None if all held.

    The returned report carries the violation and the shrunk decision list (`report.result.decisions`),
    which `run_once(scenario, report.seed, decisions)` and `python -m sim replay` reproduce.
    """
    with frozen_time():
        return shrink_failure(
            lambda strategy: run_once(scenario, seed, strategy=strategy),
            lambda report: report.failed,
            max_examples=max_examples,
            seed=seed,
        )
