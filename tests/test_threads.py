"""The thread runtime: unmodified threaded code, one thread at a time, on the virtual clock, replayable."""

from __future__ import annotations

import contextvars
import datetime
import gc
import logging
import os
import queue
import random
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, checkout_env

import sim
from sim.core.world import RunOutcome, World
from sim.kernel.errors import BudgetExceeded, Deadlock
from sim.strategies.random_walk import RandomWalk
from sim.threads.patching import threads_patched
from sim.threads.program import run_threads


def run(program: Any, *args: Any, seed: int = 0, **options: Any) -> Any:
    return run_threads(World(seed, RandomWalk(), max_steps=options.pop("max_steps", 100_000)), program, *args, **options)


def value_of(program: Any, *args: Any, seed: int = 0) -> Any:
    result = run(program, *args, seed=seed)
    assert result.outcome is RunOutcome.OK, result.error
    return result.value


# ---- the primitives, unmodified -------------------------------------------------------------------------


def counter_under_lock() -> int:
    lock, count = threading.Lock(), [0]

    def add() -> None:
        for _ in range(5):
            with lock:
                value = count[0]
                count[0] = value + 1

    workers = [threading.Thread(target=add) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return count[0]


def test_a_lock_keeps_a_read_modify_write_whole_under_every_schedule():
    assert {value_of(counter_under_lock, seed=seed) for seed in range(30)} == {15}


def without_a_lock() -> int:
    count = [0]

    def add() -> None:
        value = count[0]
        count[0] = value + 1

    workers = [threading.Thread(target=add) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return count[0]


def test_plain_lines_are_switched_between_so_a_lost_update_shows():
    assert {value_of(without_a_lock, seed=seed) for seed in range(40)} == {1, 2}


def test_with_preemption_at_sync_points_only_plain_lines_run_whole():
    results = {run(without_a_lock, seed=seed, preemption=sim_preemption("sync")).value for seed in range(40)}
    assert results == {2}


def sim_preemption(granularity: str) -> Any:
    from sim.threads.tracing import Preemption

    return Preemption(granularity)


def reentrant_and_conditions() -> list[str]:
    rlock, ready, seen = threading.RLock(), threading.Condition(), []
    items: list[int] = []

    def consumer() -> None:
        with ready:
            while not items:
                ready.wait()
            seen.append(f"got {items.pop()}")
        with rlock:
            with rlock:
                seen.append("reentered")

    def producer() -> None:
        with ready:
            items.append(7)
            ready.notify()

    threads = [threading.Thread(target=consumer), threading.Thread(target=producer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return seen


def test_conditions_and_reentrant_locks_work_as_in_threading():
    assert {tuple(value_of(reentrant_and_conditions, seed=seed)) for seed in range(20)} == {("got 7", "reentered")}


def timeouts() -> dict[str, Any]:
    event, lock, condition, out = threading.Event(), threading.Lock(), threading.Condition(), {}
    started = time.monotonic()
    out["event"] = event.wait(5)
    lock.acquire()
    taker = threading.Thread(target=lambda: out.setdefault("lock", lock.acquire(timeout=2)))
    taker.start()
    taker.join()
    with condition:
        out["condition"] = condition.wait(timeout=3)
    try:
        queue.Queue().get(timeout=4)
    except queue.Empty:
        out["queue"] = "empty"
    out["elapsed"] = time.monotonic() - started
    return out


def test_every_timeout_passes_in_virtual_time():
    result = run(timeouts)
    assert result.value == {"event": False, "lock": False, "condition": False, "queue": "empty", "elapsed": 14.0}
    assert result.virtual_s == 14.0


def semaphores_barriers_timers() -> list[Any]:
    out: list[Any] = []
    bounded = threading.BoundedSemaphore(1)
    bounded.acquire()
    bounded.release()
    try:
        bounded.release()
    except ValueError:
        out.append("bounded")
    barrier = threading.Barrier(3)
    parties = [threading.Thread(target=lambda: out.append(("barrier", barrier.wait() >= 0))) for _ in range(2)]
    for party in parties:
        party.start()
    barrier.wait()
    for party in parties:
        party.join()
    fired = threading.Timer(30, lambda: out.append(("timer", time.time())))
    cancelled = threading.Timer(10, lambda: out.append("never"))
    fired.start()
    cancelled.start()
    cancelled.cancel()
    fired.join()
    return out


def test_semaphores_barriers_and_timers_work_on_the_virtual_clock():
    out = value_of(semaphores_barriers_timers)
    epoch = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC).timestamp()
    assert out == ["bounded", ("barrier", True), ("barrier", True), ("timer", epoch + 30)]


def pools_and_locals() -> list[Any]:
    local = threading.local()
    local.name = "main"
    names: list[Any] = []

    def work(index: int) -> str:
        local.name = threading.current_thread().name
        time.sleep(index)
        return f"{index}:{local.name}"

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="pool") as pool:
        results = list(pool.map(work, range(4)))
    simple: queue.SimpleQueue[int] = queue.SimpleQueue()
    feeder = threading.Thread(target=lambda: [simple.put(n) for n in range(3)])
    feeder.start()
    names.append([simple.get() for _ in range(3)])
    feeder.join()
    abandoned = ThreadPoolExecutor(max_workers=1)  # never shut down: the interpreter's exit stops its worker
    abandoned.submit(time.sleep, 1).result()
    return [results, local.name, *names]


def test_executors_queues_and_thread_locals_work_unmodified():
    results, name, fed = value_of(pools_and_locals)
    assert name == "main" and fed == [0, 1, 2]
    assert [item.split(":")[0] for item in results] == ["0", "1", "2", "3"]
    assert all(item.split(":")[1].startswith("pool_") for item in results)


def identities() -> tuple[Any, ...]:
    seen: list[Any] = []
    worker = threading.Thread(target=lambda: seen.append((threading.current_thread().name, threading.get_ident())))
    worker.start()
    worker.join()
    daemon = threading.Thread(target=lambda: time.sleep(10_000), daemon=True, name="forever")
    daemon.start()
    return (threading.current_thread().name, worker.name, seen[0][0], seen[0][1] == worker.ident,
            worker.ident, worker.is_alive(), daemon.is_alive(), threading.main_thread().name,
            [thread.name for thread in threading.enumerate()])


def test_names_and_idents_are_the_runs_own_and_the_same_in_every_run():
    first = value_of(identities, seed=1)
    assert first == value_of(identities, seed=2)
    assert first[:4] == ("MainThread", "Thread-1 (<lambda>)", "Thread-1 (<lambda>)", True)
    assert first[5:] == (False, True, "MainThread", ["MainThread", "forever"])


def test_a_daemon_left_running_is_abandoned_when_the_program_returns():
    result = run(identities)
    assert result.outcome is RunOutcome.OK and result.virtual_s == 0
    assert [event.fields for event in result.history if event.task == "forever"][-1] == {"error": "abandoned"}


def chance() -> tuple[float, str, bytes]:
    return random.random(), str(uuid.uuid4()), os.urandom(4)


def test_randomness_is_a_recorded_draw_of_the_run():
    first, again, other = run(chance, seed=3), run(chance, seed=3), run(chance, seed=4)
    assert first.value == again.value != other.value
    assert [getattr(d, "stream", None) for d in first.decisions] == ["random", "urandom", "urandom"]
    assert sim.replay(first.decisions, chance, seed=3).value == first.value


def test_datetime_now_reads_virtual_time():
    def later() -> datetime.datetime:
        time.sleep(3600)
        return datetime.datetime.now(datetime.UTC)

    assert value_of(later) == datetime.datetime(2026, 1, 1, 1, tzinfo=datetime.UTC)


# ---- failures: exceptions, deadlocks, hangs ---------------------------------------------------------------


def raises_in_a_worker() -> None:
    def audit() -> None:
        raise KeyError("no such account")

    worker = threading.Thread(target=audit, name="auditor")
    worker.start()
    worker.join()


def test_an_exception_in_a_thread_fails_the_run_naming_the_thread():
    found = sim.explore(raises_in_a_worker, runs=3)
    assert isinstance(found.failure.error, KeyError) and found.failure.task == "auditor"


def crossed_locks() -> None:
    take_crosswise(threading.Lock(), threading.Lock())


def take_crosswise(ledger: Any, accounts: Any) -> None:
    """Two threads take the same two locks in opposite orders."""

    def take(first: Any, second: Any) -> None:
        with first:
            with second:
                pass

    workers = [threading.Thread(target=take, args=pair, name=name)
               for name, pair in (("left", (ledger, accounts)), ("right", (accounts, ledger)))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def test_a_deadlock_names_each_thread_what_it_waits_on_and_the_cycle():
    deadlock = sim.explore(crossed_locks, runs=200).failure.deadlock
    assert isinstance(deadlock, Deadlock)
    assert {entry.task for entry in deadlock.cycle} == {"left", "right"}
    report = str(deadlock)
    assert "a Lock made at test_threads.py" in report and "wait-for cycle" in report
    assert "waits on thread 'left' to end (join)" in report


def waits_for_nobody() -> None:
    flag = threading.Event()
    flag.wait()


def test_a_lost_wakeup_is_a_deadlock_without_a_cycle():
    deadlock = sim.explore(waits_for_nobody, runs=1).failure.deadlock
    assert not deadlock.cycle and "nothing left can wake 'MainThread', which waits on an Event made at test_threads.py" in str(deadlock)


class Marker:
    """An object of a run's own, whose weak reference says whether anything still keeps the run alive."""


MARKERS: list[weakref.ref[Marker]] = []


def consumer_left_waiting() -> None:
    marker, ready = Marker(), threading.Condition()
    MARKERS.append(weakref.ref(marker))

    def consume() -> None:
        with ready:
            ready.wait()  # nobody notifies: the run deadlocks, and the kernel closes this thread inside a `with`

    consumer = threading.Thread(target=consume, name="consumer")
    consumer.start()
    consumer.join()


def test_a_deadlocked_run_leaves_nothing_alive_behind_it():
    """A deadlock's threads are closed by the kernel, not ended: threading's registry of live threads kept them,
    and a carrier kept the exception their unwinding left marked as handled (CPython leaves one behind when a trace
    function raises in a `with` block's exit), whose context chain held every earlier run and its search."""
    MARKERS.clear()
    for root in range(3):
        assert sim.explore(consumer_left_waiting, runs=2, seed=root, shrink=False).failure.deadlock is not None
    gc.collect()
    assert len(MARKERS) == 3 and all(marker() is None for marker in MARKERS)
    assert not [thread for thread in threading._active.values() if hasattr(thread, "_sim_thread")]  # type: ignore[attr-defined]  # threading's private registry of live threads


def test_a_batch_keeps_what_was_alive_before_it_out_of_the_collectors_scans_and_gives_it_back():
    gc.unfreeze()  # what another test of this process froze (a swarm's long-lived objects) goes back first
    with threads_patched():
        assert gc.get_freeze_count() > 0
        assert run(counter_under_lock).outcome is RunOutcome.OK
    assert gc.get_freeze_count() == 0
    gc.freeze()  # a process that froze objects itself (a swarm freezes its long-lived ones): left as it is
    try:
        frozen = gc.get_freeze_count()
        with threads_patched():
            assert gc.get_freeze_count() <= frozen  # nothing frozen by the batch (some of the frozen may die)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def spins() -> None:
    done = [False]
    spinner = threading.Thread(target=lambda: [None for _ in iter(lambda: done[0], True)], name="spinner", daemon=True)
    spinner.start()
    while not done[0]:
        pass


def test_a_thread_that_spins_forever_hits_the_step_budget_with_its_place():
    found = sim.explore(spins, runs=1, max_steps=2_000)
    assert isinstance(found.failure.error, BudgetExceeded)
    assert "test_threads.py" in str(found.failure.error)


def blocks_on_a_real_lock(acquire: Any) -> None:
    acquire()


def test_a_real_blocking_call_is_reported_not_hung():
    held = threading.Lock()  # a real lock made before the batch, out of its sight: only a C method reaches it
    held.acquire()
    try:
        result = run(blocks_on_a_real_lock, held.acquire, stall_s=0.2)
    finally:
        held.release()
    assert result.outcome is RunOutcome.DEADLOCK
    assert "a real blocking call the simulator does not model" in str(result.error)
    assert "test_threads.py" in str(result.error)


def starts_a_process() -> None:
    subprocess.run(["true"])


def test_a_call_the_runtime_cannot_model_is_a_clear_error_not_a_finding():
    with pytest.raises(sim.NotSimulated, match="subprocess.Popen is not modelled"):
        sim.explore(starts_a_process, runs=1)


def test_a_plain_function_that_takes_rt_is_a_usage_error():
    def confused(rt: Any) -> int:
        return 1

    with pytest.raises(TypeError, match="takes `rt` but is not async"):
        sim.explore(confused, runs=1)


# ---- SQLite ---------------------------------------------------------------------------------------------


def two_writers(path: str, hold_s: float) -> list[Any]:
    outcome: list[Any] = []

    def write(name: str) -> None:
        connection = sqlite3.connect(path, timeout=1.0, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            time.sleep(hold_s)
            connection.execute("INSERT INTO notes VALUES (?)", (name,))
            connection.execute("COMMIT")
            outcome.append((name, "ok", time.monotonic()))
        except sqlite3.OperationalError as error:
            outcome.append((name, str(error), time.monotonic()))
        finally:
            connection.close()

    writers = [threading.Thread(target=write, args=(name,), name=name) for name in ("first", "second")]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    return sorted(outcome, key=lambda entry: entry[2])


@pytest.fixture
def notes_db(tmp_path: Path) -> str:
    path = str(tmp_path / "notes.db")
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE notes (name TEXT)")
    return path


def test_a_second_writer_waits_in_virtual_time_then_gets_database_is_locked(notes_db):
    outcome = value_of(two_writers, notes_db, 2.0)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC).timestamp()
    assert [(status, at - start) for _, status, at in outcome] == [("database is locked", 1.0), ("ok", 2.0)]


def test_a_second_writer_within_its_timeout_gets_the_lock(notes_db):
    outcome = value_of(two_writers, notes_db, 0.5)
    assert [status for _, status, _ in outcome] == ["ok", "ok"]
    assert outcome[1][2] - outcome[0][2] == 0.5


def test_busy_timeout_set_by_pragma_is_the_virtual_wait(notes_db):
    def pragma_then_write() -> float:
        holder = sqlite3.connect(notes_db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        waiter = sqlite3.connect(notes_db, timeout=60, isolation_level=None)
        assert waiter.execute("PRAGMA busy_timeout = 250").fetchone() == (250,)
        started = time.monotonic()
        try:
            waiter.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return time.monotonic() - started
        return -1.0

    assert value_of(pragma_then_write) == 0.25


def test_a_run_s_connections_to_a_file_do_not_flush_unless_the_program_asks(notes_db):
    def modes() -> list[int]:
        plain = sqlite3.connect(notes_db)
        chosen = sqlite3.connect(notes_db)
        chosen.execute("PRAGMA synchronous = NORMAL")
        memory = sqlite3.connect(":memory:")
        return [connection.execute("PRAGMA synchronous").fetchone()[0] for connection in (plain, chosen, memory)]

    assert value_of(modes) == [0, 1, 2]  # OFF; the program's NORMAL; a memory database as SQLite made it (FULL)
    assert sqlite3.connect(notes_db).execute("PRAGMA synchronous").fetchone() == (2,)  # outside a run: as made


def test_a_connection_that_cannot_stop_flushing_at_connect_meets_the_lock_at_its_own_statement(notes_db):
    def locked_then_free() -> list[Any]:
        writer = sqlite3.connect(notes_db, isolation_level=None)
        writer.execute("BEGIN EXCLUSIVE")
        reader = sqlite3.connect(notes_db, timeout=0)  # setting the mode needs the schema: the lock refuses it
        chooser = sqlite3.connect(notes_db, timeout=0)
        seen: list[Any] = []
        try:
            reader.execute("SELECT count(*) FROM notes")
        except sqlite3.OperationalError as error:
            seen.append(str(error))
        writer.execute("COMMIT")
        seen.append(reader.execute("SELECT count(*) FROM notes").fetchone()[0])
        seen.append(reader.execute("PRAGMA synchronous").fetchone()[0])  # set after the first statement that ran
        chooser.execute("PRAGMA synchronous = NORMAL")
        seen.append(chooser.execute("PRAGMA synchronous").fetchone()[0])  # the program's choice stands
        return seen

    assert value_of(locked_then_free) == ["database is locked", 0, 0, 1]


def test_a_file_that_is_not_a_database_fails_at_the_first_statement_not_at_connect(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("plain text, not a database " * 8)

    def open_then_read() -> str:
        connection = sqlite3.connect(str(path))
        try:
            connection.execute("SELECT 1 FROM sqlite_master")
        except sqlite3.DatabaseError as error:
            return str(error)
        return "read"

    assert value_of(open_then_read) == "file is not a database"


# ---- determinism and isolation --------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_bytes_in_one_process(notes_db):
    for program, args in ((pools_and_locals, ()), (two_writers, (notes_db, 2.0)), (crossed_locks, ())):
        assert run(program, *args, seed=5).digest() == run(program, *args, seed=5).digest()


def test_the_same_seed_gives_the_same_bytes_in_processes_with_other_hash_seeds(tmp_path):
    script = ("import sys; sys.path.insert(0, 'tests'); import test_threads as t; "
              "print([t.run(p, seed=s).digest() for p in (t.pools_and_locals, t.crossed_locks, t.chance) for s in range(4)])")
    digests = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                              env=checkout_env({"PYTHONHASHSEED": hash_seed}), check=True).stdout
               for hash_seed in ("1", "2", "3")}
    assert len(digests) == 1, digests


SHARED_LOCAL = threading.local()  # made at import, outside every run: its values are per OS thread
SHARED_VARIABLE: contextvars.ContextVar[str] = contextvars.ContextVar("shared", default="unset")


def leaves_thread_state() -> list[Any]:
    """Threads that find what earlier threads of earlier runs left in their OS thread, then leave some."""
    found = []

    def look(index: int) -> None:
        found.append((getattr(SHARED_LOCAL, "left", None), SHARED_VARIABLE.get()))
        SHARED_LOCAL.left = index
        SHARED_VARIABLE.set(f"set by {index}")

    for index in range(3):  # one after another: the next thread may take the OS thread the last one left
        thread = threading.Thread(target=look, args=(index,))
        thread.start()
        thread.join()
    return found


def test_a_thread_finds_its_os_thread_as_new_whatever_earlier_runs_left_in_it():
    for seed in range(6):  # the runs reuse parked OS threads
        assert value_of(leaves_thread_state, seed=seed) == [(None, "unset")] * 3


LEAKY_PROGRAMS = """
import threading

LEFT = []


def first():
    LEFT.append(1)  # state the batch keeps after the run: the next program's runs see it


def second():
    threads = [threading.Thread(target=list) for _ in range(len(LEFT) % 3)]
    for thread in threads:
        thread.start()


PROGRAMS = {"first": first, "second": second}
"""


def test_check_determinism_runs_programs_in_one_batch_in_two_orders_so_a_leak_between_them_differs(tmp_path):
    (tmp_path / "leaky_programs.py").write_text(LEAKY_PROGRAMS)
    done = subprocess.run([sys.executable, "-m", "sim", "check-determinism", "--programs", "leaky_programs:PROGRAMS",
                           "--seeds", "2"], capture_output=True, text=True, cwd=tmp_path,
                          env=checkout_env({"PYTHONPATH": str(tmp_path)}))
    assert done.returncode == 1, done.stderr
    assert "DIFFERS program second" in done.stdout and "DIFFERS program first" not in done.stdout


def test_threads_outside_the_run_keep_the_real_threading_and_clock():
    real_sleep, real_lock = time.sleep, threading.Lock
    seen: dict[str, Any] = {}

    def outside() -> None:
        seen["lock"] = type(threading.Lock()).__name__
        seen["time"] = time.time()

    def program() -> None:
        bystander = threading.Thread(target=outside)  # started by a simulated thread: simulated, not real
        bystander.start()
        bystander.join()

    before = threading.Thread(target=lambda: seen.setdefault("real", time.time()))
    before.start()
    before.join()
    run(program)
    assert time.sleep is real_sleep and threading.Lock is real_lock  # everything is put back after the batch
    assert seen["lock"] == "Lock" and seen["real"] > seen["time"]


def test_logging_names_the_simulated_thread(caplog):
    def logs() -> None:
        worker = threading.Thread(target=lambda: logging.getLogger("sim-test").warning("hello"), name="writer")
        worker.start()
        worker.join()

    with caplog.at_level(logging.WARNING, logger="sim-test"):
        run(logs)
    assert [record.threadName for record in caplog.records] == ["writer"]



def test_a_thread_abandoned_while_it_waits_with_a_timeout_is_not_resumed_at_its_deadline():
    """A crashed process's threads are abandoned where they wait. A wait with a timeout left its deadline live on
    the kernel's timers, which then resumed the ended thread: the kernel waited on it for the stall limit of real
    time and detached it (each crash of a hermes run cost 30 s of wall time)."""
    from sim.core.timefreeze import frozen_time
    from sim.threads.patching import threads_patched
    from sim.threads.run import ThreadRun
    from sim.threads.tracing import Preemption

    world = World(0, RandomWalk())
    run = ThreadRun(world, preemption=Preemption("sync"), stall_s=0.2)
    waiter: list[threading.Thread] = []

    async def root(rt: Any) -> None:
        waiter.append(threading.Thread(target=lambda: threading.Event().wait(5.0), name="waiter", daemon=True))
        run.start(waiter[0], "p")
        await rt.sleep(1.0)
        run.abandon_process("p")
        await rt.sleep(10.0)

    with frozen_time(), threads_patched():
        result = world.run(root)
    assert result.outcome is RunOutcome.OK and result.virtual_s == pytest.approx(11.0)
    assert not waiter[0]._sim_thread.detached  # type: ignore[attr-defined]  # the runtime hangs its record on the thread object


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="thread affinity is set only on Linux")
def test_a_runs_threads_share_one_core_and_the_kernel_thread_gets_its_affinity_back():
    before, policy = os.sched_getaffinity(0), os.sched_getscheduler(0)
    seen: list[tuple[set[int], int]] = []

    def program() -> None:
        worker = threading.Thread(target=lambda: seen.append((os.sched_getaffinity(0), os.sched_getscheduler(0))))
        worker.start()
        seen.append((os.sched_getaffinity(0), os.sched_getscheduler(0)))
        worker.join()

    for seed in range(3):
        assert run(program, seed=seed).outcome is RunOutcome.OK
        assert os.sched_getaffinity(0) == before and os.sched_getscheduler(0) == policy
    assert len(seen) == 6
    assert all(len(cores) == 1 for cores, _ in seen), seen
    assert all(seen[i][0] == seen[i + 1][0] for i in range(0, 6, 2)), "a run's two threads on different cores"
    if policy == os.SCHED_OTHER:  # only the default policy is changed, to the batch one, for the run's length
        assert {thread_policy for _, thread_policy in seen} == {os.SCHED_BATCH}


# ---- locks made before the run ------------------------------------------------------------------------------


class Ledger:
    """A module-level object with its own locks, made at import: before any run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.books = threading.RLock()
        self.entries: list[int] = []


LEDGER = Ledger()
LEDGERS = {"main": Ledger()}


def append_under_the_ledgers_lock(ledger: Ledger) -> None:
    ledger.entries.clear()

    def append() -> None:
        with ledger.lock:
            count = len(ledger.entries)  # a scheduling point inside the critical section
            ledger.entries.append(count)

    workers = [threading.Thread(target=append) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(ledger.entries) == [0, 1], ledger.entries


@pytest.mark.parametrize("reach", ["module attribute", "module dict", "closure", "argument"])
def test_a_lock_made_before_the_run_is_simulated_wherever_the_program_reaches_it(reach: str) -> None:
    """Found taken by a thread switched out inside its critical section, a real lock would block in C until the
    stall detector gave up (10 s of real time) and the run ended in a deadlock the program does not have."""
    made_here = Ledger()
    programs = {
        "module attribute": (lambda: append_under_the_ledgers_lock(LEDGER), ()),
        "module dict": (lambda: append_under_the_ledgers_lock(LEDGERS["main"]), ()),
        "closure": (lambda: append_under_the_ledgers_lock(made_here), ()),
        "argument": (append_under_the_ledgers_lock, (Ledger(),)),
    }
    program, args = programs[reach]
    found = sim.explore(program, *args, runs=40, seed=3)
    assert not found.failed, found.failure
    assert type(LEDGER.lock) is type(made_here.lock) is type(threading.Lock())  # the real locks are back


def crossed_ledger_locks() -> None:
    take_crosswise(LEDGER.lock, LEDGER.books)


def test_a_deadlock_on_locks_made_before_the_run_names_where_they_were_found():
    deadlock = sim.explore(crossed_ledger_locks, runs=200).failure.deadlock
    assert isinstance(deadlock, Deadlock)
    assert {entry.task for entry in deadlock.cycle} == {"left", "right"}
    assert "LEDGER.lock" in str(deadlock) and "LEDGER.books" in str(deadlock), str(deadlock)
    # The deadlocked runs' threads stay parked holding them; each later run, and the program after the search,
    # must find them free (the shrinker's runs found them taken and reported the wrong lock).
    assert LEDGER.lock.acquire(blocking=False) and LEDGER.books.acquire(blocking=False), "a run left a lock taken"
    LEDGER.lock.release()
    LEDGER.books.release()


def test_a_lock_made_before_the_run_and_held_by_the_caller_stays_the_callers():
    held = Ledger()
    held.lock.acquire()
    try:
        result = run(append_under_the_ledgers_lock, held, stall_s=0.2)
        assert result.outcome is RunOutcome.DEADLOCK  # in virtual time: nothing in the run can free it
        assert "args[0].lock" in str(result.error), str(result.error)
        assert held.lock.locked(), "the run freed a lock its caller holds"
    finally:
        held.lock.release()


READY = threading.Condition()
SHELF: list[int] = []


def hand_over_on_the_shelf() -> None:
    SHELF.clear()

    def consume() -> None:
        with READY:
            while not SHELF:
                READY.wait()
            SHELF.pop()

    consumer = threading.Thread(target=consume, name="consumer")
    consumer.start()
    with READY:
        item = 1  # a scheduling point while the Condition's lock is held
        SHELF.append(item)
        READY.notify()
    consumer.join()


def forget_to_notify() -> None:
    with READY:
        READY.wait()  # nobody notifies: each run ends parked here


def test_a_condition_made_before_the_run_runs_on_a_simulated_lock_and_forgets_a_dead_runs_waiters():
    assert not sim.explore(hand_over_on_the_shelf, runs=40, seed=5).failed
    deadlock = sim.explore(forget_to_notify, runs=3, shrink=False).failure.deadlock
    assert "a Condition made at test_threads.READY" in str(deadlock), str(deadlock)
    assert not READY._waiters, "a deadlocked run's waiter was left in a Condition made before it"
    assert not sim.explore(hand_over_on_the_shelf, runs=40, seed=6).failed
