"""Small threaded programs as people write them, whose result does not depend on the schedule: run with real
threads or under the thread runtime with any seed, each must return the same value (or raise the same error).

A wait that must time out waits on something nobody provides, for SHORT seconds: real time in a real run (a
few milliseconds), virtual time in a simulated one. Everything else is ordered by the program's own
synchronisation, never by how fast a thread happens to be.
"""

from __future__ import annotations

import logging
import queue
import signal
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, as_completed, wait
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

SHORT = 0.02  # seconds a wait that must expire waits


def outcome(call: Callable[[], Any]) -> Any:
    """What `call()` gave: its value, or the type and message of what it raised."""
    try:
        return call()
    except Exception as error:
        return type(error).__name__, str(error)


# ---- threading.Thread ---------------------------------------------------------------------------------------


def thread_arguments() -> list[Any]:
    seen: list[Any] = []

    def target(a: int, b: int, *, scale: int = 1) -> None:
        seen.append((threading.current_thread().name, (a + b) * scale))

    worker = threading.Thread(target=target, args=(1, 2), kwargs={"scale": 10}, name="adder", daemon=False)
    background = threading.Thread(target=target, args=(3, 4), daemon=True)
    flags = (worker.daemon, background.daemon, worker.is_alive(), worker.ident)
    worker.start()
    worker.join()
    background.start()
    background.join()
    return [flags, seen, worker.is_alive(), outcome(worker.start), outcome(threading.Thread().join),
            outcome(lambda: setattr(worker, "daemon", True))]


class Summer(threading.Thread):
    """A subclass that overrides run() and keeps its result, as real code does."""

    def __init__(self, numbers: list[int]) -> None:
        super().__init__(name=f"summer-{len(numbers)}")
        self.numbers = numbers
        self.total = 0

    def run(self) -> None:
        for number in self.numbers:
            self.total += number


def subclassed_run() -> list[Any]:
    workers = [Summer(list(range(n))) for n in (3, 10)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return [(worker.name, worker.total) for worker in workers]


def join_with_timeout() -> list[Any]:
    release = threading.Event()
    worker = threading.Thread(target=release.wait, name="waiter")
    worker.start()
    worker.join(SHORT)
    still = worker.is_alive()
    release.set()
    worker.join()
    return [still, worker.is_alive(), outcome(lambda: threading.current_thread().join())]


def introspection() -> list[Any]:
    baseline = threading.active_count()
    ready, release = threading.Barrier(3), threading.Event()
    seen: dict[str, Any] = {}

    def work() -> None:
        me = threading.current_thread()
        seen[me.name] = (threading.get_ident() == me.ident, threading.get_native_id() == me.native_id,
                         me is not threading.main_thread())
        ready.wait()
        release.wait()

    workers = [threading.Thread(target=work, name=f"w{n}") for n in range(2)]
    for worker in workers:
        worker.start()
    ready.wait()
    names = sorted(thread.name for thread in threading.enumerate() if thread in workers)
    during = threading.active_count() - baseline
    release.set()
    for worker in workers:
        worker.join()
    main = threading.main_thread()
    return [names, during, threading.active_count() - baseline, sorted(seen.items()),
            main is threading.current_thread(), main.name, len({worker.ident for worker in workers})]


def excepthook() -> list[Any]:
    caught: list[Any] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: caught.append((args.exc_type.__name__, str(args.exc_value), args.thread.name))
    try:
        worker = threading.Thread(target=lambda: {}["missing"], name="failing")
        worker.start()
        worker.join()
    finally:
        threading.excepthook = previous
    return caught


def quiet_exit() -> str:
    """SystemExit ends a thread silently, for real: no hook, no failure."""

    def leave() -> None:
        raise SystemExit(3)

    worker = threading.Thread(target=leave)
    worker.start()
    worker.join()
    return "ok"


def signal_handlers() -> list[Any]:
    """A CLI sets its handlers from its main thread; any other thread may not."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    out: list[Any] = [signal.signal(signal.SIGUSR1, handler), signal.getsignal(signal.SIGUSR1) is handler]
    worker = threading.Thread(target=lambda: out.append(outcome(lambda: signal.signal(signal.SIGUSR1, handler))))
    worker.start()
    worker.join()
    out += [outcome(lambda: signal.signal(signal.NSIG + 1, handler)), outcome(lambda: signal.signal(signal.SIGUSR1, 5)),
            outcome(lambda: signal.signal(signal.SIGKILL, handler))]
    out.append(signal.signal(signal.SIGUSR1, signal.SIG_DFL) is handler)
    return out


# ---- locks ----------------------------------------------------------------------------------------------------


def lock_operations() -> list[Any]:
    lock, taken, release = threading.Lock(), threading.Event(), threading.Event()
    out: list[Any] = [lock.locked(), lock.acquire(blocking=False), lock.locked(), lock.acquire(False)]
    lock.release()
    out.append(outcome(lock.release))
    out.append(outcome(lambda: lock.acquire(False, 1)))

    def hold() -> None:
        lock.acquire()
        taken.set()
        release.wait()
        lock.release()

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait()
    out += [lock.acquire(timeout=SHORT), lock.acquire(blocking=False), lock.locked()]
    release.set()
    out.append(lock.acquire(timeout=60))
    lock.release()
    holder.join()

    handed = threading.Lock()  # a plain Lock may be released by a thread that does not hold it
    handed.acquire()
    releaser = threading.Thread(target=handed.release)
    releaser.start()
    releaser.join()
    out.append(handed.locked())
    return out


def rlock_operations() -> list[Any]:
    rlock, out = threading.RLock(), []
    with rlock:
        with rlock:
            out.append(rlock.acquire(blocking=False))
            rlock.release()
            stranger = threading.Thread(target=lambda: out.append(outcome(rlock.release)))
            stranger.start()
            stranger.join()
            other = threading.Thread(target=lambda: out.append(rlock.acquire(timeout=SHORT)))
            other.start()
            other.join()
    out.append(outcome(rlock.release))
    taker = threading.Thread(target=lambda: out.append(rlock.acquire(blocking=False)))
    taker.start()
    taker.join()
    return out


def condition_operations() -> list[Any]:
    condition = threading.Condition()
    state = {"waiting": 0, "tickets": 0, "woken": 0}
    out: list[Any] = []

    def waiter() -> None:
        with condition:
            state["waiting"] += 1
            condition.notify_all()
            while not state["tickets"]:
                condition.wait()
            state["tickets"] -= 1
            state["woken"] += 1
            condition.notify_all()

    workers = [threading.Thread(target=waiter) for _ in range(3)]
    for worker in workers:
        worker.start()
    with condition:
        out.append(condition.wait_for(lambda: state["waiting"] == 3, timeout=60))
        state["tickets"] = 2
        condition.notify(2)
        out.append(condition.wait_for(lambda: state["woken"] == 2))
        out.append(condition.wait_for(lambda: state["woken"] == 3, timeout=SHORT))
        state["tickets"] = 1
        condition.notify_all()
        out.append(condition.wait_for(lambda: state["woken"] == 3))
        out.append(condition.wait(SHORT))
    for worker in workers:
        worker.join()
    out.append(outcome(condition.notify))
    return out


def event_operations() -> list[Any]:
    event = threading.Event()
    out: list[Any] = [event.is_set(), event.wait(SHORT), event.wait(0)]
    setter = threading.Thread(target=event.set)
    setter.start()
    out += [event.wait(), event.wait(60), event.is_set()]
    setter.join()
    event.clear()
    out += [event.is_set(), event.wait(SHORT)]
    return out


def semaphore_operations() -> list[Any]:
    pool, out = threading.Semaphore(2), []
    out += [pool.acquire(), pool.acquire(timeout=1), pool.acquire(timeout=SHORT), pool.acquire(blocking=False)]
    returner = threading.Thread(target=pool.release)
    returner.start()
    out.append(pool.acquire(timeout=60))
    returner.join()
    pool.release(2)
    out.append(pool.acquire(blocking=False))
    bounded = threading.BoundedSemaphore(2)
    bounded.acquire()
    bounded.release()
    out.append(outcome(bounded.release))
    out.append(outcome(lambda: threading.Semaphore(-1)))
    return out


def barrier_operations() -> list[Any]:
    actions: list[str] = []
    barrier = threading.Barrier(3, action=lambda: actions.append("tripped"))
    indexes: list[int] = []
    parties = [threading.Thread(target=lambda: indexes.append(barrier.wait())) for _ in range(2)]
    for party in parties:
        party.start()
    indexes.append(barrier.wait())
    for party in parties:
        party.join()
    out: list[Any] = [sorted(indexes), actions, barrier.n_waiting, barrier.broken]

    lonely = threading.Barrier(2, timeout=SHORT)
    out += [outcome(lonely.wait), lonely.broken, outcome(lonely.wait)]
    lonely.reset()
    out.append(lonely.broken)

    aborted, errors = threading.Barrier(3), []
    waiting = threading.Thread(target=lambda: errors.append(outcome(aborted.wait)))
    waiting.start()
    while aborted.n_waiting < 1:
        threading.Event().wait(0.001)
    aborted.abort()
    waiting.join()
    out += [errors, aborted.broken]
    return out


def timer_operations() -> list[Any]:
    fired: list[str] = []
    done = threading.Event()

    def fire(what: str) -> None:
        fired.append(what)
        done.set()

    cancelled = threading.Timer(SHORT, fire, args=("never",))
    cancelled.start()
    cancelled.cancel()
    cancelled.join()
    timer = threading.Timer(SHORT, fire, kwargs={"what": "fired"})
    timer.start()
    done.wait()
    timer.join()
    return [fired, cancelled.finished.is_set(), timer.is_alive()]


class Slot(threading.local):
    """A threading.local subclass: its __init__ runs again in each thread that touches it."""

    def __init__(self, start: int) -> None:
        self.value = start


def thread_locals() -> list[Any]:
    plain, slot = threading.local(), Slot(7)
    plain.name = "main"
    slot.value = 100
    seen: dict[str, Any] = {}

    def work(name: str) -> None:
        seen[name] = (hasattr(plain, "name"), slot.value)
        plain.name = name
        slot.value += len(name)
        seen[name] += (plain.name, slot.value)

    workers = [threading.Thread(target=work, args=(name,)) for name in ("a", "bb")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return [plain.name, slot.value, sorted(seen.items())]


# ---- queue ----------------------------------------------------------------------------------------------------


def bounded_queue() -> list[Any]:
    box: queue.Queue[int] = queue.Queue(maxsize=2)
    out: list[Any] = [box.empty(), outcome(box.get_nowait), outcome(lambda: box.get(timeout=SHORT))]
    box.put(1)
    box.put(2, timeout=1)
    out += [box.full(), box.qsize(), outcome(lambda: box.put_nowait(3)), outcome(lambda: box.put(3, timeout=SHORT))]
    consumed: list[int] = []

    def consume() -> None:
        while True:
            item = box.get()
            if item < 0:
                box.task_done()
                return
            consumed.append(item)
            box.task_done()

    consumer = threading.Thread(target=consume)
    consumer.start()
    for item in range(3, 8):
        box.put(item)
    box.put(-1)
    box.join()
    consumer.join()
    out += [consumed, outcome(box.task_done), box.empty()]
    return out


def other_queues() -> list[Any]:
    lifo: queue.LifoQueue[int] = queue.LifoQueue()
    priority: queue.PriorityQueue[tuple[int, str]] = queue.PriorityQueue()
    simple: queue.SimpleQueue[str] = queue.SimpleQueue()

    def fill() -> None:
        for n in range(4):
            lifo.put(n)
        for entry in ((3, "c"), (1, "a"), (2, "b")):
            priority.put(entry)
        for word in ("x", "y"):
            simple.put(word)

    filler = threading.Thread(target=fill)
    filler.start()
    filler.join()
    return [[lifo.get() for _ in range(4)], [priority.get()[1] for _ in range(3)], [simple.get(), simple.get()],
            outcome(lambda: simple.get(timeout=SHORT)), simple.empty(), outcome(lambda: simple.get(block=False))]


def producer_consumer() -> list[int]:
    """The textbook pipeline: producers, a bounded queue, consumers, sentinels."""
    jobs: queue.Queue[int | None] = queue.Queue(maxsize=3)
    results: queue.Queue[int] = queue.Queue()

    def produce(base: int) -> None:
        for n in range(5):
            jobs.put(base + n)

    def consume() -> None:
        while (job := jobs.get()) is not None:
            results.put(job * job)

    producers = [threading.Thread(target=produce, args=(base,)) for base in (0, 100)]
    consumers = [threading.Thread(target=consume) for _ in range(3)]
    for thread in producers + consumers:
        thread.start()
    for thread in producers:
        thread.join()
    for _ in consumers:
        jobs.put(None)
    for thread in consumers:
        thread.join()
    return sorted(results.get() for _ in range(results.qsize()))


# ---- concurrent.futures ----------------------------------------------------------------------------------------


def square(n: int) -> int:
    if n < 0:
        raise ValueError(f"negative: {n}")
    return n * n


def executor_operations() -> list[Any]:
    out: list[Any] = []
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="calc") as pool:
        futures = [pool.submit(square, n) for n in range(5)]
        out.append(sorted(future.result() for future in as_completed(futures)))
        out.append(list(pool.map(square, range(4))))
        failing = pool.submit(square, -2)
        out.append(outcome(failing.result))
        out.append(type(failing.exception()).__name__)
        out.append(outcome(lambda: list(pool.map(square, [1, -1, 2]))))
        names = pool.submit(lambda: threading.current_thread().name).result()
        out.append(names.startswith("calc_"))
    out.append(outcome(lambda: pool.submit(square, 1)))
    return out


def executor_waits() -> list[Any]:
    gate, out = threading.Event(), []
    pool = ThreadPoolExecutor(max_workers=2)
    slow = pool.submit(gate.wait)
    quick = pool.submit(square, 3)
    done, pending = wait([slow, quick], return_when=FIRST_COMPLETED)
    out += [quick in done, slow in pending]
    out.append(outcome(lambda: slow.result(timeout=SHORT)))
    out.append(isinstance(FutureTimeout(), TimeoutError))
    calls: list[Any] = []
    slow.add_done_callback(lambda future: calls.append(("late", future.result())))
    quick.add_done_callback(lambda future: calls.append(("at once", future.result())))
    out.append(list(calls))
    gate.set()
    out.append(slow.result(timeout=60))
    pool.shutdown(wait=True)
    out += [calls, slow.done(), quick.running()]
    queued = ThreadPoolExecutor(max_workers=1)
    blocker = queued.submit(gate.wait)
    later = queued.submit(square, 4)
    out.append(later.cancel() or later.result() == 16)
    queued.shutdown(wait=True, cancel_futures=True)
    out.append(blocker.result())
    return out


# ---- logging ----------------------------------------------------------------------------------------------------


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def logging_from_threads() -> list[Any]:
    logger = logging.getLogger("threaded-program")
    handler = Collect()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        workers = [threading.Thread(target=logger.info, args=("from %s", name), name=name) for name in ("a", "b")]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        logger.info("from main")
    finally:
        logger.removeHandler(handler)
    idents = {worker.name: worker.ident for worker in workers}
    idents[threading.current_thread().name] = threading.get_ident()
    return sorted((record.threadName, record.getMessage(), record.thread == idents[record.threadName])
                  for record in handler.records)


# ---- sqlite3 ----------------------------------------------------------------------------------------------------


def sqlite_transactions(path: str) -> list[Any]:
    out: list[Any] = []
    setup = sqlite3.connect(path, isolation_level=None)
    setup.execute("CREATE TABLE IF NOT EXISTS accounts (name TEXT PRIMARY KEY, balance INTEGER)")
    setup.execute("BEGIN")
    setup.executemany("INSERT INTO accounts VALUES (?, ?)", [("a", 100), ("b", 50)])
    out.append(setup.in_transaction)
    setup.execute("COMMIT")
    out.append(setup.in_transaction)

    implicit = sqlite3.connect(path)  # the default: an implicit transaction before each write
    with implicit:
        implicit.execute("UPDATE accounts SET balance = balance - 10 WHERE name = 'a'")
        implicit.execute("UPDATE accounts SET balance = balance + 10 WHERE name = 'b'")
    try:
        with implicit:
            implicit.execute("UPDATE accounts SET balance = 0 WHERE name = 'a'")
            raise KeyError("abandon the transfer")
    except KeyError:
        out.append("rolled back")
    out.append(outcome(lambda: implicit.execute("INSERT INTO accounts VALUES ('a', 1)")))
    implicit.rollback()

    def read(name: str) -> None:
        connection = sqlite3.connect(path)
        out.append((name, connection.execute("SELECT name, balance FROM accounts ORDER BY name").fetchall()))
        connection.close()

    reader = threading.Thread(target=read, args=("reader",))
    reader.start()
    reader.join()
    setup.close()
    implicit.close()
    return out


def sqlite_locked(path: str) -> list[Any]:
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE IF NOT EXISTS notes (text TEXT)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO notes VALUES ('held')")
    out: list[Any] = []

    def second_writer() -> None:
        other = sqlite3.connect(path, timeout=SHORT, isolation_level=None)
        out.append(outcome(lambda: other.execute("BEGIN IMMEDIATE")))
        out.append(other.execute("SELECT count(*) FROM notes").fetchone())  # a reader still reads, before the write
        other.close()

    writer = threading.Thread(target=second_writer)
    writer.start()
    writer.join()
    holder.execute("COMMIT")
    after = sqlite3.connect(path, timeout=SHORT)
    out.append(after.execute("SELECT count(*) FROM notes").fetchone())
    after.close()
    holder.close()
    return out


def sqlite_same_thread(path: str) -> list[Any]:
    """A connection is bound to the thread that made it, unless check_same_thread=False."""
    strict, shared = sqlite3.connect(path), sqlite3.connect(path, check_same_thread=False)
    out: list[Any] = []

    def use() -> None:
        kind, message = outcome(lambda: strict.execute("SELECT 1"))
        out.append((kind, message.split(".")[0]))  # the rest names the OS threads' idents
        out.append(shared.execute("SELECT 2").fetchone())

    worker = threading.Thread(target=use)
    worker.start()
    worker.join()
    strict.close()
    shared.close()
    return out


# `excepthook` is not among them: under the runtime the thread's exception also fails the run (its own test).
PROGRAMS: tuple[Callable[..., Any], ...] = (
    thread_arguments, subclassed_run, join_with_timeout, introspection, quiet_exit, signal_handlers, lock_operations,
    rlock_operations, condition_operations, event_operations, semaphore_operations, barrier_operations,
    timer_operations, thread_locals, bounded_queue, other_queues, producer_consumer, executor_operations,
    executor_waits, logging_from_threads,
)
SQLITE_PROGRAMS: tuple[Callable[[str], Any], ...] = (sqlite_transactions, sqlite_locked, sqlite_same_thread)
