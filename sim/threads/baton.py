"""One simulated thread: a real OS thread that runs only while it holds the baton.

The kernel drives tasks by the coroutine protocol (`send`, `throw`, `close`) and reads their traps. A
`SimThread` speaks that protocol for an OS thread: `send` hands the baton to the thread and waits until the
thread traps (reaches a scheduling point), finishes or raises; the thread hands the baton back by trapping.
So exactly one thread runs Python at a time, every switch is the kernel's (and so the strategy's) choice,
and the thread keeps everything an OS thread has: its own C-level thread state, `threading.local`, an
RLock's owner, SQLite's same-thread check.

Two locks per thread carry the baton (`_go` to the thread, `_back` to the kernel): a handoff is two lock
operations and one OS context switch each way. A thread that keeps the baton longer than `stall_s` of real
time is blocked in something the simulator does not model (C code waiting on real I/O, a lock made before
the run): it is detached and shown to the kernel as parked on that real call, so the run ends with a report
naming it instead of hanging.
"""

from __future__ import annotations

import _thread
import os
import sys
import sysconfig
from collections import deque
from types import FrameType
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task

# Captured before any run patches the threading module: the baton itself must be made of real locks.
_allocate_lock = _thread.allocate_lock
_get_ident = _thread.get_ident
_start_new_thread = _thread.start_new_thread

_SIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# A report shows the program's line, not the library's: frames in the simulator and in the standard library
# (a thread waiting in `queue.get` is shown at its call of `get`) are skipped; installed packages are not.
_STDLIB_DIR = sysconfig.get_paths()["stdlib"] + os.sep
_PACKAGE_DIRS = tuple({sysconfig.get_paths()[key] + os.sep for key in ("purelib", "platlib")})

_TRAP, _DONE, _RAISED = 0, 1, 2

# Every simulated thread alive in this process, by its real OS ident: the one lookup that tells the
# patched threading, time and sqlite3 whether their caller is a simulated thread.
RUNNING: dict[int, "SimThread"] = {}


class ThreadAbandoned(BaseException):
    """Raised at a scheduling point of a thread its run has given up on (a daemon left running when the
    program returned, or every thread of a run that stopped), so that the OS thread unwinds and ends.

    A BaseException, so that `except Exception` in the program cannot swallow it.
    """


class RealBlocking:
    """What a detached thread waits on, as a deadlock report shows it: a real call the simulator cannot see."""

    def __init__(self, thread: "SimThread", stall_s: float, where: str) -> None:
        self._thread = thread
        self._stall_s = stall_s
        self._where = where

    def describe(self) -> str:
        return (f"a real blocking call the simulator does not model (no scheduling point for {self._stall_s:g}s of "
                f"real time; C code waiting on I/O, or a lock made before the run) at {self._where}")

    def holders(self) -> tuple["Task", ...]:
        return ()


class SimThread:
    """An OS thread driven by the kernel through the coroutine protocol; see the module docstring."""

    def __init__(self, name: str, body: Callable[[], Any], *, stall_s: float, on_start: Callable[["SimThread"], None]) -> None:
        self.name = name
        self.task: "Task | None" = None  # the kernel's task for this thread, set once spawned
        self.run: Any = None  # the ThreadRun it belongs to
        self.thread: Any = None  # the threading.Thread it carries
        self.joiners: deque[SimThread] = deque()  # threads parked in its join()
        self._body = body
        self._stall_s = stall_s
        self._on_start = on_start
        self._go = _allocate_lock()
        self._go.acquire()
        self._back = _allocate_lock()
        self._back.acquire()
        self._inbox: tuple[Any, BaseException | None] = (None, None)
        self._outbox: tuple[int, Any, Any] = (_DONE, None, None)
        self.ident: int | None = None  # the real OS ident, once the thread runs
        self.started = False
        self.finished = False
        self.detached = False
        self.abandoning = False

    # ---- the kernel's side: the coroutine protocol --------------------------------------------------

    cr_await = None

    @property
    def cr_frame(self) -> FrameType | None:
        """The innermost frame of the program in this thread, for reports of where it waits."""
        if self.ident is None or self.finished:
            return None
        return user_frame(sys._current_frames().get(self.ident))

    def send(self, value: Any) -> Any:
        return self._resume(value, None)

    def throw(self, error: BaseException) -> Any:
        return self._resume(None, error)

    def close(self) -> None:
        """Unwind the thread by raising ThreadAbandoned at its scheduling point, and wait for it to end."""
        if not self.started or self.finished or self.detached:
            self.finished = True
            return
        self.abandoning = True
        try:
            self._resume(None, ThreadAbandoned())
        except (StopIteration, BaseException):
            pass

    def _resume(self, value: Any, error: BaseException | None) -> Any:
        self._inbox = (value, error)
        if self.started:
            self._go.release()
        else:
            self.started = True
            _start_new_thread(self._main, ())
        if not self._back.acquire(True, self._stall_s):
            return self._detach()
        kind, first, second = self._outbox
        if kind == _TRAP:
            return first, second
        self.finished = True
        if kind == _DONE:
            raise StopIteration(first)
        raise first

    def _detach(self) -> tuple[int, Any]:
        """The thread kept the baton too long: leave it to itself, parked forever as far as the run knows."""
        from sim.kernel.scheduler import PARK

        self.detached = True
        frame = self.cr_frame
        where = "an unknown line" if frame is None else f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        return PARK, (RealBlocking(self, self._stall_s, where), _never_abort)

    # ---- the thread's side --------------------------------------------------------------------------

    def trap(self, op: int, arg: Any) -> Any:
        """Hand the baton back with a trap and wait for it; returns what the kernel resumes the thread with."""
        if self.abandoning or self.detached:
            raise ThreadAbandoned()
        self._outbox = (_TRAP, op, arg)
        self._back.release()
        self._go.acquire()
        value, error = self._inbox
        if error is not None:
            raise error
        return value

    def _main(self) -> None:
        self.ident = _get_ident()
        RUNNING[self.ident] = self
        try:
            self._on_start(self)
            value, error = self._inbox
            if error is not None:
                raise error
            self._outbox = (_DONE, self._body(), None)
        except ThreadAbandoned:
            self._outbox = (_DONE, None, None)
        except BaseException as raised:  # the thread's own failure, reported by the kernel as its task's error
            self._outbox = (_RAISED, raised, None)
        finally:
            del RUNNING[self.ident]
            self._back.release()


def current() -> SimThread | None:
    """The simulated thread calling, or None for any other thread (the kernel's, pytest's, a real one)."""
    return RUNNING.get(_get_ident())


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame outside the simulator and the stdlib's threading: the line a report should show."""
    while frame is not None:
        if is_program_file(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


def is_program_file(path: str) -> bool:
    """Whether a code file is the program's (or an installed package's), not the simulator's or the stdlib's."""
    if path.startswith(_SIM_DIR) or path.startswith("<"):
        return False
    return not path.startswith(_STDLIB_DIR) or path.startswith(_PACKAGE_DIRS)


def _never_abort() -> bool:
    return False
