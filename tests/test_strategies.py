"""Exploration strategies: PCT's priorities, the bounded search's exhaustion,
replay of every strategy's runs, and `explore`: its seed partition, budgets and exit codes."""

from __future__ import annotations

import functools
import itertools
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import sim
from sim import World, replay
from sim.bench.classic_bugs import BUGS
from sim.cli import main as cli_main
from sim.core.search import Shard
from sim.core.timefreeze import frozen_time
from sim.kernel.decisions import non_default
from sim.scenario.loader import load_paths
from sim.scenario.names import registry
from sim.scenario.runner import run_once, search_scenario
from sim.strategies.by_name import STRATEGIES
from sim.strategies.dfs import PreemptionBoundedDFS, SearchExhausted
from sim.strategies.pct import PCT
from sim.strategies.portfolio import Portfolio
from sim.strategies.random_walk import RandomWalk
from sim.strategies.strategy import Strategy
from sim.strategies.task_pct import TaskPCT

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "message_during_rotation_lost_or_doubled.toml"
SCENARIO_MUTANT = "rotation-ceiling-before-flush"


@dataclass
class FakeTask:
    tid: int
    name: str = "t"


# ---- programs ----------------------------------------------------------------------------------


def interleaved(tasks: int, steps: int) -> Callable[[Any], Any]:
    """`tasks` tasks of `steps` checkpoints each; the order they finish in is the observable."""

    async def main(rt: Any) -> list[str]:
        finished: list[str] = []

        async def worker(name: str) -> None:
            for _ in range(steps):
                await rt.checkpoint()
            finished.append(name)

        async with rt.open_nursery() as nursery:
            for index in range(tasks):
                nursery.start_soon(worker, f"w{index}", name=f"w{index}")
        return finished

    return main


def lost_update(noise_steps: int) -> Callable[[Any], Any]:
    """Two unsynchronised increments of a shared counter beside a busy bystander; 2 is the right answer.

    The second increment starts late, so the FIFO schedule (every choice 0) is correct: the update is
    lost only if the scheduler holds the first increment back between its read and its write.
    """

    async def main(rt: Any) -> int:
        state = {"n": 0}

        async def increment(start_after: int) -> None:
            for _ in range(start_after):
                await rt.checkpoint()
            seen = state["n"]
            await rt.checkpoint()
            state["n"] = seen + 1

        async def bystander() -> None:
            for _ in range(noise_steps):
                await rt.checkpoint()

        async with rt.open_nursery() as nursery:
            nursery.start_soon(bystander, name="bystander")
            nursery.start_soon(increment, 0, name="a")
            nursery.start_soon(increment, 3, name="b")
        return state["n"]

    return main


async def with_draws(rt: Any) -> int:
    """Scheduling choices and random draws together, so a replay has to reproduce both."""
    total = 0

    async def roll(name: str) -> None:
        nonlocal total
        for _ in range(3):
            total = total * 7 + rt.rng(name).randrange(5)
            await rt.checkpoint()

    async with rt.open_nursery() as nursery:
        for name in ("x", "y", "z"):
            nursery.start_soon(roll, name, name=name)
    return total


class Counting(Strategy):
    """Another strategy's choices, counting its preemptions: switches away from a task that could go on."""

    def __init__(self, inner: Strategy) -> None:
        self.inner = inner
        self.name = inner.name
        self.preemptions = 0

    def begin(self, seed: int) -> None:
        self.preemptions = 0
        self.inner.begin(seed)

    def choose_task(self, runnable, previous):
        index = self.inner.choose_task(runnable, previous)
        self.preemptions += runnable[-1] is previous and index != len(runnable) - 1
        return index

    def draw(self, stream, bound):
        return self.inner.draw(stream, bound)

    def end(self) -> None:
        self.inner.end()


# ---- PCT ---------------------------------------------------------------------------------------


def _choices(pct: PCT, seed: int, tasks: list[FakeTask], count: int) -> list[int]:
    pct.begin(seed)
    chosen = [pct.choose_task(tasks, None) for _ in range(count)]
    pct.end()
    return chosen


def _begin_with_change_points_after_the_first_choice(pct: PCT) -> None:
    """The first seed whose change points all come after choice 1, when every task has a priority to lower."""
    for seed in itertools.count():
        pct.begin(seed)
        if min(pct.change_points) > 1:
            return


def test_pct_runs_the_highest_priority_task_and_lowers_it_at_each_change_point():
    tasks = [FakeTask(2), FakeTask(0), FakeTask(1)]
    pct = PCT(depth=3, horizon=30)
    _begin_with_change_points_after_the_first_choice(pct)
    change_points = pct.change_points
    assert len(change_points) == 2 and sorted(change_points.values()) == [1, 2]
    for step in range(1, 31):
        before = pct.priorities
        chosen = pct.choose_task(tasks, None)
        after = pct.priorities
        assert after[tasks[chosen].tid] == max(after.values()), f"step {step} did not run the highest priority"
        if step in change_points:
            top = max(before, key=before.__getitem__)
            assert after[top] == change_points[step] < min(p for tid, p in after.items() if tid != top)
            assert tasks[chosen].tid != top, "a change point must preempt the task about to run"
        elif step > 1:
            assert after == before


def test_pct_is_a_function_of_its_seed_and_gives_new_tasks_a_priority_when_first_seen():
    tasks = [FakeTask(0), FakeTask(1), FakeTask(2)]
    runs = {seed: _choices(PCT(depth=2, horizon=10), seed, tasks, 10) for seed in range(8)}
    assert runs == {seed: _choices(PCT(depth=2, horizon=10), seed, tasks, 10) for seed in range(8)}
    assert len({tuple(choices) for choices in runs.values()}) > 1
    pct = PCT(depth=2, horizon=10)
    pct.begin(0)
    pct.choose_task(tasks[:2], None)
    assert set(pct.priorities) == {0, 1}
    pct.choose_task(tasks, None)
    assert set(pct.priorities) == {0, 1, 2} and pct.priorities[2] >= 2


def test_pct_without_a_horizon_learns_it_from_the_longest_run_so_far():
    pct = PCT(depth=3)
    _choices(pct, 0, [FakeTask(0), FakeTask(1)], 37)
    _choices(pct, 1, [FakeTask(0), FakeTask(1)], 12)
    pct.begin(2)
    assert pct.horizon == 37 and all(1 <= point <= 37 for point in pct.change_points)


# ---- task-relative PCT -------------------------------------------------------------------------


def _task_steps(strategy: TaskPCT, seed: int, tasks: list[FakeTask], count: int) -> list[int]:
    """The tids chosen over `count` choices among `tasks`."""
    strategy.begin(seed)
    chosen = [tasks[strategy.choose_task(tasks, None)].tid for _ in range(count)]
    strategy.end()
    return chosen


def test_task_pct_draws_no_change_point_before_it_has_seen_a_task():
    strategy = TaskPCT(depth=10)
    strategy.begin(0)
    assert strategy.change_points == {}


def test_task_pct_change_points_fall_within_each_task_s_own_length_so_far():
    strategy = TaskPCT(depth=4)
    tasks = [FakeTask(0), FakeTask(1), FakeTask(2)]
    runs = [_task_steps(strategy, seed, tasks, 30) for seed in range(20)]
    longest = {task.tid: max(run.count(task.tid) for run in runs) for task in tasks}
    for seed in range(20, 40):
        strategy.begin(seed)
        points = strategy.change_points
        assert len(points) == 3 and sorted(points.values()) == [1, 2, 3]
        assert all(1 <= step <= longest[tid] for tid, step in points)


def test_task_pct_preempts_a_task_just_before_the_step_of_its_own_that_a_change_point_names():
    tasks = [FakeTask(0), FakeTask(1), FakeTask(2)]
    strategy = TaskPCT(depth=3)
    _task_steps(strategy, 0, tasks, 30)
    for seed in range(1, 40):
        strategy.begin(seed)
        points, steps = strategy.change_points, {task.tid: 0 for task in tasks}
        for _ in range(30):
            priorities = strategy.priorities
            chosen = tasks[strategy.choose_task(tasks, None)].tid
            top = max(priorities, key=priorities.__getitem__) if len(priorities) == len(tasks) else None
            if top is not None and (top, steps[top] + 1) in points:
                assert chosen != top, f"seed {seed}: the change point at {(top, steps[top] + 1)} did not preempt"
                assert strategy.priorities[top] == points[(top, steps[top] + 1)] < 3
            steps[chosen] += 1
        strategy.end()


def test_task_pct_is_a_function_of_its_seed_and_what_it_has_seen():
    tasks = [FakeTask(0), FakeTask(1), FakeTask(2)]

    def history() -> list[list[int]]:
        strategy = TaskPCT(depth=3)
        return [_task_steps(strategy, seed, tasks, 20) for seed in range(10)]

    assert history() == history()
    assert len({tuple(run) for run in history()}) > 1


def test_task_pct_hits_a_stale_copy_in_a_long_run_far_more_often_than_pct():
    """The bug of `bench classic` whose saver must be held for tens of other steps: task-relative change
    points land in its three steps; PCT's, spread over the run's 125 choices, seldom do."""
    def hits(strategy: Strategy) -> int:
        with frozen_time():
            return sum(World(seed, strategy).run(BUGS["stale_copy_depth3"]).outcome != sim.RunOutcome.OK
                       for seed in range(600))

    task_pct, pct = hits(TaskPCT(depth=10)), hits(PCT(depth=10))
    assert task_pct >= 3 and task_pct >= 3 * max(pct, 1), (task_pct, pct)


# ---- preemption-bounded exhaustive search ------------------------------------------------------


def _search(bound: int, program: Callable[[Any], Any] = interleaved(2, 2)) -> tuple[PreemptionBoundedDFS, list[tuple], list[int]]:  # noqa: B008  # a program, never mutated
    dfs = PreemptionBoundedDFS(bound)
    counting = Counting(dfs)
    schedules, preemptions = [], []
    with frozen_time():
        while not dfs.exhausted:
            schedules.append(tuple(World(0, counting).run(program).decisions))
            preemptions.append(counting.preemptions)
    return dfs, schedules, preemptions


@functools.cache
def _sampled(samples: int = 1500) -> frozenset[tuple[tuple, int]]:
    """Schedules a random walk reaches, with their preemptions: an independent view of the whole space."""
    counting = Counting(RandomWalk())
    found = set()
    with frozen_time():
        for seed in range(samples):
            found.add((tuple(World(seed, counting).run(interleaved(2, 2)).decisions), counting.preemptions))
    return frozenset(found)


@pytest.mark.parametrize("bound", [0, 1, 2, 99])
def test_dfs_runs_each_schedule_within_its_bound_exactly_once_then_reports_exhaustion(bound):
    dfs, schedules, preemptions = _search(bound)
    assert len(schedules) == len(set(schedules)) == dfs.executions
    assert set(zip(schedules, preemptions)) == {(s, p) for s, p in _sampled() if p <= bound}
    with pytest.raises(SearchExhausted):
        dfs.begin(0)


def test_dfs_runs_every_schedule_with_fewer_preemptions_first():
    _, _, preemptions = _search(99)
    assert preemptions == sorted(preemptions) and preemptions[-1] > 2


def test_dfs_with_no_preemptions_runs_each_task_until_it_blocks_in_every_free_order():
    dfs, schedules, preemptions = _search(0)
    assert dfs.exhausted and len(schedules) == 2 and preemptions == [0, 0]
    with frozen_time():
        finished = {tuple(replay(list(s), interleaved(2, 2)).value) for s in schedules}
    assert finished == {("w0", "w1"), ("w1", "w0")}


def test_dfs_finds_a_lost_update_with_its_one_preemption_after_every_schedule_without_one():
    _, _, clean = _search(0, lost_update(noise_steps=3))
    dfs = PreemptionBoundedDFS(2)
    counting = Counting(dfs)
    with frozen_time():
        while (result := World(0, counting).run(lost_update(noise_steps=3))).value == 2:
            assert dfs.preemptions == 0 or dfs.executions > len(clean)
    assert result.value == 1 and counting.preemptions == dfs.preemptions == 1


# ---- shrinking a program's failure ---------------------------------------------------------------


def test_a_found_lost_update_shrinks_to_fewer_deviations_that_still_lose_the_update():
    counted = lost_update(noise_steps=12)

    async def program(rt: Any) -> None:
        assert await counted(rt) == 2, "an increment was lost"

    found = sim.explore(program, runs=200, strategy="random")
    assert found.failure is not None and found.found is not None
    assert non_default(found.failure.decisions) < non_default(found.found.decisions)
    assert isinstance(found.failure.error, AssertionError)
    again = replay(found.failure.decisions, program, seed=found.failure.seed)
    assert again.digest() == found.failure.run.digest()


# ---- every strategy replays --------------------------------------------------------------------

FACTORIES: dict[str, Callable[[], Strategy]] = dict(STRATEGIES)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_every_run_of_a_strategy_replays_byte_for_byte_from_its_decisions(name):
    strategy = FACTORIES[name]()
    for seed in range(6):
        result = World(seed, strategy).run(with_draws)
        assert replay(result.decisions, with_draws, seed=seed).trace_jsonl() == result.trace_jsonl()


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_scenario_runs_of_a_strategy_replay_byte_for_byte(name):
    scenario = load_paths([SCENARIO], registry())[0]
    strategy = FACTORIES[name]()
    with frozen_time():
        for seed in range(4):
            report = run_once(scenario, seed, strategy=strategy)
            again = run_once(scenario, seed, report.result.decisions)
            assert again.result.trace_jsonl() == report.result.trace_jsonl()


# ---- the portfolio -----------------------------------------------------------------------------


def test_the_portfolio_rotates_its_members_run_by_run_whatever_the_seeds():
    portfolio = Portfolio()
    names = []
    for seed in (5, 9, 13, 17, 21):
        portfolio.begin(seed)
        names.append(portfolio.run_name)
    assert names == [
        "portfolio/random", "portfolio/pct-d1", "portfolio/task-pct-d10", "portfolio/random", "portfolio/pct-d1"]
    assert portfolio.name == "portfolio"  # what a search ran under, whichever member ran last


def test_the_portfolio_s_task_pct_member_draws_its_first_change_points_from_the_runs_before_it():
    portfolio = Portfolio()
    with frozen_time():
        walk, pct_d1 = (World(seed, portfolio).run(interleaved(3, 10)) for seed in range(2))
    task_pct = portfolio.members[2]
    assert (walk.strategy, pct_d1.strategy, task_pct.name) == ("portfolio/random", "portfolio/pct-d1", "task-pct-d10")
    task_pct.begin(2)
    assert len(task_pct.change_points) == 9
    assert portfolio.lengths.longest.keys() >= {tid for tid, _ in task_pct.change_points}


# ---- sharding and the explore command ----------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_shards_partition_the_seed_space(count):
    first, per_shard = 11, 40
    shards = [list(itertools.islice(Shard(index, count).seeds(first), per_shard)) for index in range(count)]
    every = [seed for shard in shards for seed in shard]
    assert len(every) == len(set(every)), "two shards ran the same seed"
    assert sorted(every) == list(range(first, first + count * per_shard))


@pytest.mark.parametrize("text", ["2/2", "1", "a/3", "-1/3", "0/0"])
def test_a_malformed_shard_is_refused(text):
    with pytest.raises(ValueError, match="I/N"):
        Shard.parse(text)


def test_a_time_budget_keeps_exploring_until_it_is_spent():
    scenario = load_paths([SCENARIO], registry())[0]
    found = search_scenario(scenario, "random", first_seed=0, shard=Shard(1, 3), time_budget_s=0.3)
    assert found.verdict.runs > 1 and 0.3 <= found.verdict.cpu_s < 3
    assert found.exhausted is None


# Two agents in two processes, one turn each, nothing to compact: a bounded space of under a hundred schedules.
# (A compacting scenario's space is tens of thousands of schedules at two preemptions: the attempt's heartbeat
# is one more task to interleave.)
SMALL_SPACE = """\
name = "two_agents_two_turns"
[world]
sessions = [{ id = "s1", messages = 4 }]
agents = [{ name = "a", process = "p1" }, { name = "b", process = "p2" }]
[[drive]]
at = "0s"
agent = "a"
turn = "from a"
[[drive]]
at = "0s"
agent = "b"
turn = "from b"
"""


def test_explore_exits_0_when_the_budget_runs_out_clean_and_reports_dfs_exhaustion(capsys, tmp_path):
    small = tmp_path / "two_agents_two_turns.toml"
    small.write_text(SMALL_SPACE, encoding="utf-8")
    assert cli_main(["explore", str(small), "--strategy", "dfs", "--runs", "100000", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "dfs: the whole bounded space (2 preemptions) is covered" in out and out.rstrip().endswith("no violation")


def test_explore_exits_2_on_bad_input(capsys):
    assert cli_main(["explore", str(SCENARIO), "--shard", "5/4"]) == 2
    assert cli_main(["explore", str(SCENARIO), "--shard", "0/4"]) == 2  # shards count from 1, as run_tests.sh --slice does
    assert cli_main(["explore", str(SCENARIO), "--strategy", "dfs", "--shard", "1/2"]) == 2
    assert "--shard" in capsys.readouterr().err


def test_explore_exits_1_with_a_repro_on_a_violation(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "sim", "explore", str(SCENARIO), "--mutant", SCENARIO_MUTANT, "--out", str(tmp_path), "--json"],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert document["violation"] is not None and document["strategy"] == "portfolio"
    assert str(next(tmp_path.glob("*.repro.json"))) in document["replay"]


def test_the_command_line_offers_exactly_the_runner_strategies():
    from sim.cli import STRATEGY_CHOICES
    from sim.strategies.by_name import DEFAULT_STRATEGY, STRATEGIES

    assert STRATEGY_CHOICES == list(STRATEGIES) and DEFAULT_STRATEGY in STRATEGIES
