"""Synchronisation primitives on the kernel: Event, an owned Lock, a Semaphore, and a memory channel.

Waiters are served first come, first served; a wait is abandoned cleanly when its task is cancelled.
Every blocking call is also a checkpoint, as in trio, so cancellation is seen even when it does not block.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from sim.kernel.errors import EndOfChannel
from sim.kernel.scheduler import Task, checkpoint_trap, park_trap

if TYPE_CHECKING:
    from sim.kernel.scheduler import Kernel


class _WaitQueue:
    """FIFO of parked tasks; each entry can be withdrawn by its task's cancellation."""

    def __init__(self, kernel: "Kernel", what: str) -> None:
        self._kernel = kernel
        self._what = what
        self._waiters: deque[Task] = deque()

    async def park(self) -> Any:
        task = self._kernel.current
        assert task is not None
        self._waiters.append(task)

        def abort() -> bool:
            self._waiters.remove(task)
            return True

        return await park_trap(self._what, abort)

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
    def __init__(self, kernel: "Kernel", name: str = "event") -> None:
        self._flag = False
        self._waiters = _WaitQueue(kernel, name)

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            self._waiters.wake_all()

    def is_set(self) -> bool:
        return self._flag

    async def wait(self) -> None:
        if self._flag:
            await checkpoint_trap()
        else:
            await self._waiters.park()


class Lock:
    """A lock with an owner: ownership is handed directly to the next waiter on release."""

    def __init__(self, kernel: "Kernel", name: str = "lock") -> None:
        self._kernel = kernel
        self._name = name
        self._owner: Task | None = None
        self._waiters = _WaitQueue(kernel, name)

    async def acquire(self) -> None:
        task = self._kernel.current
        if self._owner is task:
            raise RuntimeError(f"attempt to re-acquire {self._name}, which this task already holds")
        if self._owner is None:
            self._owner = task
            await _checkpoint_holding(self)
        else:
            await self._waiters.park()

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

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


async def _checkpoint_holding(lock: Lock) -> None:
    """A checkpoint right after taking a free lock; if cancelled there, give the lock back first."""
    try:
        await checkpoint_trap()
    except BaseException:
        lock.release()
        raise


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
