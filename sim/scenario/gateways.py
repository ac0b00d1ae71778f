"""The gateways of a run: each gateway agent takes its platform messages one turn at a time, in its process.

An agent reached through the gateway (`frontend = "gateway"`) is served from the start of the run, or from
its opening when its process restarts later. Once nothing else can run, every served queue is closed, so the
agents finish what was delivered and stop (a served queue would otherwise wait for messages forever).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.scenario.builder import AgentSlot
    from sim.scenario.processes import SimProcess

GATEWAY = "gateway"
GATEWAY_TASK = "gateway"  # a gateway agent's queue is served in the task `gateway.<agent>`


class Gateways:
    def __init__(self) -> None:
        self._nursery: Any = None
        self._serving: list[tuple[SimProcess, str]] = []

    def start(self, nursery: Any, slots: Iterable[AgentSlot]) -> None:
        """The run has started: serve every gateway agent opened so far, and those opened from now on."""
        self._nursery = nursery
        for slot in slots:
            self.serve(slot)

    def serve(self, slot: AgentSlot) -> None:
        """Serve a gateway agent's queue in its process (nothing for a cli agent, or before the run starts)."""
        if slot.spec.frontend != GATEWAY or self._nursery is None:
            return
        proc, name = slot.proc, slot.spec.name
        self._serving.append((proc, name))
        self._nursery.start_soon(proc.run, proc.gateway.serve(name, slot.agent), name=f"{GATEWAY_TASK}.{name}")

    def close_idle(self) -> bool:
        """Nothing else can run: close every served queue. True if there were any (their agents go on)."""
        serving, self._serving = self._serving, []
        for proc, name in serving:
            proc.gateway.close(name)
        return bool(serving)
