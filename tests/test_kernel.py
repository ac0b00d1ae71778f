"""Kernel behaviour: clock, deadlock and budget reports (the memory bound too), interrupts, owned locks,
wall-clock pinning, trace formats."""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path

import pytest
from support import DemoEvent

from sim import World
from sim.core.timefreeze import EPOCH
from sim.kernel.errors import Interrupted


def test_time_advances_only_when_no_task_can_run():
    async def main(rt):
        seen = []

        async def spinner():
            for _ in range(50):
                await rt.checkpoint()
            seen.append(("spinner done", rt.now()))

        async with rt.open_nursery() as nursery:
            nursery.start_soon(spinner)
            await rt.sleep(1)
            seen.append(("slept", rt.now()))
        return seen

    result = World(1).run(main)
    assert result.value == [("spinner done", 0.0), ("slept", 1.0)]


def test_deadlock_ends_the_run_naming_every_blocked_task_its_wait_and_who_holds_it():
    async def main(rt):
        never = rt.event("never")
        lock = rt.lock("shared")

        async def holder():
            await lock.acquire()
            await never.wait()

        async def contender():
            await rt.sleep(1)
            await lock.acquire()

        async with rt.open_nursery() as nursery:
            nursery.start_soon(holder, name="holder")
            nursery.start_soon(contender, name="contender")

    result = World(2).run(main)
    assert result.outcome == "deadlock"
    report = "\n".join(result.error.report)
    assert "task 'holder' waits on event 'never' at test_kernel.py" in report
    assert "task 'contender' waits on lock 'shared' (held by 'holder') at test_kernel.py" in report
    assert "task 'main' waits on nursery children to finish (held by 'holder', 'contender')" in report
    assert "no wait-for cycle: nothing left can wake 'holder', which waits on event 'never'" in report
    assert result.error.cycle == ()
    assert result.history[-1].kind == "run.stopped"


def test_a_circular_wait_is_reported_as_its_wait_for_cycle():
    async def main(rt):
        locks = [rt.lock(f"L{i}") for i in range(3)]
        taken = rt.barrier(3, "all hold one")

        async def take(first, second):
            async with first:
                await taken.wait()
                async with second:
                    pass

        async with rt.open_nursery() as nursery:
            for i in range(3):
                nursery.start_soon(take, locks[i], locks[(i + 1) % 3], name=f"T{i}")

    result = World(0).run(main)
    assert result.outcome == "deadlock"
    cycle = result.error.cycle
    assert [(entry.task, entry.waits_on, entry.held_by) for entry in cycle] == [
        ("T0", "lock 'L1'", ("T1",)), ("T1", "lock 'L2'", ("T2",)), ("T2", "lock 'L0'", ("T0",))]
    assert ("wait-for cycle: 'T0' waits on lock 'L1' held by 'T1', which waits on lock 'L2' held by 'T2', "
            "which waits on lock 'L0' held by 'T0'") in "\n".join(result.error.report)


def test_step_budget_stops_a_livelock():
    async def main(rt):
        while True:
            await rt.checkpoint()

    result = World(3, max_steps=500).run(main)
    assert result.outcome == "budget"
    assert result.steps == 500
    assert "step budget of 500 steps exhausted" in str(result.error)


def test_virtual_time_budget_stops_a_run_that_never_ends():
    async def main(rt):
        while True:
            await rt.sleep(60)

    result = World(3, max_time_s=3600).run(main)
    assert result.outcome == "budget"
    assert result.virtual_s == 3600
    assert "virtual-time budget of 3600s exhausted" in str(result.error)


def test_event_budget_bounds_a_run_whose_events_outpace_its_steps():
    """A program whose events double at every step: its memory, not its time, runs out."""
    async def main(rt):
        written = 1
        while True:
            for _ in range(written):
                rt.emit(DemoEvent(count=written))
            written *= 2
            await rt.checkpoint()

    result = World(3, max_events=1000).run(main)
    assert result.outcome == "budget" and type(result.error).__name__ == "MemoryBudgetExceeded"
    assert "event budget of 1000 events exhausted (the run's memory bound: it keeps its whole history)" in str(result.error)
    # Step 10 passed the bound (2 ** 10 events): it finished, and the run ended before step 11.
    assert result.steps == 10 and len(result.history) == 2 ** 10 + 1  # and the run.stopped event


def test_a_scenario_whose_store_outgrows_its_bound_ends_as_a_memory_overrun(tmp_path):
    from sim.scenario.loader import load_scenario
    from sim.scenario.names import registry
    from sim.scenario.runner import run_once

    path = tmp_path / "big_store.toml"
    path.write_text('[world]\nsessions = [{ id = "s1", messages = 10000 }]\n[[drive]]\nat = "0s"\nturn = "hi"\n'
                    "[explore]\nmax_store_mb = 1\n")
    report = run_once(load_scenario(path, registry()), 0)
    assert report.result.outcome == "budget" and type(report.result.error).__name__ == "MemoryBudgetExceeded"
    assert report.violations[0].invariant == "run_completes"
    assert "store budget of 1 MB exhausted (the run's memory bound): the store holds" in report.violations[0].explanation


def test_a_run_stopped_mid_compaction_closes_without_complaint(tmp_path):
    """Its tasks' `finally` blocks await, which cannot run once the kernel stops: nothing is printed for them."""
    import gc
    import sys

    from sim.scenario.loader import load_scenario
    from sim.scenario.names import registry
    from sim.scenario.runner import run_once

    r1 = Path(__file__).resolve().parent.parent / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml"
    path = tmp_path / "stopped_mid_compaction.toml"
    path.write_text(r1.read_text().replace("runs = 20", "runs = 1\nmax_steps = 100"))
    unraisable: list = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        assert run_once(load_scenario(path, registry()), 0).result.outcome == "budget"
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert [str(error.exc_value) for error in unraisable] == []


def test_a_keyboard_interrupt_in_a_task_ends_the_run_instead_of_failing_it():
    async def main(rt):
        async with rt.open_nursery() as nursery:
            nursery.start_soon(rt.sleep, 5)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        World(0).run(main)


def test_an_interrupted_kernel_stops_at_its_next_step_outside_every_task():
    seen: list[BaseException] = []
    world = World(0)

    async def main(rt):
        try:
            world.kernel.interrupt()  # as the second Ctrl+C's handler does
            await rt.sleep(1)
        except BaseException as error:  # the task is closed, never thrown the interrupt
            seen.append(error)
            raise

    with pytest.raises(Interrupted):
        world.run(main)
    assert [type(error) for error in seen] == [GeneratorExit]


def test_lock_release_by_non_owner_raises_and_the_owner_keeps_it():
    async def main(rt):
        lock = rt.lock()
        await lock.acquire()
        outcome = []

        async def stranger():
            try:
                lock.release()
            except RuntimeError as error:
                outcome.append(str(error))

        async with rt.open_nursery() as nursery:
            nursery.start_soon(stranger)
        outcome.append(lock.locked())
        lock.release()
        return outcome

    result = World(4).run(main)
    assert result.value == ["can't release an unnamed lock: this task does not own it", True]


def test_cancelled_waiter_leaves_the_lock_queue():
    async def main(rt):
        lock = rt.lock()
        order = []
        await lock.acquire()

        async def waiter(name, patience):
            with rt.move_on_after(patience):
                async with lock:
                    order.append((name, rt.now()))

        async with rt.open_nursery() as nursery:
            nursery.start_soon(waiter, "impatient", 1)
            nursery.start_soon(waiter, "patient", 10)
            await rt.sleep(2)
            lock.release()
        return order

    for seed in range(5):
        assert World(seed).run(main).value == [("patient", 2.0)]


def test_wall_clock_reads_virtual_time_during_a_run_and_is_restored_after():
    async def main(rt):
        await rt.sleep(90)
        return time.time(), datetime.datetime.now(datetime.UTC)

    before = time.time()
    wall, now = World(5).run(main).value
    assert wall == EPOCH.timestamp() + 90
    assert now == EPOCH + datetime.timedelta(seconds=90)
    assert time.time() >= before and abs(time.time() - EPOCH.timestamp() - 90) > 1


def test_task_error_surfaces_in_the_run_result():
    async def main(rt):
        async with rt.open_nursery() as nursery:
            async def boom():
                raise KeyError("x")
            nursery.start_soon(boom)

    result = World(6).run(main)
    assert result.outcome == "error"
    assert isinstance(result.error, BaseExceptionGroup)
    assert result.error.subgroup(KeyError) is not None


def test_trace_formats():
    async def main(rt):
        rt.emit(DemoEvent(session="s1", count=2))
        await rt.sleep(1.5)
        rt.emit(DemoEvent(note="two words"))

    result = World(7).run(main)
    text = result.trace_text().splitlines()
    assert text[1] == "   0.000000s  main                demo.event                      count=2 session=s1"
    assert text[2].startswith("   1.500000s  main                demo.event")
    assert text[2].endswith('note="two words"')
    lines = result.trace_jsonl().splitlines()
    assert json.loads(lines[1]) == {"fields": {"count": 2, "session": "s1"}, "kind": "demo.event", "seq": 1, "t": 0.0, "task": "main"}
    assert json.loads(lines[-1]) == {"decisions": [list(d) for d in result.decisions]}
    assert len(result.digest()) == 64


def test_a_world_runs_once():
    async def main(rt):
        return None

    world = World(0)
    world.run(main)
    with pytest.raises(RuntimeError, match="runs once"):
        world.run(main)
