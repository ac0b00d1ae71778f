"""The one API that code under test is written against.

The reference agent, compactor and store facade receive a `Runtime` object and use only what is declared
here, so the same code runs on the deterministic simulator (`sim.runtime.simulated.SimRuntime`) and for real
on trio (`contract.trio_runtime.TrioRuntime`). The semantics are trio's: structured task groups,
cancel scopes delivered at await points, shielded cleanup, owned locks.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from types import TracebackType
from typing import Any, Protocol, TypeVar

from contract.events.base import Event

T = TypeVar("T")


class CancelScopeLike(Protocol):
    """What both runtimes' cancel scopes offer (trio's `CancelScope` surface)."""

    deadline: float
    shield: bool

    def cancel(self) -> None: ...

    @property
    def cancel_called(self) -> bool: ...

    @property
    def cancelled_caught(self) -> bool: ...

    def __enter__(self) -> CancelScopeLike: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /) -> bool | None: ...


class NurseryLike(Protocol):
    """A task group: children inherit its cancel scope; an error in one cancels the others."""

    @property
    def cancel_scope(self) -> CancelScopeLike: ...

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: str | None = None) -> None: ...


class EventLike(Protocol):
    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    def wait(self) -> Awaitable[None]: ...


class ResettableEventLike(EventLike, Protocol):
    def clear(self) -> None: ...


class LockLike(Protocol):
    """An owned lock: releasing it from a task that does not hold it raises RuntimeError."""

    def acquire(self) -> Awaitable[None]: ...

    def try_acquire(self) -> bool: ...

    def release(self) -> None: ...

    def locked(self) -> bool: ...

    def __aenter__(self) -> Awaitable[None]: ...

    def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /) -> Awaitable[None]: ...


class ConditionLike(Protocol):
    """trio's Condition: `wait` (lock held) releases the lock until notified and returns holding it again."""

    def __aenter__(self) -> Awaitable[None]: ...

    def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /) -> Awaitable[None]: ...

    def wait(self) -> Awaitable[None]: ...

    def notify(self, n: int = 1) -> None: ...

    def notify_all(self) -> None: ...

    def locked(self) -> bool: ...


class BarrierLike(Protocol):
    """`parties` tasks wait until all have arrived, then all go on; it resets for the next round."""

    def wait(self) -> Awaitable[None]: ...


class SemaphoreLike(Protocol):
    """A counting limiter (capacity N); tokens are not owned."""

    def acquire(self) -> Awaitable[None]: ...

    def try_acquire(self) -> bool: ...

    def release(self) -> None: ...

    @property
    def available(self) -> int: ...


class SendChannelLike(Protocol):
    def send(self, value: Any) -> Awaitable[None]: ...

    def close(self) -> None: ...


class ReceiveChannelLike(Protocol):
    def receive(self) -> Awaitable[Any]: ...


class Runtime(Protocol):
    """Clock, tasks, cancellation, synchronisation and observation for code under test."""

    # Read-only: each runtime names its own exception classes, which code under test catches through these.
    @property
    def Cancelled(self) -> type[BaseException]: ...

    @property
    def TooSlowError(self) -> type[Exception]: ...

    @property
    def EndOfChannel(self) -> type[Exception]: ...

    def now(self) -> float:
        """Seconds on this runtime's clock (virtual under the simulator)."""

    def sleep(self, seconds: float) -> Awaitable[None]: ...

    def sleep_until(self, deadline: float) -> Awaitable[None]: ...

    def checkpoint(self, label: str = "") -> Awaitable[None]:
        """A scheduling and cancellation point; the simulator may switch tasks here and records the label."""

    def open_nursery(self) -> AbstractAsyncContextManager[NurseryLike]: ...

    def cancel_scope(self, *, deadline: float = math.inf, shield: bool = False) -> CancelScopeLike: ...

    def move_on_after(self, seconds: float) -> CancelScopeLike: ...

    def fail_after(self, seconds: float) -> AbstractContextManager[CancelScopeLike]: ...

    # Names are optional; the simulator's deadlock reports show them.

    def event(self, name: str | None = None) -> EventLike:
        """A one-shot event."""

    def resettable_event(self, name: str | None = None) -> ResettableEventLike: ...

    def lock(self, name: str | None = None) -> LockLike: ...

    def condition(self, lock: Any = None, name: str | None = None) -> ConditionLike:
        """A condition variable over `lock` (one of this runtime's locks), or over a new lock."""

    def barrier(self, parties: int, name: str | None = None) -> BarrierLike: ...

    def semaphore(self, capacity: int, name: str | None = None) -> SemaphoreLike: ...

    def open_channel(self, capacity: int) -> tuple[SendChannelLike, ReceiveChannelLike]: ...

    def run_isolated(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any, name: str | None = None) -> Awaitable[T]:
        """Run `fn` as a worker the caller can abandon.

        If the caller is cancelled it unwinds at once while the worker runs on (a late worker); whatever
        the worker later returns or raises is discarded (and recorded as `isolated.discarded`).
        """

    def run_sync_in_worker(self, fn: Callable[..., T], *args: Any) -> Awaitable[T]:
        """Run a blocking function off the scheduler (a thread on trio, inline under the simulator)."""

    def emit(self, event: Event) -> None:
        """Record an event (`contract.events`): the invariant checkers read these."""

    def current_task_name(self) -> str: ...

    def rng(self, stream: str) -> RandomLike:
        """A named random stream, derived from the run's seed (recorded under the simulator)."""


class RandomLike(Protocol):
    def random(self) -> float: ...

    def randrange(self, n: int) -> int: ...
