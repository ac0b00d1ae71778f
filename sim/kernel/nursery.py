"""Task groups: children live inside the nursery's scope; an error in one cancels the rest.

As in trio with strict exception groups, whatever escapes a nursery is a BaseExceptionGroup of the body's
and the children's exceptions; Cancelled instances in it are stripped by the scope that was cancelled.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from sim.kernel.cancel import CancelScope
from sim.kernel.errors import Cancelled
from sim.kernel.scheduler import Task, park_trap

if TYPE_CHECKING:
    from sim.kernel.scheduler import Kernel


class Nursery:
    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self.cancel_scope = CancelScope(kernel)
        self._children: dict[int, Task] = {}
        self._errors: list[BaseException] = []
        self._child_scopes: list[CancelScope] = []
        self._owner: Task | None = None
        self._owner_parked = False
        self._closed = False

    async def __aenter__(self) -> Nursery:
        self.cancel_scope.__enter__()
        self._owner = self._kernel.current
        assert self._owner is not None
        self._child_scopes = list(self._owner.scopes)
        return self

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: str | None = None) -> None:
        if self._closed:
            raise RuntimeError("this nursery is closed to new arrivals")
        label = name or str(getattr(fn, "__qualname__", "task"))
        child = self._kernel.spawn(fn(*args), label, list(self._child_scopes))
        child.on_done = self._child_done
        self._children[child.tid] = child

    def _child_done(self, task: Task, value: Any, exc: BaseException | None) -> None:
        self._children.pop(task.tid, None)
        if exc is not None:
            self._add_error(exc)
        if not self._children and self._owner_parked:
            self._owner_parked = False
            assert self._owner is not None
            self._kernel.reschedule(self._owner)

    def _add_error(self, exc: BaseException) -> None:
        self._errors.append(exc)
        if not isinstance(exc, Cancelled):
            self.cancel_scope.cancel()

    def _owner_cancelled(self) -> bool:
        """The owner was cancelled while waiting for children: record it and cancel them; keep waiting."""
        self._add_error(Cancelled())
        self.cancel_scope.cancel()
        return False

    def describe(self) -> str:
        return "nursery children to finish"

    def holders(self) -> tuple[Task, ...]:
        return tuple(self._children.values())

    async def __aexit__(self, etype: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is not None:
            self._add_error(exc)
        if self._children:
            self._owner_parked = True
            await park_trap(self, self._owner_cancelled)
        self._closed = True
        errors = self._errors
        if not errors:
            self.cancel_scope.__exit__(None, None, None)
            return False
        group = BaseExceptionGroup("Exceptions from nursery", errors)
        if self.cancel_scope.__exit__(type(group), group, None):
            return True
        raise group
