"""The crash model: a simulated process can die at any moment, and a dead process does nothing more.

A process's code runs on its own `ProcessRuntime` (the World's clock and tasks, but a dead process's events
are dropped) and talks to the store over its own connection, which its death closes: every later call raises
`ProcessGone`. Its work runs in cancel scopes that the crash cancels, so it stops at its next await. What
it committed stays, what it had not begun never happens, and whatever it was doing is gone with it. A clean
stop (SIGTERM) first cancels that work and lets it unwind through its own cleanup, then dies the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from contract.events import Event
from faults.crash_in_transaction import DiedInTransaction
from reference.db import Database
from reference.frontends import GatewayFrontend
from reference.lease import Process
from reference.pool import CompressionPool
from sim.runtime.simulated import SimRuntime

if TYPE_CHECKING:
    from sim.core.world import World

T = TypeVar("T")


class ProcessGone(BaseException):
    """Raised at a crashed process's next store call: a dead process writes nothing more."""


class ProcessConnection(Database):
    """A process's connection to the store, which all simulated processes share: a process that dies inside a
    transaction (`DiedInTransaction`) dies once its store call has unwound, so after the rollback, as SQLite has
    it for a connection that dies; until then nothing else runs, so nothing can read the half-done transaction."""

    def _invoke(self, op: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        try:
            return super()._invoke(op, args, kw)
        except DiedInTransaction as death:
            death.die()
            raise


class ProcessRuntime(SimRuntime):
    """A process's view of the runtime: the same clock and tasks, but a dead process records nothing."""

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.crashed = False

    def emit(self, event: Event) -> None:
        if not self.crashed:
            super().emit(event)


@dataclass
class SimProcess:
    """One incarnation of a simulated process: its runtime, its store connection, its pool, its gateway, its work."""

    name: str
    process: Process
    rt: ProcessRuntime
    db: Database
    pool: CompressionPool
    gateway: GatewayFrontend
    work: list[Any] = field(default_factory=list)  # the cancel scopes of the work it runs
    stopping: Any = None  # set by a clean stop; the event is set once its last work has unwound

    @property
    def crashed(self) -> bool:
        return self.rt.crashed

    async def run(self, work: Awaitable[T]) -> T | None:
        """Run a piece of the process's work so that its crash stops it; a crash is the end of it, not an error."""
        with self.rt.cancel_scope() as scope:
            self.work.append(scope)
            if self.stopping is not None:
                scope.cancel()  # a stopping process starts nothing new
            try:
                return await work
            except BaseException:
                if not self.crashed:
                    raise
                return None  # whatever a dead process was doing when it died is gone with it
            finally:
                self.work.remove(scope)
                if self.stopping is not None and not self.work:
                    self.stopping.set()
        return None

    async def stop(self, grace_s: float) -> None:
        """Stop cleanly (SIGTERM): cancel all running work so it unwinds through its own cleanup (a shielded
        step finishes first), and wait up to `grace_s` for the last of it."""
        self.stopping = self.rt.event()
        if not self.work:
            return
        for scope in list(self.work):
            scope.cancel()
        with self.rt.move_on_after(grace_s):
            await self.stopping.wait()

    def crash(self) -> None:
        """Die: record nothing more, refuse every store call, and stop all running work."""
        self.rt.crashed = True
        self.db.close(ProcessGone)
        for scope in list(self.work):
            scope.cancel()
