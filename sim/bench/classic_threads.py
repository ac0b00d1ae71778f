"""The ten classic concurrency bugs again, in plain threading, and three with SQLite.

Each bug is state made by `setup`, worker functions that each run in a thread over that state, and a
`check` of the state once they are all done (a deadlock fails by never getting there). `program(bug)` is
the plain program a user would write: make the state, start a thread per worker, join them, check. The
same three parts drive the other tools the benchmark measures (frontrun takes setup, workers and an
invariant; interleave-test takes the program), so every tool searches the very same code.

This module imports only the standard library, so that another Python (interleave-test needs 3.12) can
load it by its path. Workers do a few lines of plain work before their critical step, as real code does.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Bug:
    """A bug as state, workers over it and a check of it (see the module docstring)."""

    setup: Callable[[], Any]
    workers: tuple[Callable[[Any], None], ...]
    check: Callable[[Any], None]
    doc: str


def program(bug: Bug) -> Callable[[], None]:
    """The plain program: the state, a thread per worker, every thread joined, then the check."""

    def run() -> None:
        state = bug.setup()
        threads = [threading.Thread(target=worker, args=(state,), name=f"worker-{index}")
                   for index, worker in enumerate(bug.workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        bug.check(state)

    run.__name__ = run.__qualname__ = bug.setup.__name__.removeprefix("setup_")
    return run


def invariant(bug: Bug) -> Callable[[Any], bool]:
    """The check as a predicate, for tools that take one."""

    def holds(state: Any) -> bool:
        try:
            bug.check(state)
        except AssertionError:
            return False
        return True

    return holds


def _work(state: dict[str, Any], lines: int) -> None:
    """Plain lines before a critical step (logging, validation): each is a point where a thread may be switched."""
    for _ in range(lines):
        state["lines"] = state.get("lines", 0) + 1


# ---- the ten classic bugs -----------------------------------------------------------------------------


def setup_lost_update() -> dict[str, Any]:
    return {"balance": 100}


def _deposit(amount: int, checks: int) -> Callable[[dict[str, Any]], None]:
    def deposit(state: dict[str, Any]) -> None:
        _work(state, checks)
        balance = state["balance"]
        state["balance"] = balance + amount

    return deposit


def check_lost_update(state: dict[str, Any]) -> None:
    assert state["balance"] == 130, f"a deposit was lost: the balance is {state['balance']}, not 130"


def setup_check_then_act() -> dict[str, Any]:
    return {"pool": {}, "opened": []}


def _connect(caller: str, warmup: int) -> Callable[[dict[str, Any]], None]:
    def connect(state: dict[str, Any]) -> None:
        _work(state, warmup)
        if "conn" not in state["pool"]:
            state["opened"].append(caller)
            state["pool"]["conn"] = caller

    return connect


def check_check_then_act(state: dict[str, Any]) -> None:
    assert len(state["opened"]) == 1, f"the connection was opened {len(state['opened'])} times, by {state['opened']}"


def setup_order_violation() -> dict[str, Any]:
    return {"seen": None}


def _publisher(state: dict[str, Any]) -> None:
    _work(state, 2)  # registers the worker, then publishes what it reads
    state["state"] = "ready"


def _reader(state: dict[str, Any]) -> None:
    _work(state, 3)
    state["seen"] = state.get("state")


def check_order_violation(state: dict[str, Any]) -> None:
    assert state["seen"] == "ready", "the worker read the state before its parent published it"


def setup_atomicity_depth3() -> dict[str, Any]:
    return {"flags": {"a": False, "b": False}, "inside": [], "both": False}


def _enter(me: str, other: str, delay: int) -> Callable[[dict[str, Any]], None]:
    def enter(state: dict[str, Any]) -> None:
        _work(state, delay)
        flags = state["flags"]
        while flags[other]:
            time.sleep(0.001)  # back off; spinning would starve the flag's owner
        flags[me] = True
        state["inside"].append(me)
        state["both"] = state["both"] or len(state["inside"]) > 1
        state["inside"].remove(me)
        flags[me] = False

    return enter


def check_atomicity_depth3(state: dict[str, Any]) -> None:
    assert not state["both"], "both threads were in the critical section at once"


def setup_aba_free_list() -> dict[str, Any]:
    node_c: dict[str, Any] = {"name": "C", "next": None}
    node_b: dict[str, Any] = {"name": "B", "next": node_c}
    return {"top": {"name": "A", "next": node_b}, "allocated": []}


def _pop(state: dict[str, Any]) -> dict[str, Any]:
    while True:
        top = state["top"]
        following = top["next"]
        if state["top"] is top:  # compare and swap
            state["top"] = following
            return top


def _push(state: dict[str, Any], node: dict[str, Any]) -> None:
    while True:
        top = state["top"]
        node["next"] = top
        if state["top"] is top:
            state["top"] = node
            return


def _allocate_one(state: dict[str, Any]) -> None:
    state["allocated"].append(_pop(state)["name"])


def _allocate_two_free_one(state: dict[str, Any]) -> None:
    _work(state, 1)
    first, second = _pop(state), _pop(state)
    _push(state, first)
    state["allocated"].append(second["name"])


def check_aba_free_list(state: dict[str, Any]) -> None:
    listed, node = [], state["top"]
    while node is not None:
        listed.append(node["name"])
        node = node["next"]
    both = sorted(set(listed) & set(state["allocated"]))
    assert not both, f"nodes {both} are allocated and on the free list"


def setup_three_lock_deadlock() -> list[Any]:
    return [threading.Lock() for _ in range(3)]


def _transfer(index: int) -> Callable[[list[Any]], None]:
    def transfer(locks: list[Any]) -> None:
        _work({}, 4 * index)
        with locks[index]:
            _work({}, 1)
            with locks[(index + 1) % 3]:
                _work({}, 1)

    return transfer


def setup_lost_wakeup() -> dict[str, Any]:
    return {"ready": threading.Condition(), "work": []}


def _consumer(state: dict[str, Any]) -> None:
    if not state["work"]:
        _work(state, 1)  # log: going to sleep
        with state["ready"]:
            state["ready"].wait()


def _producer(state: dict[str, Any]) -> None:
    _work(state, 2)
    with state["ready"]:
        state["work"].append("job")
        state["ready"].notify_all()


def setup_bounded_buffer() -> dict[str, Any]:
    return {"changed": threading.Condition(), "buffer": [], "overflow": False}


def _produce(item: int, delay: int) -> Callable[[dict[str, Any]], None]:
    def produce(state: dict[str, Any]) -> None:
        _work(state, delay)
        with state["changed"]:
            if state["buffer"]:  # `if`, not `while`: the bug
                state["changed"].wait()
            state["buffer"].append(item)
            state["overflow"] = state["overflow"] or len(state["buffer"]) > 1
            state["changed"].notify_all()

    return produce


def _take_three(state: dict[str, Any]) -> None:
    for _ in range(3):
        _work(state, 1)
        with state["changed"]:
            while not state["buffer"]:
                state["changed"].wait()
            state["buffer"].pop()
            state["changed"].notify_all()


def check_bounded_buffer(state: dict[str, Any]) -> None:
    assert not state["overflow"], "a producer appended to a full one-slot buffer"


def setup_must_run_last() -> dict[str, Any]:
    return {"listeners": []}


def _job(state: dict[str, Any]) -> None:
    _work(state, 4)
    for listener in state["listeners"]:
        listener.set()


def _watcher(state: dict[str, Any]) -> None:
    finished = threading.Event()
    state["listeners"].append(finished)
    finished.wait()


def setup_rare_among_ten() -> dict[str, Any]:
    return {"config": {"old": "v1"}, "missed": []}


def _replica(index: int) -> Callable[[dict[str, Any]], None]:
    def replica(state: dict[str, Any]) -> None:
        if "old" not in state["config"]:
            state["missed"].append(index)
        _work(state, 12)
        if index == 9:
            del state["config"]["old"]

    return replica


def check_rare_among_ten(state: dict[str, Any]) -> None:
    assert not state["missed"], f"replicas {state['missed']} found the old configuration retired before they read it"


def _no_check(state: Any) -> None:
    """A deadlock bug fails by never finishing; finishing is passing."""


# ---- three with SQLite --------------------------------------------------------------------------------


# One folder for the process, made at import (outside any run): each setup makes its database afresh there.
_FOLDER = tempfile.mkdtemp(prefix="classic-sqlite-")
atexit.register(shutil.rmtree, _FOLDER, True)


def _database(schema: str) -> str:
    path = os.path.join(_FOLDER, "bank.db")
    for suffix in ("", "-journal", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    with sqlite3.connect(path) as connection:
        connection.executescript(schema)
    connection.close()
    return path


def setup_sqlite_lost_update() -> dict[str, Any]:
    return {"path": _database("CREATE TABLE account (id INTEGER PRIMARY KEY, balance INTEGER);"
                              "INSERT INTO account VALUES (1, 100);")}


def _sql_deposit(amount: int, checks: int) -> Callable[[dict[str, Any]], None]:
    def deposit(state: dict[str, Any]) -> None:
        connection = sqlite3.connect(state["path"], isolation_level=None)
        _work(state, checks)
        (balance,) = connection.execute("SELECT balance FROM account WHERE id = 1").fetchone()
        connection.execute("UPDATE account SET balance = ? WHERE id = 1", (balance + amount,))
        connection.close()

    return deposit


def _scalar(path: str, query: str) -> Any:
    """One value read on a connection of its own, closed again."""
    connection = sqlite3.connect(path)
    try:
        return connection.execute(query).fetchone()[0]
    finally:
        connection.close()


def check_sqlite_lost_update(state: dict[str, Any]) -> None:
    balance = _scalar(state["path"], "SELECT balance FROM account WHERE id = 1")
    assert balance == 130, f"a deposit was lost through two connections: the balance is {balance}, not 130"


def setup_sqlite_check_then_insert() -> dict[str, Any]:
    return {"path": _database("CREATE TABLE users (name TEXT);")}


def _register(delay: int) -> Callable[[dict[str, Any]], None]:
    def register(state: dict[str, Any]) -> None:
        connection = sqlite3.connect(state["path"], isolation_level=None)
        _work(state, delay)
        (taken,) = connection.execute("SELECT count(*) FROM users WHERE name = 'ada'").fetchone()
        if not taken:  # read, then write: no transaction holds the read true until the write
            connection.execute("INSERT INTO users VALUES ('ada')")
        connection.close()

    return register


def check_sqlite_check_then_insert(state: dict[str, Any]) -> None:
    count = _scalar(state["path"], "SELECT count(*) FROM users WHERE name = 'ada'")
    assert count == 1, f"the user name was registered {count} times"


def setup_sqlite_lock_across_sleep() -> dict[str, Any]:
    return {"path": _database("CREATE TABLE log (line TEXT);"), "errors": []}


def _slow_writer(state: dict[str, Any]) -> None:
    connection = sqlite3.connect(state["path"], timeout=1.0, isolation_level=None)
    _work(state, 6)
    connection.execute("BEGIN IMMEDIATE")
    time.sleep(2)  # holds the write lock across a sleep: longer than the other writer will wait
    connection.execute("INSERT INTO log VALUES ('slow')")
    connection.execute("COMMIT")
    connection.close()


def _quick_writer(state: dict[str, Any]) -> None:
    connection = sqlite3.connect(state["path"], timeout=1.0, isolation_level=None)
    _work(state, 2)
    try:
        connection.execute("INSERT INTO log VALUES ('quick')")
    except sqlite3.OperationalError as error:
        state["errors"].append(str(error))
    connection.close()


def check_sqlite_lock_across_sleep(state: dict[str, Any]) -> None:
    assert not state["errors"], f"a writer gave up on the lock: {state['errors']}"


BUGS: dict[str, Bug] = {
    "lost_update": Bug(setup_lost_update, (_deposit(10, 0), _deposit(20, 2)), check_lost_update,
                       "Two deposits read the balance and write it back: a switch between one's read and write loses the other's."),
    "check_then_act": Bug(setup_check_then_act, tuple(_connect(caller, 2 * index) for index, caller in enumerate("abc")),
                          check_check_then_act, "Lazy initialisation: a caller switched out between its check and its act lets a second pass the check."),
    "order_violation": Bug(setup_order_violation, (_publisher, _reader), check_order_violation,
                           "A parent starts a worker, then publishes what it reads: the worker may read first."),
    "atomicity_depth3": Bug(setup_atomicity_depth3, (_enter("a", "b", 0), _enter("b", "a", 3)), check_atomicity_depth3,
                            "Hand-rolled mutual exclusion by flags: both pass their check before either raises its flag."),
    "aba_free_list": Bug(setup_aba_free_list, (_allocate_one, _allocate_two_free_one), check_aba_free_list,
                         "A lock-free pop's compare-and-swap sees A on top again after A, B were popped and A pushed back."),
    "three_lock_deadlock": Bug(setup_three_lock_deadlock, tuple(_transfer(index) for index in range(3)), _no_check,
                               "Three threads take two of three locks in a cycle: each holds one while waiting for the next."),
    "lost_wakeup": Bug(setup_lost_wakeup, (_consumer, _producer), _no_check,
                       "A consumer checks for work without the condition's lock, then waits: a notify in between is lost."),
    "bounded_buffer": Bug(setup_bounded_buffer, (_take_three, *(_produce(item, 3 * item) for item in range(3))),
                          check_bounded_buffer, "Producers wait for room with `if`, not `while`: one take wakes two producers."),
    "must_run_last": Bug(setup_must_run_last, (_watcher, *(_job for _ in range(4))), _no_check,
                         "A watcher registers for the next job's end: if all four jobs ended first, it waits forever."),
    "rare_among_ten": Bug(setup_rare_among_ten, tuple(_replica(index) for index in range(10)), check_rare_among_ten,
                          "The last of ten replicas retires the old configuration when it ends; one that had not run yet misses it."),
    "sqlite_lost_update": Bug(setup_sqlite_lost_update, (_sql_deposit(10, 0), _sql_deposit(20, 2)), check_sqlite_lost_update,
                              "Two connections read a balance and update it in autocommit: one update overwrites the other."),
    "sqlite_check_then_insert": Bug(setup_sqlite_check_then_insert, (_register(0), _register(2)), check_sqlite_check_then_insert,
                                    "Read-then-write outside a transaction: both connections see no row and both insert."),
    "sqlite_lock_across_sleep": Bug(setup_sqlite_lock_across_sleep, (_quick_writer, _slow_writer), check_sqlite_lock_across_sleep,
                                    "A writer holds SQLite's lock across a sleep: a second writer waits its timeout out and fails."),
}

def lease_for_five_minutes() -> None:
    """Not a bug: a holder keeps a lease for 300 s while a refresher renews it every 30 s, as a compaction's
    lease refresher does; the benchmark's measure of virtual seconds per wall second."""
    stop, renewals = threading.Event(), []

    def refresh() -> None:
        while not stop.wait(30):
            renewals.append(time.time())

    refresher = threading.Thread(target=refresh, name="lease-refresher", daemon=True)
    refresher.start()
    time.sleep(300)
    stop.set()
    refresher.join(timeout=1.0)
    assert len(renewals) in (9, 10), renewals  # at 300 s the last renewal and the holder wake together: either may go first


# The plain programs by name, for the command line (`check-determinism --programs sim.bench.classic_threads:PROGRAMS`).
PROGRAMS: dict[str, Callable[[], None]] = {name: program(bug) for name, bug in BUGS.items()}
