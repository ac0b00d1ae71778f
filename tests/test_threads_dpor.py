"""DPOR on thread programs: what each line touches, and a search that reorders only conflicting steps."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

import sim
from sim import World, replay
from sim.core.timefreeze import frozen_time
from sim.strategies.dpor import ACQUIRE, ADD, ORDER, READ, WILDCARD, WRITE, SourceDPOR, _conflict
from sim.strategies.portfolio import Portfolio
from sim.strategies.random_walk import RandomWalk
from sim.threads.program import run_threads

# ---- programs -------------------------------------------------------------------------------------


def run_all(work: Any, arguments: Any) -> None:
    """A thread per argument, each running `work` on it; all started, then all joined."""
    workers = [threading.Thread(target=work, args=(argument,)) for argument in arguments]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def lost_update() -> int:
    state = {"balance": 100}

    def deposit(amount: int) -> None:
        balance = state["balance"]
        state["balance"] = balance + amount

    run_all(deposit, (10, 20))
    assert state["balance"] == 130, state
    return state["balance"]


def locked_update() -> int:
    state, lock = {"balance": 100}, threading.Lock()

    def deposit(amount: int) -> None:
        with lock:
            balance = state["balance"]
            state["balance"] = balance + amount

    run_all(deposit, (10, 20))
    return state["balance"]


def apart() -> list[int]:
    """Three threads, each with state of its own: nothing to reorder."""
    mine = [[0], [0], [0]]

    def count(cell: list[int]) -> None:
        for _ in range(3):
            cell[0] = cell[0] + 1

    run_all(count, mine)
    return [cell[0] for cell in mine]


def last_writer() -> str:
    """Two threads write one item: the two orders are the only two outcomes."""
    state = {"by": ""}

    def write(name: str) -> None:
        state["by"] = name

    run_all(write, "ab")
    return state["by"]


def contended() -> None:
    """Three threads write one item three times each: far more orders than a few runs can cover."""
    state = {"by": ""}

    def write(name: str) -> None:
        for _ in range(3):
            state["by"] = name

    run_all(write, "abc")


def write_then_lock() -> str:
    """Two threads write one item, then each takes a lock: a data race, then a race of acquires."""
    state, lock = {"by": ""}, threading.Lock()

    def write(name: str) -> None:
        state["by"] = name
        with lock:
            pass

    run_all(write, "ab")
    return state["by"]


def search(program: Any, runs: int = 50, first_seed: int = 0) -> tuple[SourceDPOR, list[Any]]:
    """Every run DPOR makes of `program`, until it is exhausted or `runs` ran."""
    strategy, results = SourceDPOR(), []
    with frozen_time():
        for seed in range(first_seed, first_seed + runs):
            if strategy.exhausted:
                break
            results.append(run_threads(World(seed, strategy), program))
    return strategy, results


# ---- the search -----------------------------------------------------------------------------------


def test_dpor_finds_a_lost_update_on_the_reversal_of_its_one_race():
    found = sim.explore(lost_update, strategy=SourceDPOR(), runs=10, shrink=False)
    assert found.failed and found.runs == 2


def test_dpor_first_runs_the_thread_started_last_so_a_reader_started_after_its_writer_reads_first():
    def publish_then_read() -> None:
        state: dict[str, str] = {}

        def publisher() -> None:
            state["config"] = "ready"

        def reader() -> None:
            state["seen"] = state.get("config", "missing")

        run_all(lambda work: work(), (publisher, reader))
        assert state["seen"] == "ready", state

    found = sim.explore(publish_then_read, strategy=SourceDPOR(), runs=10, shrink=False)
    assert found.failed and found.runs == 1


def test_dpor_runs_a_lock_protected_update_once_per_order_of_the_acquires_then_stops():
    strategy, results = search(locked_update)
    assert strategy.exhausted and len(results) == 2
    assert {result.value for result in results} == {130}


def test_dpor_runs_threads_that_share_nothing_once():
    strategy, results = search(apart)
    assert strategy.exhausted and len(results) == 1


def test_dpor_runs_each_outcome_of_a_write_write_race_exactly_once():
    strategy, results = search(last_writer)
    assert strategy.exhausted
    assert sorted(result.value for result in results) == ["a", "b"]


def test_dpor_reverses_a_data_race_before_a_race_of_lock_acquires():
    for first_seed in range(0, 800_000, 100_000):
        _, results = search(write_then_lock, runs=2, first_seed=first_seed)
        # the first run runs b, started last, first, so a writes last; then the writes reversed, not the acquires
        assert [result.value for result in results] == ["a", "b"], first_seed


def test_every_dpor_run_of_a_thread_program_replays_byte_for_byte_from_its_decisions():
    strategy, results = search(locked_update)
    with frozen_time():
        for seed, result in enumerate(results):
            again = replay(result.decisions, locked_update, seed=seed)
            assert again.trace_jsonl() == result.trace_jsonl()
    assert strategy.executions == len(results)


def test_a_dpor_failure_shrinks_and_its_repro_replays(tmp_path):
    found = sim.explore(lost_update, strategy=SourceDPOR(), runs=10, repro_dir=tmp_path)
    assert found.failure is not None and found.failure.repro is not None
    assert replay(found.failure.repro, lost_update).trace_jsonl() == found.failure.run.trace_jsonl()


def test_a_sleeping_step_wakes_for_a_conflict_and_new_objects_are_taken_to_be_one():
    read_old, write_old = {(1, "a"): False}, {(1, "a"): True}
    assert not _conflict(read_old, {(1, "a"): False}, seen=5)  # two reads
    assert _conflict(read_old, write_old, seen=5)
    assert not _conflict(read_old, {(1, "b"): True}, seen=5)  # another item
    assert _conflict(read_old, {(1, None): True}, seen=5)  # the whole object
    assert not _conflict({(6, "a"): False}, {(2, "a"): True}, seen=5)  # new here, seen before: two objects
    assert _conflict({(6, "a"): False}, {(7, "a"): True}, seen=5)  # both new: maybe one object
    assert _conflict({WILDCARD: True}, {(3, "z"): False}, seen=5)


COUNTED = 0


class Counter:
    def __init__(self) -> None:
        self.count = 0


def counted() -> None:
    """Three threads bump shared int counters, in every way a line can: no order of theirs can change a thing."""
    counts, counter = {"lines": 0}, Counter()

    def bump(_: int) -> None:
        global COUNTED
        counts["lines"] += 1
        counts["log"] = counts.get("log", 0) + 1
        counts["lines"] = counts["lines"] - 1
        counter.count += 1
        COUNTED += 1

    run_all(bump, range(3))


def counted_then_read() -> list[int]:
    """One thread bumps a counter, another reads it: the read orders them, so both orders run."""
    counts, seen = {"n": 0}, []

    def bump() -> None:
        counts["n"] += 1

    def read() -> None:
        seen.append(counts["n"])

    run_all(lambda step: step(), (bump, read))
    return seen


def test_increments_of_an_int_counter_commute_so_threads_that_only_count_run_once():
    strategy, results = search(counted)
    assert strategy.exhausted and len(results) == 1


def test_a_read_of_a_counter_still_orders_it_against_its_increments():
    strategy, results = search(counted_then_read)
    assert strategy.exhausted and sorted(result.value for result in results) == [[0], [1]]


class Tally(dict):  # type: ignore[type-arg]  # a subclass may do more than add on `+=`
    pass


def not_increments(counts: dict[str, Any], tally: Tally, floats: dict[str, float]) -> None:
    tally["n"] += 1  # a dict subclass: its __setitem__ may be anything
    floats["x"] += 1  # floats: the order of additions changes the sum
    counts["copy"] = counts["n"] + 1  # the sum goes to another item


def test_only_an_int_of_a_plain_dict_instance_or_module_added_to_in_place_is_an_increment():
    counts, tally, floats = {"n": 1}, Tally(n=1), {"x": 0.5}
    touched = touched_by(not_increments, counts, tally, floats)
    assert not any(kind == ADD for _, _, kind in touched)
    assert any(target is tally and kind == WRITE for target, _, kind in touched)
    assert any(target is floats and part == "x" and kind == WRITE for target, part, kind in touched)
    assert any(target is counts and part == "copy" and kind == WRITE for target, part, kind in touched)


def test_two_increments_commute_but_an_increment_and_a_read_or_write_conflict():
    assert not _conflict({(1, "n"): ADD}, {(1, "n"): ADD}, seen=5)
    assert _conflict({(1, "n"): ADD}, {(1, "n"): READ}, seen=5)
    assert _conflict({(1, "n"): WRITE}, {(1, "n"): ADD}, seen=5)
    assert _conflict({(1, None): READ}, {(1, "n"): ADD}, seen=5)  # the whole object


# ---- the portfolio --------------------------------------------------------------------------------


def test_a_thread_program_s_portfolio_gives_dpor_six_runs_in_nine_the_first_three_among_them():
    portfolio = Portfolio()
    with frozen_time():
        names = [run_threads(World(seed, portfolio), contended).strategy for seed in range(9)]
    assert [name.removeprefix("portfolio/") for name in names] == [
        "dpor", "dpor", "dpor", "pct-d1", "dpor", "dpor", "random", "dpor", "task-pct-d10"]


def test_a_portfolio_drops_dpor_once_its_search_is_exhausted():
    portfolio = Portfolio()
    with frozen_time():
        names = [run_threads(World(seed, portfolio), locked_update).strategy for seed in range(5)]
    assert [name.removeprefix("portfolio/") for name in names] == ["dpor", "dpor", "pct-d1", "random", "task-pct-d10"]


# ---- what a line touches --------------------------------------------------------------------------


class Recorder(RandomWalk):
    """A random walk that asks the runtime what each step touches, and keeps it."""

    def __init__(self) -> None:
        super().__init__()
        self.touched: list[tuple[Any, Any, bool]] = []

    def observe_threads(self) -> Recorder:
        return self

    def access(self, tid: int, target: Any, part: Any, write: bool) -> None:
        self.touched.append((target, part, write))

    def record(self, tid: int, key: tuple[int, Any], write: bool) -> None:
        self.touched.append((key, None, write))

    def boundary(self) -> None:
        pass


def touched_by(program: Any, *args: Any) -> list[tuple[Any, Any, bool]]:
    """What `program(*args)` touches, run in a second thread: the only thread's own steps are not reported."""
    recorder = Recorder()

    def beside_the_main_thread() -> None:
        worker = threading.Thread(target=program, args=args)
        worker.start()
        worker.join()

    with frozen_time():
        result = run_threads(World(0, recorder), beside_the_main_thread)
    assert result.error is None, result.error
    return recorder.touched


def builds_then_shares(state: dict[str, Any]) -> None:
    state["made"] = 1  # the only thread: nothing here can race with what the worker does after its start
    worker = threading.Thread(target=lambda: state.update(seen=state["made"]))
    worker.start()
    state["after"] = True
    worker.join()


def test_what_the_only_thread_touches_before_a_second_starts_is_not_reported():
    recorder, state = Recorder(), {}
    with frozen_time():
        run_threads(World(0, recorder), builds_then_shares, state)
    touched = [(part, write) for target, part, write in recorder.touched if target is state]
    assert ("made", READ) in touched and ("after", WRITE) in touched  # the worker's read; main's write after the start
    assert ("made", WRITE) not in touched  # main's write before it


class Account:
    def __init__(self) -> None:
        self.balance = 0


def items_attributes_and_methods(state: dict[str, Any], account: Account, log: list[str]) -> None:
    state["total"] = state["base"] + 1
    account.balance += 5
    log.append("done")
    if "seen" not in state:
        state.setdefault("seen", True)


@pytest.mark.parametrize("expected", [
    ("state", "base", READ), ("state", "total", WRITE), ("account", ("attr", "balance"), ADD), ("log", None, WRITE),
    ("state", "seen", READ), ("state", "seen", WRITE),
])
def test_each_item_attribute_and_container_method_a_line_uses_is_an_access(expected):
    state, account, log = {"base": 1}, Account(), []
    touched = touched_by(items_attributes_and_methods, state, account, log)
    objects = {"state": state, "account": account, "log": log}
    name, part, write = expected
    assert any(target is objects[name] and found == part and wrote == write for target, found, wrote in touched)


def a_value_the_tracer_cannot_know(state: dict[str, Any]) -> None:
    copy.copy(state)["x"] = 1  # a call into the standard library: its value is unknown to the tracer


def test_a_write_on_a_value_the_tracer_cannot_know_conflicts_with_everything():
    assert any(target == WILDCARD for target, _, _ in touched_by(a_value_the_tracer_cannot_know, {}))


def test_locks_and_joins_order_steps_and_only_acquires_race():
    touched = touched_by(locked_update)
    parts = {(type(target).__name__, part, write) for target, part, write in touched if type(target).__name__ in ("Lock", "Thread")}
    assert {("Lock", ACQUIRE, True), ("Lock", ORDER, True), ("Thread", ORDER, True), ("Thread", ORDER, False)} <= parts


def take(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return nodes.pop()


def after_a_call_and_a_branch(state: dict[str, Any], nodes: list[dict[str, Any]], account: Account) -> None:
    state["taken"].append(take(nodes)["name"])  # the item of what `take` returned, then the list's append
    state["seen"] = account and state["flag"]  # an instance's truth is not tested by the tracer: a branch


def test_a_line_goes_on_after_a_call_returns_and_after_a_branch_the_tracer_could_not_decide():
    node, taken, state = {"name": "A"}, [], {"flag": True}
    state["taken"] = taken
    touched = touched_by(after_a_call_and_a_branch, state, [node], Account())
    assert any(target is node and part == "name" and not write for target, part, write in touched)
    assert any(target is taken and part is None and write for target, part, write in touched)
    assert any(target is state and part == "flag" and not write for target, part, write in touched)
