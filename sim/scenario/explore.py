"""`python -m sim explore`: search one scenario for a violation until a run or time budget runs out.

The seeds come from a shard of the seed space (`sim.search`), so machines need no coordination.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sim.scenario.model import Scenario
from sim.scenario.runner import RunReport, Verdict, explore_seeds
from sim.search import Shard, exhaustion, within_budget
from sim.strategies.base import Strategy
from sim.strategies.registry import strategy_for


@dataclass
class Exploration:
    """What one search did: the verdict over its runs, the strategy object that ran them, and where."""

    verdict: Verdict
    strategy: Strategy
    shard: Shard
    first_seed: int

    @property
    def exhausted(self) -> bool | None:
        return exhaustion(self.strategy)


def explore(
    scenario: Scenario,
    strategy: str,
    *,
    first_seed: int,
    shard: Shard = Shard(),
    runs: int | None = None,
    time_budget_s: float | None = None,
    on_run: Callable[[RunReport], None] | None = None,
) -> Exploration:
    """Run this shard's seeds until the first violation, `runs` runs or `time_budget_s` CPU seconds.

    `on_run` hears of each finished run (progress lines).
    """
    searcher = strategy_for(strategy)
    seeds = within_budget(shard.seeds(first_seed), runs, time_budget_s)
    return Exploration(explore_seeds(scenario, seeds, searcher, on_run=on_run), searcher, shard, first_seed)
