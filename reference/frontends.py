"""The two ways users reach an agent: a terminal (CLI) and a gateway (chat platforms, other processes).

CLI: Ctrl+C is a hard cancel (it goes through the agent's fence, so a summary in flight is rolled back and
its lease freed); after a grace period the next turn is accepted whatever the old one is still doing. The
race R1 lives exactly there: the next turn must persist even if the cancelled worker has not finished.

Gateway: messages arrive at any time, also while a turn or a compression runs; each agent takes them one
turn at a time, in arrival order. Several agents (in one or several processes) may share a session.
"""

from __future__ import annotations

from typing import Any

from contract.events import (
    FrontendCtrlC,
    FrontendCtrlCGraceExpired,
    FrontendTurnAbandoned,
    FrontendTurnFailed,
    FrontendTurnSubmitted,
    GatewayDelivered,
    GatewayTurnStarted,
)
from contract.runtime import Runtime
from contract.vocabulary import GRACE_TASK
from reference.agent import Agent, TurnResult


class CliFrontend:
    def __init__(self, rt: Runtime, agent: Agent, *, grace_s: float, name: str = "cli") -> None:
        self._rt = rt
        self.agent = agent
        self.name = name
        self._turn_lock = rt.lock()
        self._grace_s = grace_s
        self._turn_scope: Any = None
        self._turn_done = rt.event()
        self._turn_done.set()

    @property
    def busy(self) -> bool:
        return not self._turn_done.is_set()

    async def submit(self, text: str) -> TurnResult | None:
        """Run one turn (one at a time, like a terminal); None if it failed or Ctrl+C abandoned it.

        A turn that fails is reported to the user, as the terminal would show it, and the prompt returns.
        """
        async with self._turn_lock:
            self._turn_done = done = self._rt.event()
            self._rt.emit(FrontendTurnSubmitted(agent=self.name, text=text))
            try:
                with self._rt.cancel_scope() as scope:
                    self._turn_scope = scope
                    return await self.agent.run_turn(text)
                self._rt.emit(FrontendTurnAbandoned(agent=self.name, text=text))
                return None
            except Exception as error:
                self._rt.emit(FrontendTurnFailed(agent=self.name, error=f"{type(error).__name__}: {error}"))
                return None
            finally:
                done.set()

    async def ctrl_c(self) -> None:
        """Hard-cancel the running turn; once the grace period has passed since the press, abandon it if it has
        still not ended.

        The turn is the one running at the press: once it ends the prompt is back, and a turn the user types
        within the grace (or one that starts at the press's instant) is not the one they stopped. The grace runs
        beside the hard cancel, which may wait out an admitted commit or give a stopped worker its own grace.
        """
        self._rt.emit(FrontendCtrlC(agent=self.name, turn_running=self.busy))
        pressed = self._turn_done
        async with self._rt.open_nursery() as nursery:
            # FIX ctrl-c-grace-from-press (R1): counted after the hard cancel, the grace keeps the prompt from the user for as long as a commit or a stopped worker takes
            nursery.start_soon(self._abandon_after_grace, pressed, name=f"{GRACE_TASK}{self._rt.current_task_name()}")
            await self.agent.hard_interrupt()

    async def _abandon_after_grace(self, pressed: Any) -> None:
        """The grace period of one press: abandon the turn running at the press if it has not ended by then."""
        with self._rt.move_on_after(self._grace_s):
            await pressed.wait()
        # FIX ctrl-c-abandons-pressed-turn (R1): only the turn running at the press is abandoned, never the next one
        still_running = not pressed.is_set()
        if still_running and self._turn_scope is not None:
            self._turn_scope.cancel()
        self._rt.emit(FrontendCtrlCGraceExpired(agent=self.name, turn_abandoned=still_running))


class GatewayFrontend:
    """Delivers platform messages to agents; each agent works through its own queue in order."""

    def __init__(self, rt: Runtime, capacity: int = 64) -> None:
        self._rt = rt
        self._capacity = capacity
        self._queues: dict[str, tuple[Any, Any]] = {}
        self.results: list[TurnResult] = []

    def _queue(self, name: str) -> tuple[Any, Any]:
        """`name`'s queue, opened by whichever comes first: a delivery or the agent starting to serve."""
        if name not in self._queues:
            self._queues[name] = self._rt.open_channel(self._capacity)
        return self._queues[name]

    async def serve(self, name: str, agent: Agent) -> None:
        """Run `agent`'s turns for messages delivered under `name` until its queue is closed.

        A turn that fails is reported on its platform and the next message is taken, as the terminal does.
        """
        _, receive = self._queue(name)
        while True:
            try:
                text, platform_message_id = await receive.receive()
            except self._rt.EndOfChannel:
                return
            self._rt.emit(GatewayTurnStarted(agent=name, platform_message_id=platform_message_id))
            try:
                self.results.append(await agent.run_turn(text, platform_message_id=platform_message_id))
            except Exception as error:
                self._rt.emit(FrontendTurnFailed(agent=name, error=f"{type(error).__name__}: {error}"))

    async def deliver(self, name: str, text: str, *, platform_message_id: str | None = None) -> None:
        self._rt.emit(GatewayDelivered(agent=name, platform_message_id=platform_message_id))
        await self._queue(name)[0].send((text, platform_message_id))

    def close(self, name: str) -> None:
        """No more messages for `name`: its agent finishes the queued ones, then stops serving."""
        self._queue(name)[0].close()
