"""The real runtime: the `Runtime` API on trio (real clock, or trio's MockClock for tests).

Used by `python -m reference` and by the conformance suite, which runs the same programs here and on the
simulator and compares what they observe. It lives beside the protocol it implements because it needs
nothing but trio and the contract: the reference runs on it without the simulator, and the simulator's
benchmarks and conformance tests compare against it without importing the reference.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import trio
import trio.testing

from contract.events.base import Event
from contract.events.runtime import IsolatedAbandoned, IsolatedDiscarded
from contract.history import HistoryEvent
from contract.streams import derive_seed

T = TypeVar("T")


class WallClock(trio.abc.Clock):
    """trio's clock read from the wall (`time.time()`), so several processes on one store agree on `now`.

    A lease row's expiry is written by one process and judged by another; trio's default clock starts at a
    random offset per process, which would make those comparisons meaningless.
    """

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return time.time()

    def deadline_to_sleep_time(self, deadline: float) -> float:
        return max(0.0, deadline - time.time())


class _TrioLock:
    """trio.Lock with the runtime API's non-raising `try_acquire`."""

    def __init__(self) -> None:
        self._lock = trio.Lock()

    async def acquire(self) -> None:
        await self._lock.acquire()

    def try_acquire(self) -> bool:
        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            return False
        return True

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    async def __aenter__(self) -> None:
        await self._lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


class _TrioResettableEvent:
    """An event `clear` can reset: a fresh trio.Event per round, so waiters of a set round are all woken."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        if self._event.is_set():
            self._event = trio.Event()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()


class _TrioBarrier:
    """trio has no barrier: `parties` tasks park until the last arrives; a cancelled waiter withdraws."""

    def __init__(self, parties: int) -> None:
        if parties < 1:
            raise ValueError("a barrier needs at least 1 party")
        self._parties = parties
        self._arrived = 0
        self._lot = trio.lowlevel.ParkingLot()

    async def wait(self) -> None:
        self._arrived += 1
        if self._arrived == self._parties:
            self._arrived = 0
            self._lot.unpark_all()
            await trio.lowlevel.checkpoint()
            return
        try:
            await self._lot.park()
        except BaseException:
            self._arrived -= 1
            raise


class _TrioSemaphore:
    def __init__(self, capacity: int) -> None:
        self._sem = trio.Semaphore(capacity)

    async def acquire(self) -> None:
        await self._sem.acquire()

    def try_acquire(self) -> bool:
        try:
            self._sem.acquire_nowait()
        except trio.WouldBlock:
            return False
        return True

    def release(self) -> None:
        self._sem.release()

    @property
    def available(self) -> int:
        return self._sem.value

    async def __aenter__(self) -> None:
        await self._sem.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._sem.release()


class _SendChannel:
    def __init__(self, channel: trio.MemorySendChannel[Any]) -> None:
        self._channel = channel

    async def send(self, value: Any) -> None:
        await self._channel.send(value)

    def close(self) -> None:
        self._channel.close()


class _ReceiveChannel:
    def __init__(self, channel: trio.MemoryReceiveChannel[Any]) -> None:
        self._channel = channel

    async def receive(self) -> Any:
        return await self._channel.receive()


class TrioRuntime:
    """`Runtime` on trio. Build it with `TrioRuntime.run(main, ...)`, which owns the late-worker nursery."""

    Cancelled = trio.Cancelled
    TooSlowError = trio.TooSlowError
    EndOfChannel = trio.EndOfChannel

    def __init__(self, seed: int = 0, on_event: Callable[[HistoryEvent[Event]], None] | None = None) -> None:
        self.seed = seed
        self.events: list[HistoryEvent[Event]] = []
        self._on_event = on_event
        self._workers: trio.Nursery | None = None
        self._streams: dict[str, random.Random] = {}

    @classmethod
    def run(
        cls,
        main: Callable[..., Awaitable[T]],
        *args: Any,
        mock_clock: bool = False,
        seed: int = 0,
        on_event: Callable[[HistoryEvent[Event]], None] | None = None,
        wait_for_workers: bool = True,
        wall_clock: bool = False,
    ) -> tuple[T, TrioRuntime]:
        """Run `main(rt, *args)`; return its result and the runtime.

        Late workers are waited for, as the simulator does, unless `wait_for_workers` is False: a real
        process exits without waiting for the abandoned calls it left behind. `wall_clock` makes `now()`
        the wall time, for processes that share a store.
        """
        rt = cls(seed=seed, on_event=on_event)
        clock = trio.testing.MockClock(autojump_threshold=0) if mock_clock else WallClock() if wall_clock else None
        result = trio.run(rt._root, main, args, wait_for_workers, clock=clock, strict_exception_groups=True)
        return result, rt

    async def _root(self, main: Callable[..., Awaitable[T]], args: tuple[Any, ...], wait_for_workers: bool) -> T:
        async with trio.open_nursery() as workers:
            self._workers = workers
            result = await main(self, *args)
            if not wait_for_workers:
                workers.cancel_scope.cancel()
        return result

    def now(self) -> float:
        return trio.current_time()

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    async def sleep_until(self, deadline: float) -> None:
        await trio.sleep_until(deadline)

    async def checkpoint(self, label: str = "") -> None:
        await trio.lowlevel.checkpoint()

    def open_nursery(self) -> Any:
        return trio.open_nursery()

    def cancel_scope(self, *, deadline: float = math.inf, shield: bool = False) -> trio.CancelScope:
        return trio.CancelScope(deadline=deadline, shield=shield)

    def move_on_after(self, seconds: float) -> trio.CancelScope:
        return trio.move_on_after(seconds)

    def fail_after(self, seconds: float) -> AbstractContextManager[trio.CancelScope]:
        return trio.fail_after(seconds)

    # Names are for the simulator's deadlock reports; trio has no use for them.

    def event(self, name: str | None = None) -> trio.Event:
        return trio.Event()

    def resettable_event(self, name: str | None = None) -> _TrioResettableEvent:
        return _TrioResettableEvent()

    def lock(self, name: str | None = None) -> _TrioLock:
        return _TrioLock()

    def condition(self, lock: _TrioLock | None = None, name: str | None = None) -> trio.Condition:
        return trio.Condition(None if lock is None else lock._lock)

    def barrier(self, parties: int, name: str | None = None) -> _TrioBarrier:
        return _TrioBarrier(parties)

    def semaphore(self, capacity: int, name: str | None = None) -> _TrioSemaphore:
        return _TrioSemaphore(capacity)

    def open_channel(self, capacity: int) -> tuple[_SendChannel, _ReceiveChannel]:
        send, receive = trio.open_memory_channel[Any](capacity)
        return _SendChannel(send), _ReceiveChannel(receive)

    async def run_isolated(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any, name: str | None = None) -> T:
        assert self._workers is not None, "run_isolated needs TrioRuntime.run"
        label = name or str(getattr(fn, "__name__", "isolated"))
        outcome: dict[str, Any] = {}
        done = trio.Event()

        async def worker() -> None:
            try:
                outcome["value"] = await fn(*args)
            except BaseException as exc:  # the owner re-raises it, or it is discarded as a late result
                outcome["error"] = exc
            finally:
                done.set()
                if outcome.get("abandoned"):
                    self.emit(IsolatedDiscarded(call=label, failed="error" in outcome))

        self._workers.start_soon(worker, name=label)
        try:
            await done.wait()
        except trio.Cancelled:
            outcome["abandoned"] = True
            self.emit(IsolatedAbandoned(call=label))
            raise
        if "error" in outcome:
            raise outcome["error"]
        value: T = outcome["value"]
        return value

    async def run_sync_in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)

    def emit(self, event: Event) -> None:
        recorded = HistoryEvent(len(self.events), self.now(), self.current_task_name(), event)
        self.events.append(recorded)
        if self._on_event is not None:
            self._on_event(recorded)

    def current_task_name(self) -> str:
        return trio.lowlevel.current_task().name

    def rng(self, stream: str) -> random.Random:
        if stream not in self._streams:
            self._streams[stream] = random.Random(derive_seed(self.seed, stream))
        return self._streams[stream]
