"""Running a scenario: one seeded run, a scenario's whole exploration with its verdict, and the search of one
shard of its seeds under a run or time budget (`python -m sim explore`).

A run builds the reference system in a fresh World, checks the invariants as events happen and at the end,
and reports what fired and what was reached. A scenario passes only if its expectation holds over every run
AND it was not vacuous: each of its faults fired in at least one run and each coverage mark it names was
reached. A catalogue scenario that passes because its fault never fired protects nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from sim.core import stopping
from sim.core.search import Shard, exhaustion, search
from sim.core.timefreeze import frozen_time
from sim.core.world import RunOutcome, RunResult, World
from sim.invariants import Violation
from sim.kernel.decisions import Recorded
from sim.scenario import targeting, targets
from sim.scenario.model import Scenario
from sim.strategies.by_name import strategy_for
from sim.strategies.replay import ReplayStrategy
from sim.strategies.strategy import Strategy

FORCED_FAIL = "forced_fail"
RUN_COMPLETES = "run_completes"


@dataclass
class RunReport:
    scenario: Scenario
    seed: int
    result: RunResult
    violations: list[Violation]
    fired: list[int]
    coverage: set[str]

    @property
    def failed(self) -> bool:
        return bool(self.violations)


@dataclass
class Verdict:
    scenario: Scenario
    runs: int = 0
    steps: int = 0
    virtual_s: float = 0.0
    cpu_s: float = 0.0  # this process's CPU time for the exploration
    failing: RunReport | None = None
    violating_runs: int = 0
    fired: list[int] = field(default_factory=list)
    coverage: set[str] = field(default_factory=set)
    interrupted: bool = False  # a stop request ended the runs early: what they did not reach is not judged

    @property
    def invariants_checked(self) -> int:
        return len(targeting.invariants_for(self.scenario))

    def problems(self) -> list[str]:
        """Why the scenario's expectation does not hold; empty when it passed."""
        expect = self.scenario.expect
        cut_short = f"{stopping.interrupted_after(self.runs)}: not judged"
        if expect.outcome == "violation":
            if self.violating_runs:
                return []
            return [cut_short] if self.interrupted else [f"expected a violation, but all {self.runs} runs held"]
        problems = []
        if self.failing is not None:
            problems.append(f"{self.failing.violations[0].invariant} violated (seed {self.failing.seed})")
        if self.interrupted:
            return problems + [cut_short]
        for index, (spec, count) in enumerate(zip(self.scenario.faults, self.fired)):
            if count == 0:
                problems.append(f"fault[{index}] ({spec.kind}) never fired in {self.runs} runs")
        problems += [f"coverage mark {mark} never reached" for mark in expect.coverage if mark not in self.coverage]
        return problems

    @property
    def passed(self) -> bool:
        return not self.problems()


def run_once(scenario: Scenario, seed: int, decisions: Sequence[Recorded] | None = None, *,
             strategy: Strategy | None = None, force_fail: bool = False) -> RunReport:
    """One run of `scenario`: from its seed, replaying a recorded decision list, or under a given strategy.

    `force_fail` makes the run fail whatever happens: the mutation sanity pass proves with it that a failure
    travels from a subprocess to the verdict.
    """
    if strategy is None:
        strategy = ReplayStrategy(decisions) if decisions is not None else strategy_for(scenario.explore.strategy)
    world = World(seed, strategy, max_steps=scenario.explore.max_steps, max_time_s=scenario.explore.max_time_s)
    with frozen_time(), targets.batch(scenario):
        system = targeting.make_system(world, scenario, targeting.invariants_for(scenario))
        system.install()
        result = world.run(system.main)
    if force_fail:
        system.violations.append(Violation(FORCED_FAIL, "every run fails when forced to (the mutation sanity pass)", (), 0.0))
    if result.outcome is RunOutcome.OK:
        system.finish()
    else:
        system.violations.insert(0, Violation(RUN_COMPLETES, f"the run ended with {result.outcome}: {_first_line(result.error)}", (), result.virtual_s))
    system.close()
    return RunReport(scenario, seed, result, system.violations, system.plan.fired(), system.coverage)


def _first_line(error: BaseException | None) -> str:
    return str(error).splitlines()[0] if error is not None and str(error) else repr(error)


def check(scenario: Scenario, runs: int | None = None, seed: int | None = None, *, stop_at_first: bool = True,
          force_fail: bool = False, on_run: Callable[[RunReport], None] | None = None) -> Verdict:
    """Explore `scenario` over consecutive seeds and judge it."""
    runs = scenario.explore.runs if runs is None else runs
    first = scenario.explore.seed if seed is None else seed
    return explore_seeds(scenario, range(first, first + runs), strategy_for(scenario.explore.strategy),
                         stop_at_first=stop_at_first, force_fail=force_fail, on_run=on_run)


def explore_seeds(scenario: Scenario, seeds: Iterable[int], strategy: Strategy, *, runs: int | None = None,
                  time_budget_s: float | None = None, stop_at_first: bool = True, force_fail: bool = False,
                  on_run: Callable[[RunReport], None] | None = None) -> Verdict:
    """One run per seed, within `runs` runs or `time_budget_s` CPU seconds, all under one strategy object, and the
    verdict over them.

    One object for every run, so a strategy that learns across runs keeps what it learnt: PCT's horizon,
    the portfolio's rotation, the exhaustive search's tree. A search that has covered its whole space
    (`exhausted`) ends the exploration early, and a stop request (`sim.core.stopping`) before the next run.
    `on_run` hears of each finished run (progress lines).
    """
    verdict = Verdict(scenario, fired=[0] * len(scenario.faults))

    def tally(report: RunReport) -> None:
        _tally(verdict, report)
        if on_run is not None:
            on_run(report)

    searched = search(seeds, lambda seed: run_once(scenario, seed, strategy=strategy, force_fail=force_fail),
                      runs=runs, time_budget_s=time_budget_s, strategy=strategy, batch=targets.batch(scenario),
                      until=lambda report: report.failed and stop_at_first, on_run=tally)
    verdict.interrupted = searched.interrupted
    verdict.cpu_s = searched.cpu_s
    return verdict


def _tally(verdict: Verdict, report: RunReport) -> None:
    verdict.runs += 1
    verdict.steps += report.result.steps
    verdict.virtual_s += report.result.virtual_s
    verdict.fired = [total + count for total, count in zip(verdict.fired, report.fired)]
    verdict.coverage |= report.coverage
    if report.failed:
        verdict.violating_runs += 1
        verdict.failing = verdict.failing or report


@dataclass
class ScenarioSearch:
    """What one search did: the verdict over its runs, the strategy object that ran them, and where."""

    verdict: Verdict
    strategy: Strategy
    shard: Shard
    first_seed: int

    @property
    def exhausted(self) -> bool | None:
        return exhaustion(self.strategy)


def search_scenario(
    scenario: Scenario,
    strategy: str,
    *,
    first_seed: int,
    shard: Shard = Shard(),
    runs: int | None = None,
    time_budget_s: float | None = None,
    on_run: Callable[[RunReport], None] | None = None,
) -> ScenarioSearch:
    """Run this shard's seeds until the first violation, `runs` runs or `time_budget_s` CPU seconds.

    The seeds come from a shard of the seed space (`sim.core.search`), so machines need no coordination.
    `on_run` hears of each finished run (progress lines).
    """
    searcher = strategy_for(strategy)
    verdict = explore_seeds(scenario, shard.seeds(first_seed), searcher, runs=runs, time_budget_s=time_budget_s, on_run=on_run)
    return ScenarioSearch(verdict, searcher, shard, first_seed)
