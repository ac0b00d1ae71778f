"""Synchronisation primitives on the kernel: Event, an owned Lock, a Semaphore, and a memory channel.

Waiters are served first come, first served; a wait is abandoned cleanly when its task is cancelled.
Every blocking call is also a checkpoint, as in trio, so cancellation is seen even when it does not block.
"""

from __future__ import annotations

import types
from collections import deque
from typing import TYPE_CHECKING, Any, Awaitable

from sim.kernel.errors import EndOfChannel
from sim.kernel.scheduler import CHECKPOINT, PARK, Task, checkpoint_trap

if TYPE_CHECKING:
    from sim.kernel.scheduler import Kernel


class _WaitQueue:
    """FIFO of parked tasks; each entry can be withdrawn by its task's cancellation."""

    def __init__(self, kernel: "Kernel", what: str) -> None:
        self._kernel = kernel
        self._what = what
        self._waiters: deque[Task] = deque()

    @types.coroutine
    def park(self) -> Any:
        """Wait in line (a bare generator, not a coroutine: one frame fewer on every contended wait)."""
        task = self._kernel.current
        assert task is not None
        waiters = self._waiters
        waiters.append(task)

        def abort() -> bool:
            waiters.remove(task)
            return True

        return (yield (PARK, (self._what, abort)))

    def wake_one(self, value: Any = None) -> Task | None:
        if not self._waiters:
            return None
        task = self._waiters.popleft()
        self._kernel.reschedule(task, value)
        return task

    def wake_all(self, value: Any = None) -> None:
        while self._waiters:
            self._kernel.reschedule(self._waiters.popleft(), value)

    def __len__(self) -> int:
        return len(self._waiters)


class Event:
    """A one-shot flag; its wait queue is made only when someone actually waits (events are cheap)."""

    def __init__(self, kernel: "Kernel", name: str = "event") -> None:
        self._kernel = kernel
        self._name = name
        self._flag = False
        self._waiters: _WaitQueue | None = None

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            if self._waiters is not None:
                self._waiters.wake_all()

    def is_set(self) -> bool:
        return self._flag

    def wait(self) -> Awaitable[Any]:
        if self._flag:
            return checkpoint_trap()
        if self._waiters is None:
            self._waiters = _WaitQueue(self._kernel, self._name)
        return self._waiters.park()


class Lock:
    """A lock with an owner: ownership is handed directly to the next waiter on release."""

    def __init__(self, kernel: "Kernel", name: str = "lock") -> None:
        self._kernel = kernel
        self._name = name
        self._owner: Task | None = None
        self._waiters = _WaitQueue(kernel, name)

    def acquire(self) -> Awaitable[Any]:
        task = self._kernel.current
        if self._owner is task:
            raise RuntimeError(f"attempt to re-acquire {self._name}, which this task already holds")
        if self._owner is None:
            self._owner = task
            return self._checkpoint_holding()
        return self._waiters.park()

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
            raise RuntimeError(f"can't release {self._name}: this task does not own it")
        self._owner = self._waiters.wake_one()

    def locked(self) -> bool:
        return self._owner is not None

    @property
    def owner_name(self) -> str | None:
        return None if self._owner is None else self._owner.name

    __aenter__ = acquire

    def __aexit__(self, *exc: object) -> Awaitable[None]:
        self.release()
        return _READY


class _Ready:
    """An awaitable that completes at once without a frame: `async with lock` pays nothing on exit."""

    def __await__(self) -> Any:
        return iter(())


_READY = _Ready()


class Semaphore:
    """A capacity limiter: `capacity` tokens, not owned, handed directly to waiters on release."""

    def __init__(self, kernel: "Kernel", capacity: int, name: str = "semaphore") -> None:
        if capacity < 0:
            raise ValueError("semaphore capacity must be >= 0")
        self._available = capacity
        self._waiters = _WaitQueue(kernel, name)

    async def acquire(self) -> None:
        if self._available > 0:
            self._available -= 1
            try:
                await checkpoint_trap()
            except BaseException:
                self.release()
                raise
        else:
            await self._waiters.park()

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

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


_CLOSED = object()


class _ChannelState:
    def __init__(self, kernel: "Kernel", capacity: int) -> None:
        self.capacity = capacity
        self.buffer: deque[Any] = deque()
        self.closed = False
        self.receivers = _WaitQueue(kernel, "channel receive")
        self.senders = _WaitQueue(kernel, "channel send (buffer full)")


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
                await state.senders.park()
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
        value = await state.receivers.park()
        if value is _CLOSED:
            raise EndOfChannel
        return value


def open_channel(kernel: "Kernel", capacity: int) -> tuple[SendChannel, ReceiveChannel]:
    state = _ChannelState(kernel, capacity)
    return SendChannel(state), ReceiveChannel(state)
