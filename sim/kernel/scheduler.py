"""The deterministic scheduler: tasks are coroutines, resumed one step at a time by a strategy's choice.

A step is one resumption of one task until its next trap (a checkpoint, a sleep or a park). Time is
virtual: it advances to the next timer only when no task can run. Every choice between two or more
runnable tasks goes through the strategy and is recorded in the decision list, so a run is reproducible
from its seed or from that list. The hot loop is kept free of anything that is not needed per step.
"""

from __future__ import annotations

import heapq
import math
import os
import types
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from contract.events.base import Event
from contract.events.runtime import TaskExit, TaskSpawn
from contract.history import HistoryEvent
from sim.kernel.deadlock import blocked_task, wait_for
from sim.kernel.decisions import TaskChoice
from sim.kernel.errors import BudgetExceeded, Cancelled, Deadlock, DivergenceError, Interrupted, MemoryBudgetExceeded

if TYPE_CHECKING:
    from sim.kernel.cancel import CancelScope
    from sim.kernel.decisions import Decision
    from sim.kernel.nursery import Nursery
    from sim.strategies.strategy import Strategy

# Trap opcodes: what a task asks of the kernel when it yields.
CHECKPOINT = 0
SLEEP_UNTIL = 1
PARK = 2
# Not a trap: the thread runtime ran steps without the loop (threads handing over to one another) and has
# already settled every task it ran; the argument is the task that ran last.
SETTLED = 3

AbortFn = Callable[[], bool]

_KERNEL_DIR = os.path.dirname(os.path.abspath(__file__))

SLEEPING = "sleep"
DEFAULT_MAX_EVENTS = 1_000_000  # events a run may record: its memory bound, as max_steps bounds its time
CLOSE_TRIES = 1000  # closes per unfinished task: each finishes one coroutine of its chain or unwinds one await

# Task choices among fewer than _INTERNED tasks, built once: recording a choice allocates nothing.
_INTERNED = 64
_CHOICES = [[TaskChoice(options, index) for index in range(options)] for options in range(_INTERNED)]


def task_choice(options: int, index: int) -> TaskChoice:
    """The decision that option `index` of `options` ran, interned when small (as the loop records them)."""
    return _CHOICES[options][index] if options < _INTERNED else TaskChoice(options, index)


class WaitTarget(Protocol):
    """What a parked task waits on, as deadlock reports show it: a name, and the tasks that hold it."""

    def describe(self) -> str:
        """What it is, by name: `lock 'accounts'`."""

    def holders(self) -> Sequence[Task]:
        """The tasks that must act before a waiter can go on (a lock's owner, a nursery's children)."""


_PLAIN_CHECKPOINT = (CHECKPOINT, "")


@types.coroutine
def checkpoint_trap(label: str = "") -> Any:
    """Yield to the scheduler; the task stays runnable. Cancellation is delivered here."""
    return (yield (CHECKPOINT, label) if label else _PLAIN_CHECKPOINT)


@types.coroutine
def sleep_until_trap(deadline_s: float) -> Any:
    return (yield (SLEEP_UNTIL, deadline_s))


@types.coroutine
def park_trap(waiting_on: WaitTarget | str, abort: AbortFn) -> Any:
    """Block until a primitive reschedules this task; `abort` undoes the wait when cancellation arrives.

    `abort` returns True if the task may be woken with Cancelled now, False if it must keep waiting.
    """
    return (yield (PARK, (waiting_on, abort)))


class Task:
    """A simulated task: a coroutine plus the cancel scopes it runs under."""

    __slots__ = (
        "tid", "name", "coro", "scopes", "nursery", "on_done",
        "send_value", "throw_exc", "waiting_on", "abort", "done", "sleep_seq",
    )

    def __init__(self, tid: int, name: str, coro: Coroutine[Any, Any, Any], scopes: list[CancelScope]) -> None:
        self.tid = tid
        self.name = name
        self.coro = coro
        self.scopes = scopes
        self.nursery: Nursery | None = None
        self.on_done: Callable[[Task, Any, BaseException | None], None] | None = None
        self.send_value: Any = None
        self.throw_exc: BaseException | None = None
        self.waiting_on: WaitTarget | str = ""
        self.abort: AbortFn | None = None
        self.done = False
        self.sleep_seq = 0

    def effectively_cancelled(self) -> bool:
        """Whether the innermost unshielded run of its scopes contains a cancelled one."""
        for scope in reversed(self.scopes):
            if scope.cancel_called:
                return True
            if scope.shield:
                return False
        return False

    def callers(self) -> list[str]:
        """Where the place `where` names was called from, innermost first: a thread's stack (a coroutine's
        chain of awaits is already in `where`)."""
        callers = getattr(self.coro, "callers", None)
        return callers() if callers is not None else []

    def where(self) -> str:
        """File and line of the innermost await outside the kernel that this task is suspended in."""
        frame_owner: Any = self.coro
        location = "not started"
        while frame_owner is not None:
            frame = getattr(frame_owner, "cr_frame", None) or getattr(frame_owner, "gi_frame", None)
            if frame is not None and not frame.f_code.co_filename.startswith(_KERNEL_DIR):
                location = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} in {frame.f_code.co_name}"
            frame_owner = getattr(frame_owner, "cr_await", None) or getattr(frame_owner, "gi_yieldfrom", None)
        return location


class Kernel:
    """Runs tasks under a strategy, on a virtual clock, within step and time budgets."""

    def __init__(
        self,
        strategy: Strategy,
        *,
        max_steps: int = 1_000_000,
        max_time_s: float = math.inf,
        max_events: int = DEFAULT_MAX_EVENTS,
        on_clock_advance: Callable[[float], None] | None = None,
    ) -> None:
        self.strategy = strategy
        self.max_steps = max_steps
        self.max_time_s = max_time_s
        self.max_events = max_events
        self.on_clock_advance = on_clock_advance
        self.now_s = 0.0
        self.steps = 0
        self.extra_steps = 0  # steps the thread runtime ran without the loop (see SETTLED)
        self.divergence: DivergenceError | None = None  # a replay that stopped fitting where the loop could not see it
        self.current: Task | None = None
        self.runnable: list[Task] = []
        self.alive: dict[int, Task] = {}
        self.decisions: list[Decision] = []
        self.task_errors: list[tuple[str, BaseException]] = []  # (task, what it raised), in the order tasks ended
        self.cancelled_scopes = 0
        self.history: list[HistoryEvent] = []
        self.listeners: list[Callable[[HistoryEvent], None]] = []
        self.on_idle: Callable[[], bool] | None = None
        self.interrupted = False
        self._steps_allowed = max_steps  # max_steps until `interrupt` or `exceed` lowers it
        self._exceeded: str | None = None  # the memory bound the run passed
        self._timers: list[tuple[float, int, Any]] = []
        self._timer_seq = 0
        self._next_tid = 0

    # ---- tasks ---------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str, scopes: list[CancelScope]) -> Task:
        task = Task(self._next_tid, name, coro, scopes)
        self._next_tid += 1
        self.alive[task.tid] = task
        self.runnable.append(task)
        self.record(TaskSpawn(), name)
        return task

    def abandon(self, task: Task, exit_event: Event) -> None:
        """End a task that will never be resumed (a thread its program left running when it returned): it
        leaves the run queue and its timers, its coroutine is closed as that task, and `exit_event` is recorded."""
        if task.done:
            return
        task.done = True
        del self.alive[task.tid]
        if task in self.runnable:
            self.runnable.remove(task)
        task.sleep_seq = 0
        task.abort = None
        self.record(exit_event, task.name)
        previous, self.current = self.current, task
        try:
            task.coro.close()
        finally:
            self.current = previous

    def reschedule(self, task: Task, value: Any = None, exc: BaseException | None = None) -> None:
        """Make a parked task runnable again, resuming it with `value` or throwing `exc` into it."""
        task.abort = None
        task.waiting_on = ""
        task.sleep_seq = 0
        task.send_value = value
        task.throw_exc = exc
        self.runnable.append(task)

    def trapped(self, task: Task, op: int, arg: Any) -> None:
        """Take a trap of a task the loop did not resume itself (one the thread runtime handed the run to)."""
        if op == CHECKPOINT:
            if self.cancelled_scopes and task.effectively_cancelled():
                task.throw_exc = Cancelled()
            self.runnable.append(task)
        elif op == SLEEP_UNTIL:
            self._trap_sleep(task, arg)
        else:
            self._trap_park(task, arg[0], arg[1])

    def finished(self, task: Task, value: Any, exc: BaseException | None) -> None:
        """A task the loop did not resume itself has ended."""
        self._finish(task, value, exc)

    def _finish(self, task: Task, value: Any, exc: BaseException | None) -> None:
        task.done = True
        del self.alive[task.tid]
        if exc is not None:
            self.task_errors.append((task.name, exc))
        self.record(TaskExit(error=None if exc is None else type(exc).__name__), task.name)
        if task.on_done is not None:
            task.on_done(task, value, exc)

    def record(self, event: Event, task: str) -> None:
        """Append one typed event to the run's history, stamped with virtual time, and tell the listeners.

        Listeners (fault triggers, invariant checkers) see each event as it happens, which is how safety
        properties are checked after every step that changed something observable.
        """
        recorded = HistoryEvent(len(self.history), self.now_s, task, event)
        self.history.append(recorded)
        for listener in self.listeners:
            listener(recorded)
        if recorded.seq + 1 == self.max_events:
            self.exceed(f"event budget of {self.max_events} events exhausted (the run's memory bound: it keeps its whole history)")

    def current_name(self) -> str:
        return "kernel" if self.current is None else self.current.name

    # ---- cancellation --------------------------------------------------------------------------

    def deliver_cancellation(self) -> None:
        """Wake every parked task that a cancelled scope now covers, if its wait can be aborted."""
        for task in list(self.alive.values()):
            abort = task.abort
            if abort is not None and task.effectively_cancelled():
                task.abort = None
                if abort():
                    self.reschedule(task, exc=Cancelled())

    # ---- timers --------------------------------------------------------------------------------

    def add_timer(self, deadline_s: float, target: Any) -> int:
        """`target` is a parked Task to wake, or a CancelScope whose deadline fires."""
        self._timer_seq += 1
        heapq.heappush(self._timers, (deadline_s, self._timer_seq, target))
        return self._timer_seq

    def _advance_clock(self) -> bool:
        """Jump to the next live timer and fire everything due then; False if no timer is pending."""
        timers = self._timers
        while timers:
            deadline, seq, target = timers[0]
            if self._timer_is_live(deadline, seq, target):
                break
            heapq.heappop(timers)
        else:
            return False
        if deadline > self.max_time_s:
            raise BudgetExceeded(
                f"virtual-time budget of {self.max_time_s:g}s exhausted (next timer at {deadline:g}s)",
                self.blocked_report(),
            )
        self.now_s = deadline
        self.current = None
        if self.on_clock_advance is not None:
            self.on_clock_advance(deadline)
        while timers and timers[0][0] <= deadline:
            _, seq, target = heapq.heappop(timers)
            if not self._timer_is_live(deadline, seq, target):
                continue
            if isinstance(target, Task):
                self.reschedule(target)
            else:
                target.cancel()
        return True

    @staticmethod
    def _timer_is_live(deadline: float, seq: int, target: Any) -> bool:
        if isinstance(target, Task):
            return target.sleep_seq == seq
        return target.deadline == deadline and not target.cancel_called and target.active

    # ---- the loop ------------------------------------------------------------------------------

    def run(self) -> None:
        """Run until every task has finished; raise Deadlock or BudgetExceeded instead of hanging.

        This loop is the simulator's speed limit: locals instead of attribute lookups, no allocation for a
        task choice (the decisions are interned), and nothing per step that a report can compute later. The
        strategy is told which task ran the previous step (`task`, None once the clock has moved); if that
        task can go on it is the last of `runnable`, since it re-queued itself after everything it woke.
        """
        runnable = self.runnable
        choose = self.strategy.choose_task
        decisions = self.decisions
        steps = self.steps
        task: Task | None = None
        try:
            while True:
                if not runnable:
                    if not self.alive:
                        return
                    if not self._advance_clock() and not self._idle():
                        raise Deadlock("deadlock: no task can run and no timer is pending", *wait_for(self.alive.values()))
                    task = None
                    continue
                if steps >= self.max_steps:  # read each step: `interrupt` and `exceed` lower it
                    raise self._out_of_budget()
                steps += 1
                options = len(runnable)
                if options > 1:
                    index = choose(runnable, task)
                    decisions.append(_CHOICES[options][index] if options < _INTERNED else TaskChoice(options, index))
                    task = runnable.pop(index)
                else:
                    task = runnable.pop()
                self.current = task
                exc = task.throw_exc
                try:
                    if exc is None:
                        op, arg = task.coro.send(task.send_value)
                    else:
                        task.throw_exc = None
                        op, arg = task.coro.throw(exc)
                except StopIteration as stop:
                    self._finish(task, stop.value, None)
                    continue
                except BaseException as error:
                    if (interrupt := _interrupt_in(error)) is not None:
                        raise interrupt from None
                    self._finish(task, None, error)
                    continue
                if op == 0:  # CHECKPOINT
                    if self.cancelled_scopes and task.effectively_cancelled():
                        task.throw_exc = Cancelled()
                    runnable.append(task)
                elif op == 1:  # SLEEP_UNTIL
                    self._trap_sleep(task, arg)
                elif op == 2:  # PARK
                    self._trap_park(task, arg[0], arg[1])
                else:  # SETTLED
                    task = arg
        finally:
            self.steps = steps
            self.current = None

    def _out_of_budget(self) -> BaseException:
        """Why the step loop stops: an interrupt, a memory bound passed, or the step budget."""
        if self.interrupted:
            return Interrupted()
        if self._exceeded is not None:
            return MemoryBudgetExceeded(self._exceeded, self.blocked_report())
        return BudgetExceeded(f"step budget of {self._steps_allowed} steps exhausted", self.blocked_report())

    def exceed(self, bound: str) -> None:
        """End the run at its next step as a budget overrun: it passed a memory bound (`bound` says which). Called
        as the bound is passed, maybe inside a task, which must not be the place the run is stopped."""
        if self._exceeded is None:
            self._exceeded = bound
            self.max_steps = -1

    def interrupt(self) -> None:
        """End the run at its next step with Interrupted, from outside (a signal handler): never inside a task."""
        self.interrupted = True
        self.max_steps = -1

    def _idle(self) -> bool:
        """Nothing can run and no timer is pending: ask the owner whether it can end some waits."""
        self.current = None
        return self.on_idle is not None and self.on_idle()

    def _trap_sleep(self, task: Task, deadline: float) -> None:
        if self.cancelled_scopes and task.effectively_cancelled():
            task.throw_exc = Cancelled()
            self.runnable.append(task)
        elif deadline <= self.now_s:
            self.runnable.append(task)
        else:
            task.waiting_on = SLEEPING
            task.abort = _ALWAYS_ABORTABLE
            task.sleep_seq = self.add_timer(deadline, task)

    def _trap_park(self, task: Task, waiting_on: WaitTarget | str, abort: AbortFn) -> None:
        task.waiting_on = waiting_on
        task.abort = abort
        if self.cancelled_scopes and task.effectively_cancelled():
            task.abort = None
            if abort():
                self.reschedule(task, exc=Cancelled())

    # ---- reports -------------------------------------------------------------------------------

    def blocked_report(self) -> list[str]:
        """One line per unfinished task: its name, what it waits on (and who holds that) and where it is suspended."""
        lines = []
        for task in sorted(self.alive.values(), key=lambda t: t.tid):
            if task in self.runnable:
                lines.append(f"  task {task.name!r} runnable at {task.where()}")
                lines.extend(f"    called from {place}" for place in task.callers())
            elif task.waiting_on == SLEEPING:
                deadline = next((entry[0] for entry in self._timers if entry[1] == task.sleep_seq), math.inf)
                lines.append(f"  task {task.name!r} waits on sleep until {deadline:g}s at {task.where()}")
            else:
                lines.append(blocked_task(task).line())
        return lines

    def close_unfinished(self) -> None:
        """Close the coroutines of tasks a failed run left behind, so they do not leak warnings.

        The innermost awaited coroutine is closed first, then the next one out: a `finally` that awaits cannot
        run once the kernel has stopped, and its await suspends the coroutine again ("coroutine ignored
        GeneratorExit"). Closed from the outside, that error would arise inside CPython's close of the chain,
        which prints it ("Exception ignored in"); closed from the inside, each one reaches this loop, and the
        next close unwinds past that await, until the task's coroutine is done.
        """
        for task in list(self.alive.values()):
            self.current = task  # cleanup that releases the task's own locks must run as that task
            for _ in range(CLOSE_TRIES):
                if _finished(task.coro):
                    break
                try:
                    _innermost(task.coro).close()
                except BaseException:  # an await in a finally suspended it again, or the finally raised
                    pass
        self.current = None
        self.alive.clear()
        self.runnable.clear()


def _finished(awaitable: Any) -> bool:
    """A coroutine or generator that has returned or was closed (anything else awaited counts as done)."""
    return getattr(awaitable, "cr_frame", getattr(awaitable, "gi_frame", None)) is None


def _innermost(coro: Any) -> Any:
    """The deepest unfinished coroutine or generator in the chain `coro` awaits."""
    while (inner := getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)) is not None and not _finished(inner):
        coro = inner
    return coro


def _interrupt_in(error: BaseException) -> KeyboardInterrupt | None:
    """A KeyboardInterrupt that ended a task (alone or in exception groups): the user's, not the task's error."""
    if isinstance(error, KeyboardInterrupt):
        return error
    if isinstance(error, BaseExceptionGroup):
        return next(filter(None, map(_interrupt_in, error.exceptions)), None)
    return None


def _always_abortable() -> bool:
    return True


_ALWAYS_ABORTABLE = _always_abortable
