"""Abandonable isolated calls: the late-worker mechanism.

The call runs as its own task outside the caller's cancel scopes. The caller waits for it; if the caller
is cancelled it unwinds at once, and the worker runs on. Whatever the worker produces afterwards is
discarded, and both moments are recorded so invariants can see the late worker.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from contract.events.runtime import IsolatedAbandoned, IsolatedDiscarded
from sim.kernel.scheduler import Task, park_trap

if TYPE_CHECKING:
    from sim.kernel.scheduler import Kernel


class IsolatedCall:
    def __init__(self, kernel: Kernel, label: str) -> None:
        self._kernel = kernel
        self._label = label
        self._caller: Task | None = None
        self._worker: Task | None = None
        self._abandoned = False
        self._value: Any = None
        self._error: BaseException | None = None

    async def run(self, fn: Callable[..., Coroutine[Any, Any, Any]], args: tuple[Any, ...]) -> Any:
        self._caller = self._kernel.current
        self._worker = self._kernel.spawn(fn(*args), self._label, [])
        self._worker.on_done = self._worker_done
        await park_trap(self, self._abandon)
        if self._error is not None:
            raise self._error
        return self._value

    def describe(self) -> str:
        return f"isolated call {self._label}"

    def holders(self) -> tuple[Task, ...]:
        return () if self._worker is None else (self._worker,)

    def _abandon(self) -> bool:
        self._abandoned = True
        assert self._caller is not None
        self._kernel.record(IsolatedAbandoned(call=self._label), self._caller.name)
        return True

    def _worker_done(self, task: Task, value: Any, exc: BaseException | None) -> None:
        self._worker = None  # the worker refers to this call through on_done: no cycle left behind
        if self._abandoned:
            self._kernel.record(IsolatedDiscarded(call=self._label, failed=exc is not None), task.name)
            return
        self._value, self._error = value, exc
        assert self._caller is not None
        self._kernel.reschedule(self._caller)
