"""One run of a thread program on a World's kernel: its threads, and the scheduling points they reach.

The program's threads are kernel tasks (`baton.SimThread`); what they do between two scheduling points is
one step. The patched threading, time and sqlite3 call the thread-side operations here: `checkpoint` (the
strategy may switch threads), `park` (block on a primitive, optionally until a virtual deadline), `sleep`,
and the clock. Everything they touch is the kernel's own state, safely, because only the thread holding the
baton runs.

A program's run ends when its main thread has run the program, the interpreter's exit hooks and joined the
non-daemon threads, as a real interpreter does at exit; daemon threads still running then are abandoned
(unwound with `ThreadAbandoned`, during which no scheduling point lets them do anything more). A thread that
ends by an exception (other than SystemExit) stops the run at once and fails it with that exception, raised
from the root task with the thread named as the task that raised it.

A target's run (`strict=False`: the system under test is a threaded program driven by coroutine tasks, such
as the hermes-agent adapter) starts threads from its coroutines (`call`), leaves a thread's exception to the
oracle (its `task.exit` says it), and may abandon every thread of one simulated process at once (a crash).
Each thread belongs to the process of the thread (or call) that started it.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from contract.events.runtime import TaskExit
from sim.kernel.errors import DivergenceError
from sim.kernel.scheduler import CHECKPOINT, PARK, SLEEP_UNTIL, Task, task_choice
from sim.kernel.sync import Event
from sim.strategies.dpor import ORDER, WILDCARD
from sim.threads.baton import Baton, SimThread, ThreadAbandoned, current
from sim.threads.patching import program_excepthook
from sim.threads.tracing import Preemption

if TYPE_CHECKING:
    from sim.core.world import World
    from sim.kernel.scheduler import Kernel, WaitTarget
    from sim.strategies.strategy import AccessObserver

TIMED_OUT = object()  # what a parked thread is resumed with when its deadline passed first
# Virtual thread idents: what `threading.get_ident()` returns in a run, the same in every process and run.
_IDENT_BASE = 0x7F00_0000_1000
_IDENT_STRIDE = 0x100_0000

MAIN_THREAD = "MainThread"
_HASH_BASE = 0x5EED_0000
_PID_BASE = 4000


class Timeout:
    """A deadline on one parked thread, on the kernel's timer heap (which fires it as it fires a cancel scope).

    It is live until the thread is woken some other way; when it fires, the thread leaves its wait queue and
    resumes with TIMED_OUT.
    """

    __slots__ = ("deadline", "cancel_called", "active", "_kernel", "_task", "_waiters", "_thread")

    def __init__(self, kernel: Kernel, thread: SimThread, waiters: deque[SimThread], deadline: float) -> None:
        self.deadline = deadline
        self.cancel_called = False
        self.active = True
        self._kernel = kernel
        self._thread = thread
        assert thread.task is not None, "a thread waits only once its task is spawned"
        self._task = thread.task
        self._waiters = waiters

    def cancel(self) -> None:
        self.cancel_called = True
        self._waiters.remove(self._thread)
        self._kernel.reschedule(self._task, TIMED_OUT)


class ThreadRun:
    """The threads of one run of a program, and the operations they perform on the kernel."""

    def __init__(self, world: World, *, preemption: Preemption, stall_s: float, strict: bool = True,
                 observer: AccessObserver | None = None) -> None:
        self.world = world
        self.observer = observer  # told what each step touches, when the strategy reduces by it (DPOR)
        self.kernel = world.kernel
        self.preemption = preemption
        self.strict = strict
        self.baton = Baton(self.kernel, stall_s)
        self.threads: list[threading.Thread] = []  # in start order
        self.failure: tuple[Task, BaseException] | None = None
        self.main_value: Any = None
        self.ended = _ProgramEnd(self)
        self.databases: dict[str, Any] = {}  # sqlite.Database by file, made as threads connect
        self.signal_handlers: dict[int, Any] = {}  # what the program's main thread set (`signals.py`)
        self._pids: dict[str, int] = {}
        self._hashes = itertools.count(_HASH_BASE)
        self._idents: Iterator[int] = (_IDENT_BASE + index * _IDENT_STRIDE for index in itertools.count())
        self._main: threading.Thread | None = None

    # ---- starting and ending threads ----------------------------------------------------------------

    def start(self, thread: threading.Thread, process: str | None = None) -> SimThread:
        """Start `thread` (a `threading.Thread` whose `start` was called in the run) as a kernel task, in
        `process` (default: the process of the thread starting it)."""
        sim = SimThread(thread.name, self._body(thread), self.baton, on_start=self._entered)
        sim.run = self
        sim.thread = thread
        starter = current()
        sim.process = process if process is not None else (starter.process if starter is not None else "")
        ident = next(self._idents)
        thread._ident = ident  # type: ignore[attr-defined]  # threading's own fields, as its bootstrap sets them
        thread._native_id = ident  # type: ignore[attr-defined]  # threading.Thread's private state, which the run drives
        thread._started._flag = True  # type: ignore[attr-defined]  # threading.Thread's private state, which the run drives
        thread._sim_thread = sim  # type: ignore[attr-defined]  # the run's mark on the program's Thread
        threading._active[ident] = thread  # type: ignore[attr-defined]  # threading's private registry of live threads
        self.threads.append(thread)
        sim.task = self.kernel.spawn(sim, thread.name, [])  # type: ignore[arg-type]  # the kernel drives a SimThread as it drives a coroutine
        sim.task.on_done = self._thread_done
        return sim

    def _body(self, thread: threading.Thread) -> Callable[[], Any]:
        """What the OS thread runs: the thread's `run`, and on its exception the `threading.excepthook` the
        program set, as a real thread's bootstrap calls it (the environment's own hook would only report what the
        run's failure reports). However it ends, the thread leaves threading's registry of live threads: one the
        kernel closed (a deadlock's, a budget's) never reaches `_thread_done`, and its entry would keep the whole
        run, and the search the run belongs to, alive for the rest of the process."""

        def body() -> Any:
            try:
                return thread.run()
            except ThreadAbandoned:
                raise
            except BaseException as error:
                hook = program_excepthook()
                if thread is not self._main and hook is not None:
                    hook(threading.ExceptHookArgs([type(error), error, error.__traceback__, thread]))
                raise
            finally:
                threading._active.pop(thread.ident, None)  # type: ignore[attr-defined]  # threading's private registry of live threads

        return body

    def start_main(self, program: Callable[[], Any]) -> SimThread:
        """The program's main thread: the program, then what an interpreter does at exit."""

        def program_then_exit() -> Any:
            value = program()
            self.exit_interpreter()
            return value

        self._main = threading.Thread.__new__(threading.Thread)
        self._main._sim_hash = self.next_hash()  # type: ignore[attr-defined]  # numbered before threading hashes it
        self._main.__init__(target=program_then_exit, name=MAIN_THREAD)  # type: ignore[misc]  # the main thread's object is made before its target is known
        self._main.run = program_then_exit  # type: ignore[method-assign]  # keep the value; Thread.run discards it
        return self.start(self._main)

    async def call(self, fn: Callable[[], Any], *, name: str, process: str) -> Any:
        """Run `fn` in a new thread of `process`, from a coroutine task, and wait for it: its value, or its
        exception raised here (an abandoned thread raises ThreadAbandoned)."""
        outcome: dict[str, Any] = {}
        finished = Event(self.kernel, f"thread {name!r}")

        def body() -> None:
            try:
                outcome["value"] = fn()
            except BaseException as error:
                outcome["error"] = error
                raise
            finally:
                finished.set()

        thread = threading.Thread(target=body, name=name, daemon=True)
        sim = self.start(thread, process)
        await finished.wait()
        if "error" in outcome:
            raise outcome["error"]
        if sim.task is not None and sim.task.done and "value" not in outcome:
            raise ThreadAbandoned()
        return outcome.get("value")

    def abandon_process(self, process: str) -> None:
        """Every thread of `process` stops where it is, as at a crash: unwound with no scheduling point left to it,
        so it writes nothing more and waits on nothing more."""
        self._abandon(lambda sim: sim.process == process)

    def is_main(self, sim: SimThread) -> bool:
        """Whether `sim` is the program's main thread (a target's run has none)."""
        return self._main is not None and sim.thread is self._main

    def pid_of(self, process: str) -> int:
        """The virtual pid of a simulated process of this run (`os.getpid()` in its threads), in first-asked order."""
        pid = self._pids.get(process)
        if pid is None:
            pid = self._pids[process] = _PID_BASE + len(self._pids)
        return pid

    def next_hash(self) -> int:
        """The next hash in the order this run makes hashed objects (see `lifecycle.run_order_hash`)."""
        return next(self._hashes)

    def exit_interpreter(self) -> None:
        """What an interpreter does when its main thread returns: threading's exit hooks, then join every
        non-daemon thread (a ThreadPoolExecutor's hook tells its idle workers to stop)."""
        for hook in reversed(list(threading._threading_atexits)):  # type: ignore[attr-defined]  # threading's private exit hooks
            hook()
        for thread in list(self.threads):
            if thread is not self._main and not thread.daemon:
                thread.join()

    def _entered(self, sim: SimThread) -> None:
        """First thing in a new OS thread: it becomes the program's thread (tracing, if lines preempt)."""
        self.touch(sim, sim.thread, ORDER, True)
        self.preemption.enter(self, sim)

    def _thread_done(self, task: Task, value: Any, error: BaseException | None) -> None:
        sim: SimThread = task.coro  # type: ignore[assignment]  # a thread's task runs its SimThread, not a coroutine
        thread = sim.thread
        self.touch(sim, thread, ORDER, True)  # its last step: a join sees everything before it
        thread._is_stopped = True
        threading._active.pop(thread.ident, None)  # type: ignore[attr-defined]  # threading's private registry of live threads
        for waiter in list(sim.joiners):
            self.wake(waiter, sim.joiners)
        failed = self.strict and error is not None and not isinstance(error, (SystemExit, ThreadAbandoned))
        if failed and self.failure is None:
            self.failure = (task, error)  # type: ignore[assignment]  # set once, with the error that ended the run
        if thread is self._main:
            self.main_value = value
        if thread is self._main or failed:
            self.abandon_rest()  # at once: a thread that never blocks must not keep the run going
            self.ended.set()

    def abandon_rest(self) -> None:
        """Unwind every thread still alive (daemons left running, or all after a failure), newest first."""
        self._abandon(lambda sim: True)

    def _abandon(self, chosen: Callable[[SimThread], bool]) -> None:
        for thread in reversed(self.threads):
            sim: SimThread = thread._sim_thread  # type: ignore[attr-defined]  # the run's mark on the program's Thread
            task = sim.task
            if task is not None and not task.done and chosen(sim):
                self.kernel.abandon(task, TaskExit(error="abandoned"))
                thread._is_stopped = True  # type: ignore[attr-defined]  # threading.Thread's private state, which the run drives
                threading._active.pop(thread.ident, None)  # type: ignore[attr-defined]  # threading's private registry of live threads

    # ---- what threads touch, for a strategy that reorders only conflicting steps ----------------------

    @property
    def shared(self) -> bool:
        """Whether a second thread has started. Until then nothing the first touches can race: a start orders the
        new thread after everything before it (the prefix where a program makes its state, its database, its
        threads), so what a step touches is not reported, nor followed line by line (`FrameWatch`)."""
        return len(self.threads) > 1

    def touch(self, sim: SimThread, target: Any, part: Any, kind: int) -> None:
        """`sim`'s current step read, wrote or added to `part` of `target` (None: all of it): a `dpor` kind, or
        whether it wrote."""
        if self.observer is not None and len(self.threads) > 1:  # `shared`, inline: a call for every access
            self.observer.access(sim.task.tid, target, part, kind)  # type: ignore[union-attr]  # set when the thread was spawned, before it can run

    def touch_everything(self, sim: SimThread) -> None:
        """`sim`'s current step did something the runtime cannot see into: it conflicts with every step."""
        if self.observer is not None and self.shared:
            self.observer.record(sim.task.tid, WILDCARD, True)  # type: ignore[union-attr]  # as in touch

    # ---- what threads do at a scheduling point ------------------------------------------------------

    def now(self) -> float:
        return self.kernel.now_s

    def checkpoint(self, sim: SimThread, label: str = "") -> None:
        """A point where the strategy may switch threads.

        What the kernel's loop would do here, the thread does itself when only threads can run: ask the
        strategy (recording the decision as the loop does), then go on if chosen again or hand the baton
        straight to the chosen thread. When no other task can run at all there is nothing to decide and the
        thread just goes on. Either way the step counts toward the run's step budget; past it, or when a
        coroutine task could run, the kernel's loop takes the trap.
        """
        if sim.abandoning:
            raise ThreadAbandoned()
        if self.observer is not None:
            self.observer.boundary()
        kernel = self.kernel
        runnable = kernel.runnable
        if kernel.extra_steps >= kernel.max_steps or not _threads_only(runnable):
            sim.trap(CHECKPOINT, label)
            return
        kernel.extra_steps += 1
        if not runnable:
            return
        task: Task = sim.task  # type: ignore[assignment]  # set when the thread was spawned, before it can run
        runnable.append(task)
        options = len(runnable)
        try:
            index = kernel.strategy.choose_task(runnable, task)
        except DivergenceError as divergence:  # the loop would stop the run; here the program could swallow it
            runnable.pop()
            kernel.divergence = kernel.divergence or divergence
            raise ThreadAbandoned() from divergence
        kernel.decisions.append(task_choice(options, index))
        chosen = runnable.pop(index)
        if chosen is task:
            return
        kernel.current = chosen
        error, chosen.throw_exc = chosen.throw_exc, None
        sim.hand_to(chosen.coro, chosen.send_value, error)  # type: ignore[arg-type]  # a thread's task runs its SimThread, not a coroutine

    def wait_for(self, sim: SimThread, awaitable: Any) -> Any:
        """Run a coroutine written for the kernel (a fault's effect, say) on the calling thread: each trap it
        yields is the thread's own (a checkpoint, a sleep, a park), and its value is returned here."""
        coroutine = awaitable.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                op, arg = coroutine.send(value) if error is None else coroutine.throw(error)
            except StopIteration as stop:
                return stop.value
            try:
                if op == CHECKPOINT:
                    self.checkpoint(sim, arg)
                    value, error = None, None
                else:
                    value, error = sim.trap(op, arg), None
            except BaseException as raised:  # ThreadAbandoned included: the coroutine unwinds with the thread
                value, error = None, raised

    def sleep(self, sim: SimThread, seconds: float) -> None:
        if seconds <= 0:
            self.checkpoint(sim, "sleep(0)")
        else:
            sim.trap(SLEEP_UNTIL, self.kernel.now_s + seconds)
            if self.observer is not None:
                self.observer.boundary()

    def park(self, sim: SimThread, target: WaitTarget, waiters: deque[SimThread], deadline: float | None = None) -> bool:
        """Block `sim` in `waiters` until `wake` picks it (True) or the virtual `deadline` passes (False)."""
        waiters.append(sim)
        timeout = None
        if deadline is not None:
            timeout = Timeout(self.kernel, sim, waiters, deadline)
            self.kernel.add_timer(deadline, timeout)
        try:
            return sim.trap(PARK, (target, _not_abortable)) is not TIMED_OUT
        finally:
            if self.observer is not None:
                self.observer.boundary()
            if timeout is not None:
                # Also when the wait unwinds (the thread abandoned as its process crashed): a deadline left live
                # would resume the ended task, and the kernel would wait for it for the stall limit of real time.
                timeout.cancel_called = True

    def wake(self, sim: SimThread, waiters: deque[SimThread]) -> None:
        """Make a parked thread of this run runnable again, taking it out of `waiters`."""
        waiters.remove(sim)
        self.kernel.reschedule(sim.task, None)  # type: ignore[arg-type]  # set when the thread was spawned, before it can park

    def wake_first(self, waiters: deque[SimThread]) -> None:
        """Wake the longest-waiting thread of this run; threads of an earlier run left in a queue are dropped."""
        while waiters:
            sim = waiters[0]
            if sim.run is self and not sim.finished:
                self.wake(sim, waiters)
                return
            waiters.popleft()


class _ProgramEnd(Event):
    """What the root task waits for: held up by the main thread, which ends the program."""

    def __init__(self, run: ThreadRun) -> None:
        super().__init__(run.kernel)
        self._run = run

    def describe(self) -> str:
        return "the end of its main thread"

    def holders(self) -> tuple[Task, ...]:
        main = self._run.threads[0]._sim_thread.task if self._run.threads else None  # type: ignore[attr-defined]  # the run's mark on the program's Thread
        return () if main is None or main.done else (main,)


def _threads_only(runnable: list[Task]) -> bool:
    """Whether every runnable task is a simulated thread (so a thread may pick among them itself)."""
    for task in runnable:
        if type(task.coro) is not SimThread:
            return False
    return True


def _not_abortable() -> bool:
    """A thread cannot be cancelled: only its wake-up or its deadline ends a wait."""
    return False
