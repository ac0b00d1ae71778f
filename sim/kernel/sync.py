"""Synchronisation primitives on the kernel: Event, an owned Lock, Condition, Barrier, Semaphore, channels.

Waiters are served first come, first served; a wait is abandoned cleanly when its task is cancelled.
Every blocking call is also a checkpoint, as in trio, so cancellation is seen even when it does not block.
Each primitive may be given a name and says what it is and who holds it (`describe`, `holders`), which is
what a deadlock report shows for the tasks waiting on it.
"""

from __future__ import annotations

import types
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sim.kernel.cancel import CancelScope
from sim.kernel.errors import EndOfChannel
from sim.kernel.scheduler import CHECKPOINT, PARK, Task, checkpoint_trap

if TYPE_CHECKING:
    from sim.kernel.scheduler import Kernel, WaitTarget


class _WaitQueue:
    """FIFO of parked tasks; each entry can be withdrawn by its task's cancellation.

    What the tasks wait on is passed to `park` rather than kept here: a queue pointing back at its primitive
    would make every event and lock a reference cycle, left for the garbage collector instead of freed.
    """

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._waiters: deque[Task] = deque()

    @types.coroutine
    def park(self, target: WaitTarget | str) -> Any:
        """Wait in line on `target` (a bare generator, not a coroutine: one frame fewer on every contended wait)."""
        task = self._kernel.current
        assert task is not None
        waiters = self._waiters
        waiters.append(task)

        def abort() -> bool:
            waiters.remove(task)
            return True

        return (yield (PARK, (target, abort)))

    def wake_one(self, value: Any = None) -> Task | None:
        if not self._waiters:
            return None
        task = self._waiters.popleft()
        self._kernel.reschedule(task, value)
        return task

    def wake_all(self, value: Any = None) -> None:
        while self._waiters:
            self._kernel.reschedule(self._waiters.popleft(), value)

    def move_to(self, other: _WaitQueue, count: int, target: WaitTarget) -> None:
        """Move up to `count` waiters, still parked, to the back of `other`, now waiting on `target`."""
        for _ in range(min(count, len(self._waiters))):
            task = self._waiters.popleft()
            other._waiters.append(task)
            task.waiting_on = target
            task.abort = _withdrawal(other._waiters, task)

    def __len__(self) -> int:
        return len(self._waiters)


def _withdrawal(waiters: deque[Task], task: Task) -> Callable[[], bool]:
    def abort() -> bool:
        waiters.remove(task)
        return True

    return abort


def _named(kind: str, name: str | None) -> str:
    return f"{kind} {name!r}" if name else f"an unnamed {kind}"


class Event:
    """A flag tasks wait for; `clear` resets it. Its wait queue is made only when someone waits (events are cheap)."""

    def __init__(self, kernel: Kernel, name: str | None = None) -> None:
        self._kernel = kernel
        self._name = name
        self._flag = False
        self._waiters: _WaitQueue | None = None

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            if self._waiters is not None:
                self._waiters.wake_all()

    def clear(self) -> None:
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def wait(self) -> Awaitable[Any]:
        if self._flag:
            return checkpoint_trap()
        if self._waiters is None:
            self._waiters = _WaitQueue(self._kernel)
        return self._waiters.park(self)

    def describe(self) -> str:
        return _named("event", self._name)

    def holders(self) -> tuple[Task, ...]:
        return ()


class Lock:
    """A lock with an owner: ownership is handed directly to the next waiter on release."""

    def __init__(self, kernel: Kernel, name: str | None = None) -> None:
        self._kernel = kernel
        self._name = name
        self._owner: Task | None = None
        self._waiters = _WaitQueue(kernel)

    def acquire(self) -> Awaitable[Any]:
        task = self._kernel.current
        if self._owner is task:
            raise RuntimeError(f"attempt to re-acquire {self.describe()}, which this task already holds")
        if self._owner is None:
            self._owner = task
            return self._checkpoint_holding()
        return self._waiters.park(self)

    @types.coroutine
    def _checkpoint_holding(self) -> Any:
        """The checkpoint after taking a free lock; if cancelled there, give the lock back first."""
        try:
            yield (CHECKPOINT, "")
        except BaseException:
            self.release()
            raise

    def try_acquire(self) -> bool:
        if self._owner is not None:
            return False
        self._owner = self._kernel.current
        return True

    def release(self) -> None:
        if self._owner is not self._kernel.current:
            raise RuntimeError(f"can't release {self.describe()}: this task does not own it")
        self._owner = self._waiters.wake_one()

    def locked(self) -> bool:
        return self._owner is not None

    def held_by_current(self) -> bool:
        return self._owner is not None and self._owner is self._kernel.current

    def describe(self) -> str:
        return _named("lock", self._name)

    def holders(self) -> tuple[Task, ...]:
        return () if self._owner is None else (self._owner,)

    __aenter__ = acquire

    def __aexit__(self, *exc: object) -> Awaitable[None]:
        self.release()
        return _READY


class _Ready:
    """An awaitable that completes at once without a frame: `async with lock` pays nothing on exit."""

    def __await__(self) -> Any:
        return iter(())


_READY = _Ready()


class Condition:
    """A condition variable over an owned lock, with trio's semantics.

    `wait` releases the lock, parks until notified, and returns holding the lock again: a notify moves the
    waiter, still parked, into the lock's queue, so it wakes only when the lock is handed to it. A waiter
    cancelled at any point takes the lock back (shielded) before Cancelled leaves `wait`.
    """

    def __init__(self, kernel: Kernel, lock: Lock | None = None, name: str | None = None) -> None:
        self._kernel = kernel
        self._name = name
        self.lock = lock if lock is not None else Lock(kernel, name)
        self._waiters = _WaitQueue(kernel)

    def acquire(self) -> Awaitable[Any]:
        return self.lock.acquire()

    def release(self) -> None:
        self.lock.release()

    def locked(self) -> bool:
        return self.lock.locked()

    async def __aenter__(self) -> None:
        await self.lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.lock.release()

    async def wait(self) -> None:
        self._require_lock("wait")
        self.lock.release()
        try:
            await self._waiters.park(self)
        except BaseException:
            with CancelScope(self._kernel, shield=True):
                await self.lock.acquire()
            raise

    def notify(self, n: int = 1) -> None:
        self._require_lock("notify")
        self._waiters.move_to(self.lock._waiters, n, self.lock)

    def notify_all(self) -> None:
        self._require_lock("notify")
        self._waiters.move_to(self.lock._waiters, len(self._waiters), self.lock)

    def _require_lock(self, what: str) -> None:
        if not self.lock.held_by_current():
            raise RuntimeError(f"must hold the lock of {self.describe()} to {what}")

    def describe(self) -> str:
        return _named("condition", self._name)

    def holders(self) -> tuple[Task, ...]:
        return ()


class Barrier:
    """`parties` tasks wait until all have arrived, then all go on; it then resets for the next round.

    A waiter cancelled before the round completes withdraws its arrival.
    """

    def __init__(self, kernel: Kernel, parties: int, name: str | None = None) -> None:
        if parties < 1:
            raise ValueError("a barrier needs at least 1 party")
        self._name = name
        self._parties = parties
        self._arrived = 0
        self._waiters = _WaitQueue(kernel)

    async def wait(self) -> None:
        self._arrived += 1
        if self._arrived == self._parties:
            self._arrived = 0
            self._waiters.wake_all()
            await checkpoint_trap()
            return
        try:
            await self._waiters.park(self)
        except BaseException:
            self._arrived -= 1
            raise

    def describe(self) -> str:
        return f"{_named('barrier', self._name)} ({self._arrived} of {self._parties} arrived)"

    def holders(self) -> tuple[Task, ...]:
        return ()


class Semaphore:
    """A capacity limiter: `capacity` tokens, not owned, handed directly to waiters on release."""

    def __init__(self, kernel: Kernel, capacity: int, name: str | None = None) -> None:
        if capacity < 0:
            raise ValueError("semaphore capacity must be >= 0")
        self._name = name
        self._available = capacity
        self._waiters = _WaitQueue(kernel)

    async def acquire(self) -> None:
        if self._available > 0:
            self._available -= 1
            try:
                await checkpoint_trap()
            except BaseException:
                self.release()
                raise
        else:
            await self._waiters.park(self)

    def try_acquire(self) -> bool:
        if self._available == 0:
            return False
        self._available -= 1
        return True

    def release(self) -> None:
        if self._waiters.wake_one() is None:
            self._available += 1

    @property
    def available(self) -> int:
        return self._available

    def describe(self) -> str:
        return _named("semaphore", self._name)

    def holders(self) -> tuple[Task, ...]:
        return ()  # tokens are not owned: any task may release one

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


_CLOSED = object()


class _ChannelState:
    def __init__(self, kernel: Kernel, capacity: int) -> None:
        self.capacity = capacity
        self.buffer: deque[Any] = deque()
        self.closed = False
        self.receivers = _WaitQueue(kernel)
        self.senders = _WaitQueue(kernel)


class SendChannel:
    def __init__(self, state: _ChannelState) -> None:
        self._state = state

    async def send(self, value: Any) -> None:
        state = self._state
        if state.closed:
            raise RuntimeError("send on a closed channel")
        if len(state.receivers):
            state.receivers.wake_one(value)
            await checkpoint_trap()
        elif len(state.buffer) < state.capacity:
            state.buffer.append(value)
            await checkpoint_trap()
        else:
            state.buffer.append(value)
            try:
                await state.senders.park("channel send (buffer full)")
            except BaseException:
                state.buffer.remove(value)
                raise

    def close(self) -> None:
        self._state.closed = True
        self._state.receivers.wake_all(_CLOSED)


class ReceiveChannel:
    def __init__(self, state: _ChannelState) -> None:
        self._state = state

    async def receive(self) -> Any:
        state = self._state
        if state.buffer:
            value = state.buffer.popleft()
            state.senders.wake_one()
            await checkpoint_trap()
            return value
        if state.closed:
            raise EndOfChannel
        value = await state.receivers.park("channel receive")
        if value is _CLOSED:
            raise EndOfChannel
        return value


def open_channel(kernel: Kernel, capacity: int) -> tuple[SendChannel, ReceiveChannel]:
    state = _ChannelState(kernel, capacity)
    return SendChannel(state), ReceiveChannel(state)
