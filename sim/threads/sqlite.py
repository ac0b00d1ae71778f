"""SQLite as a shared resource of a run: real databases, with the busy wait in virtual time.

A simulated thread's `sqlite3.connect` opens a real connection (real files, real SQL, real locking between
connections) whose C-level busy timeout is 0, and remembers the timeout asked for (the `timeout` argument,
or a later `PRAGMA busy_timeout`). Every statement, commit and rollback is a scheduling point. When SQLite
answers SQLITE_BUSY (another connection holds the lock a statement needs), the thread parks on that
database until a connection ends its transaction, then tries again, up to the timeout in virtual time; past
it, the statement raises SQLite's own `OperationalError('database is locked')`, as a real busy handler
would. So a transaction is never interleaved in a way SQLite forbids, a second writer waits in virtual time,
and a thread parked inside a transaction holds the lock for as long as it is parked, exactly as for real.

Only the plain SQLITE_BUSY waits: the variants SQLite reports without calling its busy handler (a stale
snapshot in WAL mode, recovery) fail at once, as they do for real. Connections made outside a run (or by
any other thread) are left as they are.

Durability: a simulated thread's connection to a file gets `PRAGMA synchronous = OFF` as soon as SQLite can set
it (`_stop_flushing`), so SQLite does not ask the disk to flush at each commit. A flush only matters if the
machine loses power or its kernel dies, which no run simulates: a simulated crash stops a process's threads, and
every write SQLite made is still in the file, flushed or not. What a program reads, and how its connections lock
each other, stays the same. On the SQLite lost update of `bench classic --threads`, run plainly, they were about
a third of its CPU time. A program that sets `synchronous` itself gets the mode it set, and a program that reads
the mode sees OFF.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from sim.threads.baton import SimThread, current

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task
    from sim.threads.run import ThreadRun

SQLITE_BUSY = 5
_BUSY_TIMEOUT = re.compile(r"^\s*PRAGMA\s+(?:\w+\.)?busy_timeout\s*(?:=\s*|\(\s*)(\d+)", re.IGNORECASE)
_SYNCHRONOUS = re.compile(r"^\s*PRAGMA\s+(?:\w+\.)?synchronous\s*(?:=|\()", re.IGNORECASE)  # a program's own mode
_SELECT = re.compile(r"^\s*SELECT\b", re.IGNORECASE)  # a statement that only reads (for what a step touches)
_real_connect = sqlite3.connect


class Database:
    """One database file in a run: the threads waiting for its lock, and the connections that may hold it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.waiters: deque[SimThread] = deque()
        self.connections: list[Any] = []

    def settled(self, run: ThreadRun, connection: Any) -> None:
        """A statement of `connection` is over: if it holds no transaction now, the waiters may try again."""
        if self.waiters and not connection.in_transaction:
            while self.waiters:
                run.wake_first(self.waiters)

    def describe(self) -> str:
        return f"the SQLite lock of {os.path.basename(self.path)!r}"

    def holders(self) -> tuple[Task, ...]:
        users = (getattr(connection, "_sim_user", None) for connection in self.connections if connection.in_transaction)
        return tuple(dict.fromkeys(user.task for user in users if user is not None and user.task is not None))


def database_key(database: Any, uri: bool) -> str | None:
    """The file a connection opens, as one key for every connection to it; None for a private in-memory one."""
    name = os.fsdecode(database) if isinstance(database, (str, bytes, os.PathLike)) else str(database)
    if uri and name.startswith("file:"):
        name = name[len("file:"):].split("?", 1)[0]
        if "mode=memory" in str(database):
            return None
    if name in ("", ":memory:"):
        return None
    return os.path.realpath(name)


def run_statement(connection: Any, call: Callable[[], Any], label: str = "sql") -> Any:
    """Run one SQLite call for a simulated thread: a scheduling point, then the call, waiting out SQLITE_BUSY."""
    sim = current()
    if sim is None:
        return call()
    run = sim.run
    run.checkpoint(sim, label)
    database = _database(run, connection)
    deadline: float | None = None
    while True:
        try:
            result = call()
        except sqlite3.OperationalError as error:
            if getattr(error, "sqlite_errorcode", None) != SQLITE_BUSY or database is None:
                raise
            run.touch(sim, database, None, False)  # a statement that found the lock taken saw the database's state
            if deadline is None:
                deadline = run.now() + connection._sim_timeout_s
            if deadline <= run.now() or not run.park(sim, database, database.waiters, deadline):
                raise
            continue
        connection._sim_user = sim
        if database is not None:
            run.touch(sim, database, None, label != "select")
            database.settled(run, connection)
        return result


def _database(run: ThreadRun, connection: Any) -> Database | None:
    path = connection._sim_path
    if path is None:
        return None
    database = run.databases.get(path)
    if database is None:
        database = run.databases[path] = Database(path)
    if connection not in database.connections:
        database.connections.append(connection)
    return database


def _statements(script: str) -> Iterator[str]:
    """The statements of a script, split where SQLite's own parser says a statement is complete."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""
    if pending.strip(" \t\r\n;"):
        yield pending.rstrip(";")


class SimulatedCursor:
    """Mixed into the program's cursor class: statements through `run_statement`, fetches settle the lock."""

    connection: Any

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        label = "select" if _SELECT.match(sql) else "sql"
        result = run_statement(self.connection, lambda: super(SimulatedCursor, self).execute(sql, parameters), label)  # type: ignore[misc]  # a mixin: the program's cursor class follows it
        _apply_busy_timeout(self.connection, sql)
        if self.connection._sim_flushing:
            _retry_stop_flushing(self.connection, sql)
        return result

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        return run_statement(self.connection, lambda: super(SimulatedCursor, self).executemany(sql, parameters))  # type: ignore[misc]  # a mixin: as execute

    def executescript(self, script: str, /) -> Any:
        """The real executescript commits first, then runs each statement as written (no implicit BEGIN)."""
        connection = self.connection
        if connection.in_transaction:
            connection.commit()
        level = connection.isolation_level
        connection.isolation_level = None
        try:
            for statement in _statements(script):
                self.execute(statement)
        finally:
            connection.isolation_level = level
        return self

    def fetchone(self) -> Any:
        return self._settle(super().fetchone())  # type: ignore[misc]  # a mixin: the program's class follows it

    def fetchmany(self, *args: Any, **kwargs: Any) -> Any:
        return self._settle(super().fetchmany(*args, **kwargs))  # type: ignore[misc]  # a mixin: the program's class follows it

    def fetchall(self) -> Any:
        return self._settle(super().fetchall())  # type: ignore[misc]  # a mixin: the program's class follows it

    def close(self) -> None:
        super().close()  # type: ignore[misc]  # a mixin: the program's class follows it
        self._settle(None)

    def _settle(self, value: Any) -> Any:
        """A finished read may have released a shared lock (rollback-journal mode) that a writer waits for."""
        sim = current()
        if sim is not None and self.connection._sim_path is not None:
            database = sim.run.databases.get(self.connection._sim_path)
            if database is not None:
                database.settled(sim.run, self.connection)
        return value


class SimulatedConnection:
    """Mixed into the program's connection class: every statement, commit and rollback through `run_statement`."""

    _sim_path: str | None
    _sim_timeout_s: float
    _sim_user: SimThread | None  # the thread whose transaction is open on it
    _sim_flushing: bool  # a file's connection that still has SQLite's default flushes: to be set OFF when it can

    def cursor(self, factory: type = sqlite3.Cursor) -> Any:
        return super().cursor(_subclass(SimulatedCursor, factory))  # type: ignore[misc]  # a mixin: the program's class follows it

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        return self.cursor().executemany(sql, parameters)

    def executescript(self, script: str, /) -> Any:
        return self.cursor().executescript(script)

    def commit(self) -> None:
        run_statement(self, super().commit, "commit")  # type: ignore[misc]  # a mixin: the program's class follows it

    def rollback(self) -> None:
        run_statement(self, super().rollback, "rollback")  # type: ignore[misc]  # a mixin: the program's class follows it

    def close(self) -> None:
        super().close()  # type: ignore[misc]  # a mixin: the program's class follows it
        sim = current()
        if sim is not None and self._sim_path is not None:
            database = sim.run.databases.get(self._sim_path)
            if database is not None:
                while database.waiters:
                    sim.run.wake_first(database.waiters)

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> Literal[False]:
        if kind is None:
            self.commit()
        else:
            self.rollback()
        return False


_SUBCLASSES: dict[tuple[type, type], type] = {}


def _subclass(mixin: type, base: type) -> type:
    """The program's own Connection or Cursor class with the simulation mixed in (made once per class)."""
    made = _SUBCLASSES.get((mixin, base))
    if made is None:
        made = _SUBCLASSES[(mixin, base)] = type(f"Simulated{base.__name__}", (mixin, base), {})
    return made


def _apply_busy_timeout(connection: Any, sql: str) -> None:
    """`PRAGMA busy_timeout = N` sets the virtual wait; SQLite's own stays 0 so that it never sleeps for real."""
    if current() is None:
        return
    match = _BUSY_TIMEOUT.match(sql)
    if match:
        connection._sim_timeout_s = int(match.group(1)) / 1000
        sqlite3.Connection.execute(connection, "PRAGMA busy_timeout = 0")


def _stop_flushing(connection: Any) -> None:
    """`PRAGMA synchronous = OFF` (see "Durability" in the module docstring), if SQLite can set it now.

    Setting it reads the schema: in a database another connection is writing, or a file that is not a
    database, it fails. Then the connection flushes as before, the program meets the lock or the bad file at
    its own statement, and the mode is tried again after that statement, outside a transaction (where
    reading the schema takes no lock that the transaction would keep)."""
    try:
        sqlite3.Connection.execute(connection, "PRAGMA synchronous = OFF")
    except sqlite3.DatabaseError:
        return
    connection._sim_flushing = False


def _retry_stop_flushing(connection: Any, sql: str) -> None:
    """After a statement of a connection that still flushes: the program's own mode stands, else try again
    outside a transaction."""
    if _SYNCHRONOUS.match(sql):
        connection._sim_flushing = False
    elif not connection.in_transaction:
        _stop_flushing(connection)


def simulated_connect(previous: Callable[..., Any]) -> Callable[..., Any]:
    """`sqlite3.connect` for simulated threads (see the module docstring); `previous` for any other."""

    def connect(database: Any, timeout: float = 5.0, detect_types: int = 0, isolation_level: Any = "",
                check_same_thread: bool = True, factory: type = sqlite3.Connection, cached_statements: int = 128,
                uri: bool = False) -> Any:
        if current() is None:
            return previous(database, timeout, detect_types, isolation_level, check_same_thread, factory,
                            cached_statements, uri)
        connection: SimulatedConnection = _real_connect(database, 0, detect_types, isolation_level, check_same_thread,
                                   _subclass(SimulatedConnection, factory), cached_statements, uri)
        connection._sim_path = database_key(database, uri)
        connection._sim_timeout_s = float(timeout)
        connection._sim_user = None
        connection._sim_flushing = connection._sim_path is not None  # a memory database never flushes
        if connection._sim_flushing:
            _stop_flushing(connection)
        return connection

    return connect
