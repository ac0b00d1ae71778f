"""`threading.Thread` in a run: start, join, is_alive, and who the current thread is.

`Thread.start` called by a simulated thread makes the new thread a task of the run (`ThreadRun.start`) and
is a scheduling point, so the new thread may run first; `join` parks until the thread's task ends or a
virtual timeout passes. The thread's `ident` and `native_id`, and `get_ident()` in it, are virtual (the
same in every run and process: a program that keys a dict or a set by ident must not see the OS's values),
and `threading.current_thread()` finds it by that ident, so logging's `threadName` is the program's name for
it. `main_thread()`, `enumerate()` and `active_count()` answer for the run's threads. Called by any other
thread, each is the real one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sim.core.world import in_coroutine_task
from sim.strategies.dpor import ORDER
from sim.threads.baton import SimThread, current
from sim.threads.unmodelled import NotSimulated


class JoinWait:
    """A thread parked in `join`, as a deadlock report shows it: the thread it waits for holds it up."""

    def __init__(self, target: SimThread) -> None:
        self._target = target

    def describe(self) -> str:
        return f"thread {self._target.name!r} to end (join)"

    def holders(self) -> tuple[Any, ...]:
        task = self._target.task
        return () if task is None or task.done else (task,)


def _simulated(thread: threading.Thread) -> SimThread | None:
    return getattr(thread, "_sim_thread", None)


def run_order_hash(self: object) -> int:
    """`__hash__` for objects whose hash a program's sets iterate by (threads, futures): the order the run
    made them in, where a simulated thread made them; their address otherwise. An address differs between
    processes, so a set's order (a ThreadPoolExecutor joins its `_threads` set in that order) would too."""
    order = self.__dict__.get("_sim_hash")
    return object.__hash__(self) if order is None else order


def numbered_init(previous: Callable[..., None]) -> Callable[..., None]:
    """`__init__` that first numbers the object in its run's order (see `run_order_hash`)."""

    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        sim = current()
        if sim is not None:
            self._sim_hash = sim.run.next_hash()  # type: ignore[attr-defined]  # set on the program's objects, not declared by their classes
        previous(self, *args, **kwargs)

    return __init__


def start(previous: Callable[[threading.Thread], None]) -> Callable[[threading.Thread], None]:
    def start(self: threading.Thread) -> None:
        sim = current()
        if sim is None and in_coroutine_task():
            raise NotSimulated(f"an async program started a real thread ({self.name}): a program whose own code starts "
                               "threads is a thread program, a plain `def main()` (sim.explore runs it on the thread "
                               "runtime); rt.run_sync_in_worker runs a blocking call inline")
        if sim is None:
            previous(self)
            return
        if not self._initialized:  # type: ignore[attr-defined]  # threading.Thread's private state
            raise RuntimeError("thread.__init__() not called")
        _refuse_if_from_elsewhere(self, sim)
        if self._started.is_set():  # type: ignore[attr-defined]  # threading.Thread's private state
            raise RuntimeError("threads can only be started once")
        sim.run.start(self)
        sim.run.touch(sim, self, ORDER, True)  # the new thread's first step comes after this one
        sim.run.checkpoint(sim, "start")

    return start


def _refuse_if_from_elsewhere(thread: threading.Thread, sim: SimThread) -> None:
    """A Thread made before the run (or started in an earlier one) and started in this run: each run would find it
    in another state (the second run's start would raise), so it is a usage error, named."""
    made = thread.__dict__.get("_sim_hash") is not None
    earlier = _simulated(thread)
    if not made or (earlier is not None and earlier.run is not sim.run):
        raise NotSimulated(f"thread {thread.name!r} was made outside this run and started in it: a run starts afresh, so "
                           "make the program's threads inside the program")


def join(previous: Callable[..., None]) -> Callable[..., None]:
    def join(self: threading.Thread, timeout: float | None = None) -> None:
        sim, target = current(), _simulated(self)
        if sim is not None and target is None and threading.Thread.is_alive(self):
            raise NotSimulated(f"thread {self.name!r} runs for real, outside the run (it was started before it): joining "
                               "it would wait in real time")
        if sim is None or target is None:
            previous(self, timeout)
            return
        if not self._initialized:  # type: ignore[attr-defined]  # threading.Thread's private state
            raise RuntimeError("Thread.__init__() not called")
        if not self._started.is_set():  # type: ignore[attr-defined]  # threading.Thread's private state
            raise RuntimeError("cannot join thread before it is started")
        if target is sim:
            raise RuntimeError("cannot join current thread")
        run = sim.run
        run.checkpoint(sim, "join")
        if target.run is run and target.task is not None and not target.task.done:
            deadline = None if timeout is None else run.now() + max(timeout, 0.0)
            run.park(sim, JoinWait(target), target.joiners, deadline)
        run.touch(sim, self, ORDER, False)  # what comes after a join comes after the thread's end

    return join


def is_alive(previous: Callable[[threading.Thread], bool]) -> Callable[[threading.Thread], bool]:
    def is_alive(self: threading.Thread) -> bool:
        target = _simulated(self)
        if target is None or current() is None:
            return previous(self)
        return target.task is not None and not target.task.done

    return is_alive


def get_ident(previous: Callable[[], int]) -> Callable[[], int]:
    def get_ident() -> int:
        sim = current()
        return previous() if sim is None else sim.thread._ident

    return get_ident


def getpid(previous: Callable[[], int]) -> Callable[[], int]:
    """`os.getpid`: a simulated thread's process has a virtual pid (the real one differs in every process)."""

    def getpid() -> int:
        sim = current()
        return previous() if sim is None else sim.run.pid_of(sim.process)

    return getpid


def main_thread(previous: Callable[[], threading.Thread]) -> Callable[[], threading.Thread]:
    def main_thread() -> threading.Thread:
        sim = current()
        return previous() if sim is None else sim.run.threads[0]

    return main_thread


def enumerate_threads(previous: Callable[[], list[threading.Thread]]) -> Callable[[], list[threading.Thread]]:
    def enumerate() -> list[threading.Thread]:
        sim = current()
        if sim is None:
            return previous()
        return [thread for thread in sim.run.threads if thread.is_alive()]

    return enumerate


def active_count(previous: Callable[[], int]) -> Callable[[], int]:
    def active_count() -> int:
        sim = current()
        return previous() if sim is None else len(threading.enumerate())

    return active_count
