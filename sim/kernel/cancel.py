"""Cancel scopes with trio's semantics: cancel, deadline, shield; move_on_after and fail_after.

A cancelled scope makes every await inside it raise Cancelled (unless a shield lies in between); the
exception unwinds to the outermost cancelled scope, which swallows it and records `cancelled_caught`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from sim.kernel.errors import Cancelled, TooSlowError

if TYPE_CHECKING:
    from sim.kernel.scheduler import Kernel, Task


class CancelScope:
    """A region of a task (and of the children of nurseries opened inside it) that can be cancelled."""

    def __init__(self, kernel: Kernel, *, deadline: float = math.inf, shield: bool = False) -> None:
        self._kernel = kernel
        self._deadline = deadline
        self._shield = shield
        self._cancel_called = False
        self.cancelled_caught = False
        self.active = False
        self._task: Task | None = None

    # ---- entering and leaving ------------------------------------------------------------------

    def __enter__(self) -> CancelScope:
        task = self._kernel.current
        assert task is not None, "a cancel scope must be entered from a simulated task"
        if self.active or self._task is not None:
            raise RuntimeError("a cancel scope can be entered only once")
        self._task = task
        self.active = True
        task.scopes.append(self)
        if self._cancel_called:
            self._kernel.cancelled_scopes += 1
        elif self._deadline != math.inf:
            self._arm_deadline()
        return self

    def __exit__(self, etype: Any, exc: BaseException | None, tb: Any) -> bool:
        task = self._task
        assert task is not None and task.scopes and task.scopes[-1] is self, "cancel scopes must nest"
        task.scopes.pop()
        self.active = False
        if self._cancel_called:
            self._kernel.cancelled_scopes -= 1
        if exc is None or not self._cancel_called or task.effectively_cancelled():
            return False
        if isinstance(exc, Cancelled):
            self.cancelled_caught = True
            return True
        if isinstance(exc, BaseExceptionGroup):
            caught, rest = exc.split(Cancelled)
            if caught is None:
                return False
            self.cancelled_caught = True
            if rest is None:
                return True
            raise rest
        return False

    # ---- cancelling ----------------------------------------------------------------------------

    def cancel(self) -> None:
        if self._cancel_called:
            return
        self._cancel_called = True
        if self.active:
            self._kernel.cancelled_scopes += 1
            self._kernel.deliver_cancellation()

    @property
    def cancel_called(self) -> bool:
        return self._cancel_called

    @property
    def deadline(self) -> float:
        return self._deadline

    @deadline.setter
    def deadline(self, value: float) -> None:
        self._deadline = value
        if self.active and value != math.inf:
            self._arm_deadline()

    @property
    def shield(self) -> bool:
        return self._shield

    @shield.setter
    def shield(self, value: bool) -> None:
        self._shield = value
        if self.active and not value and self._kernel.cancelled_scopes:
            self._kernel.deliver_cancellation()

    def _arm_deadline(self) -> None:
        if self._deadline <= self._kernel.now_s:
            self.cancel()
        else:
            self._kernel.add_timer(self._deadline, self)


class FailAfter:
    """`fail_after`: a cancel scope with a deadline that turns its own timeout into TooSlowError."""

    def __init__(self, scope: CancelScope) -> None:
        self._scope = scope

    def __enter__(self) -> CancelScope:
        return self._scope.__enter__()

    def __exit__(self, etype: Any, exc: BaseException | None, tb: Any) -> bool:
        handled = self._scope.__exit__(etype, exc, tb)
        if self._scope.cancelled_caught:
            raise TooSlowError
        return handled
