"""The raw limit: the benchmark workload on the smallest loop that can run it.

A FIFO of coroutines driven by `send()`, a timer heap, and a lock and event with no owner checks, no
cancellation, no recording and no strategy. Nothing real can be faster on this interpreter, so the
simulator's speed is reported as a ratio to this loop, measured in the same process and run.
"""

from __future__ import annotations

import heapq
import types
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

_RUN = 0
_SLEEP = 1
_PARK = 2


@types.coroutine
def _trap(op: int, arg: Any = None) -> Any:
    return (yield (op, arg))


class _Event:
    def __init__(self, loop: RawLoop) -> None:
        self._loop = loop
        self._flag = False
        self._waiters: list[Any] = []

    def set(self) -> None:
        self._flag = True
        self._loop.ready.extend(self._waiters)
        self._waiters.clear()

    async def wait(self) -> None:
        if self._flag:
            await _trap(_RUN)
        else:
            await _trap(_PARK, self._waiters)


class _Lock:
    def __init__(self, loop: RawLoop) -> None:
        self._loop = loop
        self._held = False
        self._waiters: deque[Any] = deque()

    async def __aenter__(self) -> None:
        if self._held:
            await _trap(_PARK, self._waiters)
        else:
            self._held = True
            await _trap(_RUN)

    async def __aexit__(self, *exc: object) -> None:
        if self._waiters:
            self._loop.ready.append(self._waiters.popleft())
        else:
            self._held = False


class _Nursery:
    def __init__(self, loop: RawLoop) -> None:
        self._loop = loop

    async def __aenter__(self) -> _Nursery:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str = "") -> None:
        self._loop.ready.append(fn(*args))


class RawLoop:
    """Exactly what the workload needs; its nursery does not wait (the loop runs until all are done)."""

    def __init__(self) -> None:
        self.ready: deque[Any] = deque()
        self.now = 0.0
        self.steps = 0
        self._timers: list[tuple[float, int, Any]] = []
        self._seq = 0

    async def sleep(self, seconds: float) -> None:
        await _trap(_SLEEP, self.now + seconds)

    async def checkpoint(self, label: str = "") -> None:
        await _trap(_RUN)

    def lock(self) -> _Lock:
        return _Lock(self)

    def event(self) -> _Event:
        return _Event(self)

    def open_nursery(self) -> _Nursery:
        return _Nursery(self)

    def run(self, main: Callable[..., Awaitable[Any]], *args: Any) -> None:
        ready = self.ready
        timers = self._timers
        ready.append(main(self, *args))
        steps = 0
        while True:
            if not ready:
                if not timers:
                    break
                self.now, _, coro = heapq.heappop(timers)
                ready.append(coro)
                continue
            coro = ready.popleft()
            steps += 1
            try:
                op, arg = coro.send(None)
            except StopIteration:
                continue
            if op == _RUN:
                ready.append(coro)
            elif op == _SLEEP:
                self._seq += 1
                heapq.heappush(timers, (arg, self._seq, coro))
            else:
                arg.append(coro)
        self.steps = steps
