"""The thread runtime on programs written for real threads: each gives what real threading gives (values,
exceptions, timeouts), under every seed, and what it cannot model is named, never hung or run for real."""

from __future__ import annotations

import asyncio
import datetime
import itertools
import multiprocessing
import os
import queue
import random
import re
import select
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import threaded_programs as programs

import sim
from sim.core.world import RunOutcome, World
from sim.kernel.errors import BudgetExceeded
from sim.strategies.random_walk import RandomWalk
from sim.threads.baton import RUNNING
from sim.threads.patching import threads_patched
from sim.threads.program import run_threads

SEEDS = range(6)
EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def run(program: Any, *args: Any, seed: int = 0) -> Any:
    return run_threads(World(seed, RandomWalk(), max_steps=100_000), program, *args)


def as_a_fresh_process(program: Any, *args: Any) -> Any:
    """`program` run with real threads, its default thread names counted from where a fresh process counts them
    (as each simulated run counts them): the names must not depend on the threads this process made before."""
    counters = threading._counter, ThreadPoolExecutor._counter  # type: ignore[attr-defined]  # the name counters
    threading._counter, ThreadPoolExecutor._counter = itertools.count(1).__next__, itertools.count().__next__  # type: ignore[attr-defined]  # counted afresh
    try:
        return program(*args)
    finally:
        threading._counter, ThreadPoolExecutor._counter = counters  # type: ignore[attr-defined]  # put back


def value_of(program: Any, *args: Any, seed: int = 0) -> Any:
    result = run(program, *args, seed=seed)
    assert result.outcome is RunOutcome.OK, result.error
    return result.value


# ---- the same as real threads ---------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # quiet_exit, run for real
@pytest.mark.parametrize("program", programs.PROGRAMS, ids=lambda program: program.__name__)
def test_a_program_gives_under_every_seed_what_it_gives_with_real_threads(program):
    expected = as_a_fresh_process(program)
    assert [value_of(program, seed=seed) for seed in SEEDS] == [expected] * len(SEEDS)


@pytest.mark.parametrize("program", programs.SQLITE_PROGRAMS, ids=lambda program: program.__name__)
def test_a_sqlite_program_gives_under_every_seed_what_it_gives_with_real_threads(program, tmp_path: Path):
    expected = as_a_fresh_process(program, str(tmp_path / "real.db"))
    assert [value_of(program, str(tmp_path / f"{seed}.db"), seed=seed) for seed in SEEDS] == [expected] * len(SEEDS)


def test_the_battery_pins_what_real_threading_does():
    """The oracle above is CPython itself; these few values say what it is, so that a wrong program shows."""
    assert programs.join_with_timeout() == [True, False, ("RuntimeError", "cannot join current thread")]
    assert programs.semaphore_operations()[:4] == [True, True, False, False]
    assert programs.barrier_operations()[:4] == [[0, 1, 2], ["tripped"], 0, False]
    assert programs.executor_waits()[:3] == [True, True, ("TimeoutError", "")]


def waits_on_a_slow_future() -> list[Any]:
    with ThreadPoolExecutor(max_workers=1) as pool:
        slow = pool.submit(time.sleep, 600)
        started = time.monotonic()
        try:
            slow.result(timeout=30)
        except TimeoutError:
            timed_out = time.monotonic() - started
        return [timed_out, slow.result(), time.monotonic() - started]


def test_a_future_times_out_and_a_pool_waits_in_virtual_time():
    result = run(waits_on_a_slow_future)
    assert result.value == [30.0, None, 600.0] and result.virtual_s == 600.0


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


# ---- deadlock and hang reports: every blocked thread, what it waits on, who holds it, the cycle ------------------


def three_locks_in_a_ring() -> None:
    ledger, accounts, audit = threading.Lock(), threading.RLock(), threading.Lock()

    def take(first: Any, second: Any) -> None:
        with first:
            time.sleep(1)  # each holds its first lock before any asks for its second
            with second:
                pass

    pairs = {"posting": (ledger, accounts), "reconciling": (accounts, audit), "auditing": (audit, ledger)}
    workers = [threading.Thread(target=take, args=pair, name=name) for name, pair in pairs.items()]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def test_a_three_thread_lock_cycle_names_each_thread_its_lock_and_the_holder():
    deadlock = sim.explore(three_locks_in_a_ring, runs=1).failure.deadlock
    report = str(deadlock)
    assert {entry.task for entry in deadlock.cycle} == {"posting", "reconciling", "auditing"}
    for waiter, holder in (("posting", "reconciling"), ("reconciling", "auditing"), ("auditing", "posting")):
        assert re.search(rf"task '{waiter}' waits on a R?Lock made at test_threads_breadth.py:\d+ \(held by '{holder}'\)"
                         rf" at test_threads_breadth.py:\d+ in take", report), report
    assert "wait-for cycle: '" in report and "waits on thread 'posting' to end (join)" in report


def waits_in_the_library() -> None:
    jobs: queue.Queue[int] = queue.Queue()
    permits = threading.Semaphore(0)
    threading.Thread(target=jobs.get, name="taker").start()
    threading.Thread(target=permits.acquire, name="acquirer").start()


def test_a_thread_parked_in_a_library_call_is_named_with_the_object_and_the_call():
    """Threads whose target is the library's own method: no line of the program on their stack."""
    report = str(sim.explore(waits_in_the_library, runs=1).failure.deadlock)
    assert re.search(r"task 'taker' waits on a Queue made at test_threads_breadth.py:\d+ at queue.py:\d+ in get", report)
    assert re.search(r"task 'acquirer' waits on a Semaphore made at test_threads_breadth.py:\d+ at threading.py:\d+ in acquire",
                     report), report
    assert not RUNNING  # their OS threads were unwound, not left parked for the life of the process


def serves_until_stopped() -> None:
    stop = [False]

    def wait_for_stop() -> None:
        while not stop[0]:
            pass

    def serve() -> None:
        wait_for_stop()

    server = threading.Thread(target=serve, name="server")
    server.start()
    server.join()


def test_a_spinning_thread_is_shown_with_its_stack():
    error = sim.explore(serves_until_stopped, runs=1, max_steps=2_000).failure.error
    assert isinstance(error, BudgetExceeded)
    assert re.search(r"task 'server' runnable at test_threads_breadth.py:\d+ in wait_for_stop\n"
                     r"    called from test_threads_breadth.py:\d+ in serve$", str(error)), error
