"""The async facade over the synchronous store: one named checkpoint, then one transaction.

The checkpoint `db.<op>` is where the simulator may switch tasks between any two store operations, and
where a fault plan can stall or fail a specific operation. Methods that take `now` get the runtime's clock.
A connection can be closed, as the connection of a process that died is: every later call is refused.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from contract.points import store_point
from contract.runtime import Runtime
from reference.store import SessionStore

Refusal = Callable[[str], BaseException]


class Database:
    """`await db.call("append_messages", sid, msgs)` runs `store.append_messages(sid, msgs, now=rt.now())`."""

    def __init__(self, rt: Runtime, store: SessionStore) -> None:
        self._rt = rt
        self.store = store
        self._refusal: Refusal | None = None

    def close(self, refusal: Refusal) -> None:
        """From now on every call raises `refusal(op)` instead of reaching the store (a dead process writes
        nothing more: what it committed stays, what it had not begun never happens)."""
        self._refusal = refusal

    async def call(self, op: str, *args: Any, **kw: Any) -> Any:
        await self._rt.checkpoint(store_point(op))
        return self._invoke(op, args, kw)

    async def call_unless(self, veto: Callable[[], bool], op: str, *args: Any, **kw: Any) -> bool:
        """Run `op` unless `veto()` holds when the transaction is about to start (checked in the same step,
        so nothing can change the answer between the check and the write). True if it ran."""
        await self._rt.checkpoint(store_point(op))
        if veto():
            return False
        self._invoke(op, args, kw)
        return True

    async def call_settled(self, settle: Callable[[], None], op: str, *args: Any, **kw: Any) -> Any:
        """Run `settle()`, then `op`, in one step: `settle` brings the (mutable) arguments up to date with what
        other tasks did while this one waited at the checkpoint, and nothing can change them before the write."""
        await self._rt.checkpoint(store_point(op))
        settle()
        return self._invoke(op, args, kw)

    def _invoke(self, op: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if self._refusal is not None:
            raise self._refusal(op)
        if takes_now(type(self.store), op):  # type: ignore[arg-type]  # a class is hashable: the checker reads type(x).__hash__ as the instance's
            kw.setdefault("now", self._rt.now())
        return getattr(self.store, op)(*args, **kw)


@functools.cache
def takes_now(store_class: type, op: str) -> bool:
    """Whether a store operation takes `now`: read from its signature once per process, not once per connection
    (a simulated run opens a connection per process, and a signature costs more than the transaction)."""
    return "now" in inspect.signature(getattr(store_class, op)).parameters
