"""The one loop over runs (`sim.core.search.search`) that programs, scenarios and swarm campaigns share: its budget,
its end at a result, at a covered space or at a stop request, and the frozen clock its runs see."""

from __future__ import annotations

import itertools
import signal
from typing import Any

import pytest

import sim
from sim.core import stopping, timefreeze
from sim.core.search import search


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Stop requests as the signal handler makes them, forgotten after the test."""
    monkeypatch.setattr(stopping, "_requests", 0)
    return lambda: stopping._on_signal(signal.SIGINT, None)


class Covered:
    """A systematic strategy whose space is covered after `runs` runs."""

    systematic = True

    def __init__(self, runs: int) -> None:
        self.left = runs

    @property
    def exhausted(self) -> bool:
        return self.left == 0


def test_a_search_ends_at_the_first_result_that_meets_until():
    seen: list[int] = []
    done = search(itertools.count(5), lambda seed: seed * 10, until=lambda result: result == 70, on_run=seen.append)
    assert (done.runs, done.last, done.interrupted, seen) == (3, 70, False, [50, 60, 70])


def test_a_budget_of_runs_ends_a_search():
    done = search(itertools.count(0), lambda seed: seed, runs=4)
    assert (done.runs, done.last) == (4, 3)


def test_a_time_budget_ends_a_search():
    done = search(itertools.count(0), lambda seed: sum(range(20_000)), time_budget_s=0.05)
    assert done.runs >= 1 and done.cpu_s >= 0.05


def test_a_systematic_strategy_that_covered_its_space_ends_a_search():
    strategy = Covered(2)

    def run(seed: int) -> int:
        strategy.left -= 1
        return seed

    done = search(itertools.count(0), run, strategy=strategy)  # type: ignore[arg-type]  # only `exhausted` is read
    assert done.runs == 2


def test_the_runs_see_the_wall_clock_frozen_and_it_thaws_after():
    done = search(range(3), lambda seed: timefreeze.is_frozen(), until=lambda frozen: not frozen)
    assert done.runs == 3 and done.last is True and not timefreeze.is_frozen()


def test_a_stop_request_ends_a_search_between_two_runs(requests):
    def run(seed: int) -> int:
        if seed == 1:
            requests()  # the user's Ctrl+C, while the second run is in progress
        return seed

    with stopping.graceful():
        done = search(itertools.count(0), run, runs=10)
    assert (done.runs, done.last, done.interrupted) == (2, 1, True)


def test_where_the_next_run_stops_a_search_is_not_cut_short_quietly(requests):
    """A benchmark keeps no figure of a stretch a stop request reached: the next run raises instead of the
    search ending early and reading as complete."""
    def run(seed: int) -> int:
        if seed == 1:
            requests()
        return seed

    with stopping.graceful(at_next_run=True):
        done = search(range(4), run)
    assert (done.runs, done.interrupted) == (4, False)


async def _checkpoints(rt: Any, ran: list[int], stop_in: int, requests: Any) -> None:
    ran.append(len(ran))
    if len(ran) == stop_in:
        requests()
    await rt.checkpoint()


def test_sim_explore_stops_between_two_runs_and_says_so(requests):
    ran: list[int] = []
    with stopping.graceful():
        found = sim.explore(_checkpoints, ran, 3, requests, runs=10)
    assert found.runs == 3 == len(ran) and found.interrupted and not found.failed
    assert str(found).endswith("no failure (interrupted after 3 runs)")


def test_sim_explore_in_a_benchmark_stops_at_its_next_run(requests):
    ran: list[int] = []
    with stopping.graceful(at_next_run=True), pytest.raises(stopping.Stopped):
        sim.explore(_checkpoints, ran, 2, requests, runs=10)
    assert len(ran) == 2
