"""Stopping a command: the first Ctrl+C (or SIGTERM) stops it after the run in progress, a second one at once.

An interrupt is the user's, never a verdict on the system under test. Inside `graceful()` (the long commands)
the first request raises nothing: it only sets a flag that the loops over runs read between two runs
(`requested`); the run in progress ends as it would have, and the command prints what it found so far, says
"interrupted after N runs" and exits 130. A second request, or the first one outside `graceful()`, stops at
once: `Interrupted` is raised where the process is, also inside a step of a simulated run (one step can be
long: an invariant over a huge store), and the run in progress (`running`) has no outcome: the kernel lets a
KeyboardInterrupt through rather than count it as a task's error, the World closes the tasks, and should the
code under test swallow it, the run still ends at its next step (`Kernel.interrupt`). The process exits 130.

Child processes. Every request is passed on as SIGTERM to the `python -m sim` processes this one started
through `sim.core.children` (which `listen`s), and such a child (`install(by_parent=...)`) ignores SIGINT and
counts SIGTERMs alone: at a terminal, Ctrl+C reaches the whole foreground process group, and a child that counted it
besides its parent's SIGTERM would take one press for two. A block that must not be cut half-way (making
or removing a folder) runs under `held()`: a stop at once that arrives inside it waits for its end.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, Protocol, TypeVar

from sim.core.words import counted
from sim.kernel.errors import Interrupted

EXIT_INTERRUPTED = 130
# Set by `sim.core.children` for the `python -m sim` processes it starts; read only at the CLI's entry.
BY_PARENT_ENV = "COMPACTION_SIM_STOPPED_BY_PARENT"
NOTE = "stopping after the run in progress (press Ctrl+C again to stop at once)"

__all__ = ["BY_PARENT_ENV", "EXIT_INTERRUPTED", "Interrupted", "Stopped", "Until", "before_start", "child_exit", "graceful", "held",
           "install", "interrupted_after", "listen", "requested", "running", "runs_finished", "settled"]
T = TypeVar("T")


class Stoppable(Protocol):
    interrupted: bool

    def interrupt(self) -> None:
        """End at the next step with Interrupted."""


class Stopped(KeyboardInterrupt):
    """A stop request met the start of a new run or child process in a stretch that stops there
    (`graceful(at_next_run=True)`): raised before the run begins, so no run is cut."""


_requests = 0
_runs = 0  # simulated runs this process finished
_graceful: list[tuple[str, bool]] = []  # the open graceful() blocks, innermost last: (note, at_next_run)
_held = 0  # how many held() blocks are open
_pending = False  # a stop at once arrived inside one
_running: Stoppable | None = None  # the simulated run in progress, if any
_by_parent = False
_name = ""  # what the process calls itself in the note
_listeners: list[Callable[[bool], None]] = []  # told of each request, and whether it stops at once


def install(by_parent: str | None, name: str) -> None:
    """Handle SIGINT and SIGTERM as stop requests (call once, from the main thread, at the process entry).

    `by_parent`: what `BY_PARENT_ENV` said, if a `python -m sim` parent started this process and passes each of
    its stop requests on as SIGTERM: "listening", or "stopping" when the parent was already asked to stop.
    `name` prefixes the note a first request prints.
    """
    global _by_parent, _requests, _name
    _name = name
    _by_parent = by_parent is not None
    _requests = int(by_parent == "stopping")
    signal.signal(signal.SIGINT, signal.SIG_IGN if _by_parent else _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


def listen(listener: Callable[[bool], None]) -> None:
    """Tell `listener` of each stop request from the signal handler (True: this one stops at once); it must
    not wait for a lock."""
    _listeners.append(listener)


def settled() -> None:
    """The command has its exit status: a request that comes now, as the process ends, changes nothing."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def requested() -> bool:
    """Whether a stop was requested: a loop over runs ends before its next run."""
    return _requests > 0


class Until(Generic[T]):
    """The items of a loop over runs, until a stop is requested: then it ends before the next item, and `cut`
    says that the request, not the end of the items, ended it. In a stretch that stops at its next run
    (`graceful(at_next_run=True)`) it goes on, so that the next run raises `Stopped`: a search cut short there
    would read as a complete one."""

    def __init__(self, items: Iterable[T]) -> None:
        self._items = iter(items)
        self.cut = False

    def __iter__(self) -> Until[T]:
        return self

    def __next__(self) -> T:
        item = next(self._items)
        if _requests and not (_graceful and _graceful[-1][1]):
            self.cut = True
            raise StopIteration
        return item


@contextmanager
def graceful(note: str = NOTE, *, at_next_run: bool = False) -> Iterator[None]:
    """A stretch whose loops read `requested()` between runs: the first request only asks them to stop,
    and `note` (said on stderr) tells the user what happens next.

    `at_next_run`: the stretch's loops need not read it: once a stop is requested, the next run (or child
    process) to start raises `Stopped` instead (a benchmark, whose figures need every measurement, keeps none).
    """
    _graceful.append((note, at_next_run))
    try:
        yield
    finally:
        _graceful.pop()


def child_exit(code: int) -> int:
    """A child command's exit status as this one's: a child that a stop request reached before it could handle
    one ended by the signal, and was interrupted all the same."""
    return EXIT_INTERRUPTED if code < 0 and requested() else code


def runs_finished() -> int:
    """How many simulated runs this process finished."""
    return _runs


def before_start() -> None:
    """Raise Stopped if a stop was requested in a stretch that stops at its next run or child."""
    if _requests and _graceful and _graceful[-1][1]:
        raise Stopped()


@contextmanager
def running(run: Stoppable) -> Iterator[None]:
    """A simulated run in progress: a stop at once ends it, and it is counted as no run."""
    global _running, _runs
    before_start()
    outer, _running = _running, run
    try:
        yield
    finally:
        _running = outer
    if run.interrupted:  # the stop came as the run ended, too late for its next step
        raise Interrupted()
    _runs += 1


@contextmanager
def held() -> Iterator[None]:
    """Run the block whole: a stop at once that arrives inside it is acted on once it ends.

    Python runs signal handlers in the main thread only, so only the main thread's blocks need holding.
    """
    global _held, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _held += 1
    try:
        yield
    finally:
        _held -= 1
    if _pending and not _held:
        _pending = False
        raise Interrupted()


def interrupted_after(count: int, unit: str = "run") -> str:
    """The line an interrupted command ends with: `interrupted after 3 runs`."""
    return f"interrupted after {counted(count, unit)}"


def _on_signal(signum: int, frame: Any) -> None:
    global _requests, _pending
    _requests += 1
    at_once = _requests > 1 or not _graceful
    for listener in _listeners:
        listener(at_once)
    if not at_once:
        if not _by_parent:
            _say(f"{_name}: {_graceful[-1][0]}")
        return
    if _held:
        _pending = True
        return
    if _running is not None:
        _running.interrupt()  # should the code under test swallow the raise below, the run ends at its next step
    raise Interrupted()


def _say(line: str) -> None:
    """A line on stderr from a signal handler: written unbuffered, since the handler may have interrupted a print."""
    try:
        os.write(2, f"{line}\n".encode())
    except OSError:
        pass
