"""One simulated thread: a real OS thread that runs only while it holds the baton.

The kernel drives tasks by the coroutine protocol (`send`, `throw`, `close`) and reads their traps. A
`SimThread` speaks that protocol for an OS thread: `send` hands the baton to the thread and waits until a
thread of the run gives it back with a trap, an end or an exception. So exactly one thread runs Python at a
time, every switch is the strategy's choice, and the thread keeps everything an OS thread has: its own
C-level thread state, `threading.local`, an RLock's owner, SQLite's same-thread check.

A handoff is a lock release and an acquire, one OS context switch (about 6 us here). At a scheduling point
where only threads can run, the thread asks the strategy itself (`ThreadRun.checkpoint`) and hands the baton
straight to the chosen thread, or just goes on when chosen again: no round trip through the kernel's loop.
The kernel hears of it when a thread needs the loop (to park, sleep, end, or let a coroutine task run):
that thread answers the kernel's pending `send`, which settles it (`Kernel.trapped`, `Kernel.finished`) and
returns SETTLED. A baton kept longer than `stall_s` of real time without any handoff means a thread is
blocked in something the simulator does not model (C code waiting on real I/O, a lock made before the run):
it is detached and shown to the kernel as parked on that real call, so the run ends with a report naming it.
"""

from __future__ import annotations

import _thread
import contextvars
import ctypes
import os
import sys
import sysconfig
import threading
from collections import deque
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from sim.kernel.scheduler import PARK, SETTLED
from sim.threads import affinity

if TYPE_CHECKING:
    from sim.kernel.scheduler import Kernel, Task

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
_THREAD_RUN = threading.Thread.run.__code__
_CALLERS_SHOWN = 8  # a report's stack of a thread, past its innermost line

# Every simulated thread alive in this process, by its real OS ident: the one lookup that tells the
# patched threading, time and sqlite3 whether their caller is a simulated thread.
RUNNING: dict[int, SimThread] = {}


class ThreadAbandoned(BaseException):
    """Raised at a scheduling point of a thread its run has given up on (a daemon left running when the
    program returned, or every thread of a run that stopped), so that the OS thread unwinds and ends.

    A BaseException, so that `except Exception` in the program cannot swallow it.
    """


class RealBlocking:
    """What a detached thread waits on, as a deadlock report shows it: a real call the simulator cannot see."""

    def __init__(self, stall_s: float, where: str) -> None:
        self._stall_s = stall_s
        self._where = where

    def describe(self) -> str:
        return (f"a real blocking call the simulator does not model (no scheduling point for {self._stall_s:g}s of "
                f"real time; C code waiting on I/O, or a lock made before the run) at {self._where}")

    def holders(self) -> tuple[Task, ...]:
        return ()


class Baton:
    """The kernel's end of one run's baton: the lock it waits on, and the answer the thread left there."""

    def __init__(self, kernel: Kernel, stall_s: float) -> None:
        self.kernel = kernel
        self.stall_s = stall_s
        self.handoffs = 0  # handovers between threads; a stall is a baton kept without any
        self._back = _allocate_lock()
        self._back.acquire()
        self._answer: tuple[SimThread, int, Any, Any] | None = None

    def answer(self, sim: SimThread, kind: int, first: Any, second: Any) -> None:
        """Give the baton back to the kernel, from the thread holding it."""
        self._answer = (sim, kind, first, second)
        self._back.release()

    def wait(self, resumed: SimThread) -> Any:
        """Wait for the answer to the kernel's `send` to `resumed`: its trap, its end, or SETTLED."""
        while True:
            handoffs = self.handoffs
            if self._back.acquire(True, self.stall_s):
                break
            if self.handoffs == handoffs:
                return self._detach()
        assert self._answer is not None
        sim, kind, first, second = self._answer
        self._answer = None
        if sim is not resumed:
            self._settle(sim, kind, first, second)
            return SETTLED, sim.task
        if kind == _TRAP:
            return first, second
        sim.finished = True
        if kind == _DONE:
            raise StopIteration(first)
        raise first

    def _settle(self, sim: SimThread, kind: int, first: Any, second: Any) -> None:
        """A thread other than the one the kernel resumed answers (threads handed over in between)."""
        task = sim.task
        assert task is not None
        self.kernel.current = task
        if kind == _TRAP:
            self.kernel.trapped(task, first, second)
            return
        sim.finished = True
        self.kernel.finished(task, first if kind == _DONE else None, first if kind == _RAISED else None)

    def _detach(self) -> Any:
        """The thread holding the baton kept it too long: leave it to itself, parked forever as far as the run knows."""
        task = self.kernel.current
        sim: SimThread = task.coro  # type: ignore[union-attr,assignment]  # a thread's task runs its SimThread, not a coroutine
        sim.detached = True
        frame = sim.cr_frame
        where = "an unknown line" if frame is None else f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        self.kernel.trapped(task, PARK, (RealBlocking(self.stall_s, where), _never_abort))  # type: ignore[arg-type]  # a blocking call parks the task like a kernel trap
        return SETTLED, task


class SimThread:
    """An OS thread driven through the coroutine protocol; see the module docstring."""

    def __init__(self, name: str, body: Callable[[], Any], baton: Baton, on_start: Callable[[SimThread], None]) -> None:
        self.name = name
        self.task: Task | None = None  # the kernel's task for this thread, set once spawned
        self.run: Any = None  # the ThreadRun it belongs to
        self.process = ""  # the simulated process it runs in (a target's; "" in a thread program)
        self.thread: Any = None  # the threading.Thread it carries
        self.joiners: deque[SimThread] = deque()  # threads parked in its join()
        self._body = body
        self._baton = baton
        self._on_start = on_start
        self._go = _allocate_lock()
        self._go.acquire()
        self._inbox: tuple[Any, BaseException | None] = (None, None)
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

    def callers(self) -> list[str]:
        """The program's calls that led to `cr_frame`, innermost first: the rest of a spinning thread's stack."""
        frame = self.cr_frame
        places: list[str] = []
        while frame is not None and len(places) < _CALLERS_SHOWN:
            frame = frame.f_back
            if frame is not None and is_program_file(frame.f_code.co_filename):
                places.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} in {frame.f_code.co_name}")
        return places

    def send(self, value: Any) -> Any:
        self.resume(value, None)
        return self._baton.wait(self)

    def throw(self, error: BaseException) -> Any:
        self.resume(None, error)
        return self._baton.wait(self)

    def close(self) -> None:
        """Unwind the thread by raising ThreadAbandoned at its scheduling point, and wait for it to end."""
        if not self.started or self.finished or self.detached:
            self.finished = True
            return
        self.abandoning = True
        try:
            self.throw(ThreadAbandoned())
        except (StopIteration, BaseException):
            pass

    def resume(self, value: Any, error: BaseException | None) -> None:
        """Hand this thread the baton, resuming it with `value` or raising `error` at its scheduling point."""
        self._inbox = (value, error)
        if self.started:
            self._go.release()
        else:
            self.started = True
            Carrier.take().carry(self)

    # ---- the thread's side --------------------------------------------------------------------------

    def trap(self, op: int, arg: Any) -> Any:
        """Give the baton to the kernel with a trap and wait for it; returns what the thread is resumed with."""
        if self.abandoning or self.detached:
            raise ThreadAbandoned()
        self._baton.answer(self, _TRAP, op, arg)
        return self.wait()

    def hand_to(self, other: SimThread, value: Any, error: BaseException | None) -> Any:
        """Give the baton straight to another thread of the run, and wait for it to come back."""
        self._baton.handoffs += 1
        other.resume(value, error)
        return self.wait()

    def wait(self) -> Any:
        self._go.acquire()
        value, error = self._inbox
        if error is not None:
            raise error
        return value

    def main(self, carrier: Carrier) -> None:
        """The thread's whole life on `carrier`, which goes back to the idle carriers before the baton does."""
        self.ident = _get_ident()
        RUNNING[self.ident] = self
        try:
            self._on_start(self)
            value, error = self._inbox
            if error is not None:
                raise error
            outcome = (_DONE, self._body())
        except ThreadAbandoned:
            outcome = (_DONE, None)
        except BaseException as raised:  # the thread's own failure, reported by the kernel as its task's error
            outcome = (_RAISED, raised)
        finally:
            sys.settrace(None)
            del RUNNING[self.ident]
        if not self.detached:
            carrier.release()
            self._baton.answer(self, outcome[0], outcome[1], None)


class Carrier:
    """An OS thread that carries simulated threads one after another, parked in between.

    Starting an OS thread and ending it costs about 40 us of CPU here, a third of a small program's thread; a
    parked one is handed the next simulated thread for the price of a handoff. Between two, the carrier
    forgets everything a thread leaves in its OS thread: each thread runs in a fresh context (contextvars),
    its tracer is taken off, and its thread-state dictionary is emptied (what C `threading.local` objects,
    asyncio's running loop and the like keep per thread), so that the next thread finds what a new OS
    thread would. A carrier whose thread was detached (stuck in a real blocking call) is never reused.
    """

    __slots__ = ("_go", "_sim", "_retired", "_core")

    def __init__(self) -> None:
        self._go = _allocate_lock()
        self._go.acquire()
        self._sim: SimThread | None = None
        self._retired = False
        self._core: int | None = None  # the core it is pinned to (`affinity`), None until it first is
        _start_new_thread(self._loop, ())

    @classmethod
    def take(cls) -> Carrier:
        """An idle carrier, or a new one."""
        try:
            return _IDLE.pop()
        except IndexError:
            return cls()

    def carry(self, sim: SimThread) -> None:
        self._sim = sim
        self._go.release()

    def release(self) -> None:
        """The thread it carried is over: forget its state and wait for the next (at most `_IDLE_LIMIT` wait)."""
        self._sim = None
        _thread_state().clear()
        # A carrier may come back with an exception still marked as handled: CPython 3.11 leaves it so when a trace
        # function raises while its frame handles another (a `with` block's exit, as a closed thread unwinds). It
        # would be the context of every exception the carrier raised later, and keep their runs alive through
        # it, so the carrier ends instead.
        self._retired = len(_IDLE) >= _IDLE_LIMIT or sys.exc_info()[1] is not None
        if not self._retired:
            _IDLE.append(self)  # last: from here on the kernel may hand it the next thread

    def _loop(self) -> None:
        while self._carry_one():
            pass

    def _carry_one(self) -> bool:
        """Wait to be handed a thread and run it; whether to wait for the next. The thread is let go before the
        carrier parks again: a parked carrier's locals would keep the thread's run alive until the next."""
        self._go.acquire()
        sim = self._sim
        if sim is None:
            return False
        self._core = affinity.follow(self._core)
        contextvars.Context().run(sim.main, self)
        return not (sim.detached or self._retired)


_IDLE: list[Carrier] = []
_IDLE_LIMIT = 64  # parked OS threads kept for the next runs; a program that starts more starts new ones
# CPython's PyThreadState_GetDict: the calling OS thread's thread-state dictionary, a borrowed reference (so
# read as an address: a py_object result would be taken as a new reference and released once too often).
_thread_state_address = ctypes.pythonapi.PyThreadState_GetDict
_thread_state_address.restype = ctypes.c_void_p
_thread_state_address.argtypes = []


def _thread_state() -> dict[Any, Any]:
    state: dict[Any, Any] = ctypes.cast(_thread_state_address(), ctypes.py_object).value
    return state


def current() -> SimThread | None:
    """The simulated thread calling, or None for any other thread (the kernel's, pytest's, a real one)."""
    return RUNNING.get(_get_ident())


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame outside the simulator and the standard library: the line a report should show.

    A thread whose target is a library call (`Thread(target=queue.get)`) has none: then the outermost frame
    outside the simulator, the call its `run` made (or `run` itself, around a call into the simulator's own
    `time.sleep`). A thread with no frame outside the simulator at all (the main thread joining the others once
    the program returned) is shown at its entry, the function its bootstrap runs. An alive thread always has a
    frame: the kernel takes a task without one for finished, and would leave its OS thread parked for good.
    """
    library: FrameType | None = None
    entry: tuple[FrameType | None, ...] = (None, None, None)  # the last three frames: entry, body, bootstrap
    while frame is not None:
        path = frame.f_code.co_filename
        if is_program_file(path):
            return frame
        if not path.startswith(_SIM_DIR) and (library is None or frame.f_code is not _THREAD_RUN):
            library = frame
        entry = (entry[1], entry[2], frame)
        frame = frame.f_back
    return library or entry[0]


def is_program_file(path: str) -> bool:
    """Whether a code file is the program's (or an installed package's), not the simulator's or the stdlib's.

    Known answers are kept: every lock a run makes walks its maker's stack with this (`locks._made_at`), and
    the walk from a thread the kernel starts passes a dozen frames, about 40 us a run before it was kept.
    """
    known = PROGRAM_FILES.get(path)
    if known is None:
        known = PROGRAM_FILES[path] = not (path.startswith(_SIM_DIR) or path.startswith("<")) and (
            not path.startswith(_STDLIB_DIR) or path.startswith(_PACKAGE_DIRS))
    return known


PROGRAM_FILES: dict[str, bool] = {}


def _never_abort() -> bool:
    return False
