"""`threading.Lock` and `threading.RLock` for simulated threads, over the real locks.

Each wraps a real `_thread` lock, which stays the one truth about who holds it: a simulated thread takes it
without blocking or, when it is taken, parks in the kernel until a release wakes it, then tries again; any
other thread (the kernel's, pytest's, a thread started before the run) uses the real lock as usual. So a lock
made during a run still works after it, and everything `threading` builds on locks (Condition, Event,
Semaphore, BoundedSemaphore, Barrier, Timer, `queue.Queue`, `concurrent.futures`) runs unmodified on these.

A blocking acquire is a scheduling point before it tries, so another thread may take the lock first; a
failed non-blocking try is one after it, so a spinning `acquire(False)` loop lets the holder go on. Timeouts
are virtual. Locks that `threading` allocates for its own waiters (`_allocate_lock`, one per
`Condition.wait`) are not scheduling points of their own: the Condition's lock already is.
"""

from __future__ import annotations

import _thread
import os
import sys
from collections import deque
from types import FrameType
from typing import Any

from sim.strategies.dpor import ACQUIRE, ORDER
from sim.threads.baton import PROGRAM_FILES, SimThread, current, is_program_file

_allocate_lock = _thread.allocate_lock
_RealRLock = _thread.RLock
# The library files whose objects a thread may wait in (the frames a report looks through for what it called).
_LIBRARY_FILES = frozenset(sys.modules[name].__file__ or "" for name in ("threading", "queue", "concurrent.futures._base"))
_THREAD_RUN = sys.modules["threading"].Thread.run.__code__

# What a thread parked in the library's code is waiting for, named by the outermost library object it called.
_WAITS = {"Condition": "a Condition", "Event": "an Event", "Semaphore": "a Semaphore",
          "BoundedSemaphore": "a BoundedSemaphore", "Barrier": "a Barrier", "Queue": "a Queue",
          "LifoQueue": "a LifoQueue", "PriorityQueue": "a PriorityQueue", "_PySimpleQueue": "a SimpleQueue",
          "Future": "a Future"}
# Where each of those keeps the simulated lock that says where the program made it.
_LOCK_PATHS = (("_lock",), ("_cond", "_lock"), ("mutex",), ("_condition", "_lock"), ("_count", "_cond", "_lock"))


def _check_timeout(blocking: bool, timeout: float) -> None:
    """The argument errors of the real `acquire`, with its messages."""
    if not blocking and timeout != -1:
        raise ValueError("can't specify a timeout for a non-blocking call")
    if timeout < 0 and timeout != -1:
        raise ValueError("timeout value must be a non-negative number")


def _made_at() -> str:
    """The program line that made a lock (skipping threading's and queue's frames), for deadlock reports.

    Every Thread, Event and Condition a run makes makes a lock, and a call made in a simulated thread is a
    call event of its tracer: so the walk looks known files up inline and calls nothing else per frame."""
    frame: FrameType | None = sys._getframe(2)
    known = PROGRAM_FILES
    while frame is not None:
        path = frame.f_code.co_filename
        program = known.get(path)
        if program or program is None and is_program_file(path):
            return f"{path.rpartition(os.sep)[2]}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def _called_construct(frame: Any) -> Any:
    """The library object whose method the program called to get here (a Queue, a Condition, an Event, ...): the
    outermost known one among the library frames just above the simulator's own. A thread's `run` is where the
    program's call begins, not an object it waits on."""
    while frame is not None and frame.f_code.co_filename not in _LIBRARY_FILES:
        frame = frame.f_back
    construct = None
    while frame is not None and frame.f_code.co_filename in _LIBRARY_FILES and frame.f_code is not _THREAD_RUN:
        found = frame.f_locals.get("self")
        if type(found).__name__ in _WAITS:
            construct = found
        frame = frame.f_back
    return construct


def _made_at_of(construct: Any) -> str:
    """Where the program made a library object, read off the simulated lock inside it."""
    for path in _LOCK_PATHS:
        value = construct
        for name in path:
            value = getattr(value, name, None)
        made = getattr(value, "_made_at", "")
        if made:
            return made
    return ""


class _Wait:
    """One thread's wait on a lock, as a deadlock report shows it: the lock, or what threading built on it."""

    def __init__(self, lock: _SimLockBase, waiter: SimThread) -> None:
        self._lock = lock
        self._waiter = waiter

    def describe(self) -> str:
        if self._lock.owner is not self._waiter:
            return self._lock.describe()
        construct = _called_construct(sys._current_frames().get(self._waiter.ident or 0))
        kind = _WAITS.get(type(construct).__name__)
        if kind is None:
            return f"{self._lock.describe()}, which it holds itself"
        made = _made_at_of(construct)
        return f"{kind} made at {made}" if made else kind

    def holders(self) -> tuple[Any, ...]:
        owner = self._lock.owner
        if owner is None or owner is self._waiter or owner.task is None:
            return ()
        return (owner.task,)


class _SimLockBase:
    """What Lock and RLock share: the real lock, the waiters, the owner, waiting and waking."""

    _preempts = True

    def __init__(self, real: Any) -> None:
        self._real = real
        self._waiters: deque[SimThread] = deque()
        self.owner: SimThread | None = None
        self._made_at = _made_at() if self._preempts else ""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        sim = current()
        if sim is None:
            return self._real.acquire(blocking, timeout)
        _check_timeout(blocking, timeout)
        run = sim.run
        if blocking and self._preempts:
            run.checkpoint(sim, "acquire")
        if self._real.acquire(False):
            return self._taken(sim)
        run.touch(sim, self, ACQUIRE, False)
        if not blocking or timeout == 0:
            run.checkpoint(sim, "acquire failed")
            return False
        deadline = None if timeout < 0 else run.now() + timeout
        while run.park(sim, _Wait(self, sim), self._waiters, deadline):
            if self._real.acquire(False):
                return self._taken(sim)
        return False

    def _taken(self, sim: SimThread) -> bool:
        self.owner = sim
        sim.run.touch(sim, self, ACQUIRE, True)
        return True

    @classmethod
    def adopt(cls, real: Any, name: str) -> _SimLockBase:
        """A simulated lock over an existing real one (a module-level lock made before the batch): one lock still."""
        lock = cls.__new__(cls)
        _SimLockBase.__init__(lock, real)
        lock._made_at = name
        return lock

    def _released(self) -> None:
        """The real lock is free again: the longest waiter of the releasing run may try for it."""
        self.owner = None
        sim = current()
        if sim is not None:
            sim.run.touch(sim, self, ORDER, True)  # the next acquire comes after; acquires race each other
        if self._waiters:
            run = sim.run if sim is not None else self._waiters[0].run
            run.wake_first(self._waiters)

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        made = f" made at {self._made_at}" if self._made_at else ""
        return f"a {type(self).__name__}{made}"

    def holders(self) -> tuple[Any, ...]:
        return () if self.owner is None or self.owner.task is None else (self.owner.task,)

    def _at_fork_reinit(self) -> None:
        self._real._at_fork_reinit()
        self._waiters.clear()
        self.owner = None


class Lock(_SimLockBase):
    """`threading.Lock` in a run (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(_allocate_lock())

    def release(self) -> None:
        self._real.release()
        self._released()

    def locked(self) -> bool:
        return self._real.locked()

    acquire_lock = _SimLockBase.acquire
    release_lock = release
    locked_lock = locked

    def __repr__(self) -> str:
        return f"<{'locked' if self.locked() else 'unlocked'} simulated lock{' made at ' + self._made_at if self._made_at else ''}>"


class WaiterLock(Lock):
    """The lock threading allocates for one Condition waiter: acquiring it is not a scheduling point."""

    _preempts = False


class RLock(_SimLockBase):
    """`threading.RLock` in a run: the real RLock counts recursion and knows its owner (an OS thread each)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(_RealRLock(*args, **kwargs))

    def release(self) -> None:
        self._real.release()
        if not self._real._is_owned():
            self._released()

    def _is_owned(self) -> bool:
        return self._real._is_owned()

    def _release_save(self) -> Any:
        """Condition.wait gives the lock up whatever the recursion depth, and restores it after."""
        state = self._real._release_save()
        self._released()
        return state

    def _acquire_restore(self, state: Any) -> None:
        sim = current()
        if sim is None:
            self._real._acquire_restore(state)
            return
        self.acquire()
        self._real._release_save()  # free the real lock for the restore, which then cannot block: no switch between
        self._real._acquire_restore(state)
        self.owner = sim

    def __repr__(self) -> str:
        return f"<simulated RLock{' made at ' + self._made_at if self._made_at else ''} {self._real!r}>"
