"""The thread runtime on programs written for real threads: each gives what real threading gives (values,
exceptions, timeouts), under every seed, and what it cannot model is named, never hung or run for real."""

from __future__ import annotations

import asyncio
import datetime
import multiprocessing
import os
import random
import select
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import threaded_programs as programs

import sim
from sim.core.world import RunOutcome, World
from sim.strategies.random_walk import RandomWalk
from sim.threads.patching import threads_patched
from sim.threads.program import run_threads

SEEDS = range(6)
EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def run(program: Any, *args: Any, seed: int = 0) -> Any:
    return run_threads(World(seed, RandomWalk(), max_steps=100_000), program, *args)


def value_of(program: Any, *args: Any, seed: int = 0) -> Any:
    result = run(program, *args, seed=seed)
    assert result.outcome is RunOutcome.OK, result.error
    return result.value


# ---- the same as real threads ---------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # quiet_exit, run for real
@pytest.mark.parametrize("program", programs.PROGRAMS, ids=lambda program: program.__name__)
def test_a_program_gives_under_every_seed_what_it_gives_with_real_threads(program):
    expected = program()
    assert [value_of(program, seed=seed) for seed in SEEDS] == [expected] * len(SEEDS)


@pytest.mark.parametrize("program", programs.SQLITE_PROGRAMS, ids=lambda program: program.__name__)
def test_a_sqlite_program_gives_under_every_seed_what_it_gives_with_real_threads(program, tmp_path: Path):
    expected = program(str(tmp_path / "real.db"))
    assert [value_of(program, str(tmp_path / f"{seed}.db"), seed=seed) for seed in SEEDS] == [expected] * len(SEEDS)


def test_the_battery_pins_what_real_threading_does():
    """The oracle above is CPython itself; these few values say what it is, so that a wrong program shows."""
    assert programs.join_with_timeout() == [True, False, ("RuntimeError", "cannot join current thread")]
    assert programs.semaphore_operations()[:4] == [True, True, False, False]
    assert programs.barrier_operations()[:4] == [[0, 1, 2], ["tripped"], 0, False]
    assert programs.executor_waits()[:3] == [True, True, ("TimeoutError", "")]


# ---- an exception in a thread ------------------------------------------------------------------------------


def test_an_exception_in_a_thread_goes_to_the_programs_excepthook_and_still_fails_the_run():
    found = sim.explore(programs.excepthook, runs=3)
    assert isinstance(found.failure.error, KeyError) and found.failure.task == "failing"
    hooked: list[Any] = []

    def hooks() -> None:
        threading.excepthook = lambda args: hooked.append((args.exc_type, args.thread.name))
        worker = threading.Thread(target=lambda: 1 / 0, name="divider")
        worker.start()
        worker.join()

    assert isinstance(run(hooks).error, ZeroDivisionError)
    assert hooked == [(ZeroDivisionError, "divider")]


def test_a_hook_a_run_set_is_gone_in_the_next_run_and_after_the_batch():
    before = threading.excepthook
    seen: list[Any] = []

    def sets_a_hook() -> Any:
        hook = threading.excepthook
        threading.excepthook = lambda args: seen.append(args)
        return hook

    with threads_patched():
        first, second = value_of(sets_a_hook), value_of(sets_a_hook)
    assert first is second is before and threading.excepthook is before


# ---- time, dates, randomness ------------------------------------------------------------------------------


def clocks() -> list[Any]:
    readers = (time.time, time.time_ns, time.monotonic, time.monotonic_ns, time.perf_counter, time.perf_counter_ns,
               time.process_time, time.process_time_ns, time.thread_time, time.thread_time_ns)
    before = [read() for read in readers]
    time.sleep(2.5)
    return [before[:2], [read() - start for read, start in zip(readers, before, strict=True)]]


def test_every_clock_reads_virtual_time_the_cpu_clocks_included():
    start, elapsed = value_of(clocks)
    assert start == [EPOCH.timestamp(), int(EPOCH.timestamp()) * 10**9]
    assert elapsed == [2.5, 2_500_000_000] * 3 + [2.5, 2_500_000_000] * 2


def dates() -> list[Any]:
    time.sleep(86_400 + 5)
    return [datetime.datetime.now(datetime.UTC), datetime.datetime.utcnow(), datetime.date.today(),
            datetime.datetime.now() == datetime.datetime.fromtimestamp(time.time())]


def test_dates_read_virtual_time():
    later = EPOCH + datetime.timedelta(days=1, seconds=5)
    assert value_of(dates) == [later, later.replace(tzinfo=None), later.date(), True]


def draws() -> list[Any]:
    generator = random.Random()
    return [random.random(), random.randint(1, 10**6), random.choice("abcdefgh"), random.gauss(0, 1),
            generator.random(), str(uuid.uuid4()), str(uuid.uuid1())]


def test_random_and_uuids_are_the_seeds_and_the_same_in_a_batch_as_alone():
    alone = [value_of(draws, seed=seed) for seed in (1, 2)]
    assert alone[0] != alone[1]
    with threads_patched():  # in one batch: nothing one run draws or leaves (gauss's spare value, uuid1's clock) shows in the next
        batched = [value_of(draws, seed=seed) for seed in (2, 1, 2)]
    assert batched == [alone[1], alone[0], alone[1]]


def seeded() -> list[Any]:
    random.seed(42)
    first = [random.random(), random.randint(1, 1000), random.gauss(0, 1)]
    state = random.getstate()
    again = random.random()
    random.setstate(state)
    return [first, again == random.random(), random.Random(7).random()]


def test_a_program_that_seeds_random_gets_the_real_sequence_of_that_seed():
    expected = seeded()
    assert [value_of(seeded, seed=seed) for seed in (0, 1)] == [expected, expected]


# ---- what the runtime does not model: named at once, never hung or run for real ------------------------------


def forks() -> None:
    os.fork()


def waits_for_a_process(process: subprocess.Popen[bytes]) -> None:
    process.wait()


def reads_a_socket() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.recv(1)


def selects() -> None:
    reading, writing = os.pipe()
    try:
        select.select([reading], [], [], 1.0)
    finally:
        os.close(reading)
        os.close(writing)


def starts_a_process() -> None:
    multiprocessing.Process(target=print).start()


def opens_a_process_queue() -> None:
    multiprocessing.Queue().get(timeout=1)


def runs_an_event_loop() -> None:
    asyncio.new_event_loop()


def sends_a_signal() -> None:
    os.kill(os.getpid(), signal.SIGUSR1)


def sets_an_alarm() -> None:
    signal.alarm(1)


def starts(thread: threading.Thread) -> None:
    thread.start()


def joins(thread: threading.Thread) -> None:
    thread.join()


@pytest.fixture
def finished_process() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["true"])
    yield process
    process.wait()


@pytest.fixture
def real_thread() -> Iterator[threading.Thread]:
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="real-worker")
    thread.start()
    yield thread
    release.set()
    thread.join()


@pytest.mark.parametrize(("program", "named"), [
    (forks, "os.fork is not modelled"),
    (reads_a_socket, "socket.recv is not modelled"),
    (selects, "select.select is not modelled"),
    (starts_a_process, "multiprocessing's Process.start is not modelled"),
    (opens_a_process_queue, "multiprocessing.Pipe is not modelled"),
    (runs_an_event_loop, "an asyncio event loop is not modelled"),
    (sends_a_signal, "os.kill is not modelled"),
    (sets_an_alarm, "signal.alarm is not modelled"),
], ids=lambda value: getattr(value, "__name__", ""))
def test_what_the_runtime_does_not_model_is_a_usage_error_naming_it(program, named):
    with pytest.raises(sim.NotSimulated, match=named):
        sim.explore(program, runs=1)


def test_waiting_for_a_process_made_before_the_run_is_refused(finished_process):
    with pytest.raises(sim.NotSimulated, match="os.waitpid is not modelled"):
        sim.explore(waits_for_a_process, finished_process, runs=1)


def test_a_thread_made_before_the_run_and_started_in_it_is_refused_in_every_run():
    made_outside = threading.Thread(target=print)
    with pytest.raises(sim.NotSimulated, match="'made-outside' was made outside this run"):
        made_outside.name = "made-outside"
        sim.explore(starts, made_outside, runs=1)
    assert not made_outside.is_alive() and made_outside.ident is None


def test_joining_a_real_thread_from_a_run_is_refused_not_waited_for(real_thread):
    with pytest.raises(sim.NotSimulated, match="'real-worker' runs for real, outside the run"):
        sim.explore(joins, real_thread, runs=1)
