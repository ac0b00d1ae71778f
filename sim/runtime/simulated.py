"""The simulated runtime: the `Runtime` API on the deterministic kernel of a World."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from contract.events.base import Event
from sim.kernel.cancel import CancelScope, FailAfter
from sim.kernel.errors import Cancelled, EndOfChannel, TooSlowError
from sim.kernel.isolated import IsolatedCall
from sim.kernel.nursery import Nursery
from sim.kernel.scheduler import checkpoint_trap, sleep_until_trap
from sim.kernel.sync import Barrier, Condition, Lock, ReceiveChannel, Semaphore, SendChannel, open_channel
from sim.kernel.sync import Event as KernelEvent  # the contract's Event is what `emit` records

if TYPE_CHECKING:
    from sim.core.world import World

T = TypeVar("T")

_DRAW_BITS = 53


class RecordedStream:
    """A named random stream whose every draw goes through the strategy and into the decision list."""

    def __init__(self, world: World, stream: str) -> None:
        self._world = world
        self._stream = stream

    def randrange(self, n: int) -> int:
        return self._world.draw(self._stream, n)

    def random(self) -> float:
        return self._world.draw(self._stream, 1 << _DRAW_BITS) / (1 << _DRAW_BITS)


class SimRuntime:
    Cancelled = Cancelled
    TooSlowError = TooSlowError
    EndOfChannel = EndOfChannel

    def __init__(self, world: World) -> None:
        self._world = world
        self._kernel = world.kernel
        self._streams: dict[str, RecordedStream] = {}

    def now(self) -> float:
        return self._kernel.now_s

    # The hot calls return the kernel's trap directly instead of wrapping it in a coroutine of their own:
    # `await rt.checkpoint()` then costs one generator frame, not two.

    def sleep(self, seconds: float) -> Awaitable[None]:
        return sleep_until_trap(self._kernel.now_s + seconds)

    def sleep_until(self, deadline: float) -> Awaitable[None]:
        return sleep_until_trap(deadline)

    def checkpoint(self, label: str = "") -> Awaitable[None]:
        if label and self._world.checkpoint_hook is not None:
            return self._hooked_checkpoint(label)
        return checkpoint_trap(label)

    async def _hooked_checkpoint(self, label: str) -> None:
        """A named point with a fault hook installed: the hook may stall, fail or record before the switch."""
        hook = self._world.checkpoint_hook
        assert hook is not None
        await hook(label)
        await checkpoint_trap(label)

    def open_nursery(self) -> Nursery:
        return Nursery(self._kernel)

    def cancel_scope(self, *, deadline: float = math.inf, shield: bool = False) -> CancelScope:
        return CancelScope(self._kernel, deadline=deadline, shield=shield)

    def move_on_after(self, seconds: float) -> CancelScope:
        return CancelScope(self._kernel, deadline=self._kernel.now_s + seconds)

    def fail_after(self, seconds: float) -> FailAfter:
        return FailAfter(CancelScope(self._kernel, deadline=self._kernel.now_s + seconds))

    def event(self, name: str | None = None) -> KernelEvent:
        return KernelEvent(self._kernel, name)

    def resettable_event(self, name: str | None = None) -> KernelEvent:
        return KernelEvent(self._kernel, name)

    def lock(self, name: str | None = None) -> Lock:
        return Lock(self._kernel, name)

    def condition(self, lock: Lock | None = None, name: str | None = None) -> Condition:
        return Condition(self._kernel, lock, name)

    def barrier(self, parties: int, name: str | None = None) -> Barrier:
        return Barrier(self._kernel, parties, name)

    def semaphore(self, capacity: int, name: str | None = None) -> Semaphore:
        return Semaphore(self._kernel, capacity, name)

    def open_channel(self, capacity: int) -> tuple[SendChannel, ReceiveChannel]:
        return open_channel(self._kernel, capacity)

    async def run_isolated(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any, name: str | None = None) -> T:
        label = name or str(getattr(fn, "__name__", "isolated"))
        return await IsolatedCall(self._kernel, label).run(fn, args)

    async def run_sync_in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        await checkpoint_trap()
        return fn(*args)

    def emit(self, event: Event) -> None:
        self._kernel.record(event, self._kernel.current_name())

    def current_task_name(self) -> str:
        return self._kernel.current_name()

    def rng(self, stream: str) -> RecordedStream:
        generator = self._streams.get(stream)
        if generator is None:
            generator = self._streams[stream] = RecordedStream(self._world, stream)
        return generator
