"""The reference system as a scenario describes it, installed and run inside one World run.

`ScenarioSystem` puts the parts together: the builder (`builder.py`) makes the store, the processes and the
agents, and serves the gateway agents (`gateways.py`); faults act through the `FaultContext`
(`fault_context.py`) and drives through their dispatcher (`drives.py`); crashes follow the crash model
(`processes.py`); invariants read the system through its view (`view.py`). What is left here is the wiring, and
the fan-out of every recorded event: to fault triggers, to the moments drives wait for, to coverage, and to
the invariants that read its class; and the run's memory bound, the size of the store (`explore.max_store_mb`).
"""

from __future__ import annotations

from typing import Any

from contract.history import HistoryEvent
from faults.plan import FaultPlan, Moments
from sim.core.world import World
from sim.invariants import INVARIANTS, InvariantSet, Violation
from sim.scenario.builder import SystemBuilder
from sim.scenario.drives import Drives
from sim.scenario.fault_context import SystemFaultContext
from sim.scenario.model import Scenario
from sim.scenario.view import ScenarioView

MB = 1_000_000

class ScenarioSystem:
    def __init__(self, world: World, scenario: Scenario) -> None:
        self.world = world
        self.scenario = scenario
        self.built = SystemBuilder(world, scenario)
        self.store = self.built.store
        self.actions = SystemFaultContext(self.built)
        self.plan = FaultPlan(scenario.faults, world.draw, self.actions)
        self.moments = Moments(world.runtime)
        view = ScenarioView(self.built)
        names = INVARIANTS if scenario.expect.invariants == "all" else scenario.expect.invariants
        self.invariants = InvariantSet(INVARIANTS[name](view) for name in names)
        self.violations: list[Violation] = []
        self.coverage: set[str] = set()
        self.drives: Drives | None = None
        self._sized_at = -1  # the store's `changes` when its size was last read

    def install(self) -> None:
        """Hook the run: points and store calls to the fault plan, every event to the fan-out, idleness to the
        moments; then the drives' triggers (made after the faults', so their draws come in that order)."""
        self.world.checkpoint_hook = self.plan.at_point
        self.world.kernel.listeners.append(self._on_event)
        self.world.kernel.on_idle = self._on_idle
        self.plan.track_actions(self.moments)
        self.drives = Drives(self.built, self.actions, self.world.draw)
        self.drives.track(self.moments)

    def _on_event(self, record: HistoryEvent) -> None:
        self._bound_memory()
        kind = record.event.kind
        self.plan.observe(kind, record.time)
        self.moments.observe(kind, record.time)
        self.coverage.add(kind)
        self.violations.extend(self.invariants.on_event(record))

    def _bound_memory(self) -> None:
        """The run's memory bound: what the store holds, read again only once a write has moved it. A summary that
        grows at every compaction writes megabytes in a few events, and everything reading the store grows with it."""
        changes = self.store.changes
        if changes == self._sized_at:
            return
        self._sized_at = changes
        size, bound_mb = self.store.size_bytes, self.scenario.explore.max_store_mb
        if size > bound_mb * MB:
            self.world.kernel.exceed(f"store budget of {bound_mb:g} MB exhausted (the run's memory bound): the store "
                                     f"holds {size / MB:.2f} MB")

    def _on_idle(self) -> bool:
        """Nothing can run: end waits for events that cannot come, then let the gateways drain and stop."""
        return self.moments.give_up() or self.built.gateways.close_idle()

    def finish(self) -> None:
        """Quiescence: the liveness checks and the final-state checks."""
        self.violations.extend(self.invariants.at_end(self.world.kernel.history))

    def close(self) -> None:
        self.store.close()

    async def main(self, rt: Any) -> None:
        assert self.drives is not None, "install() first"
        self.built.build_sessions()
        self.invariants.at_start()
        self.store.fault_hook = self.plan.at_store
        await self.built.start_agents()
        async with rt.open_nursery() as nursery:
            self.built.gateways.start(nursery, list(self.built.agents.values()))
            await self.plan.run_actions(nursery, self.moments)
            self.drives.start(nursery, self.moments)
