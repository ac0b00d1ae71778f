"""What invariants may read of the running system besides the history (`sim.invariants.SystemView`).

The store, the reference's configuration, the agents (each with its live transcript and its process), and
whether a lease holder's process is dead. Invariants judge what the system observably did; this is the part
of it they may look at directly.
"""

from __future__ import annotations

from typing import Mapping

from reference.config import CompactionConfig
from reference.store import SessionStore
from sim.scenario.builder import AgentSlot, SystemBuilder


class ScenarioView:
    def __init__(self, built: SystemBuilder) -> None:
        self._built = built

    @property
    def store(self) -> SessionStore:
        return self._built.store

    @property
    def config(self) -> CompactionConfig:
        return self._built.config

    @property
    def agents(self) -> Mapping[str, AgentSlot]:
        return self._built.agents

    def process_of(self, incarnation: str) -> str:
        """The scenario's process an incarnation (an attempt id's process) belongs to: `p2r1` is `p2` restarted."""
        return self._built.process_of_incarnation[incarnation]

    def holder_is_dead(self, holder: str) -> bool:
        return self._built.process_table.holder_is_dead(holder)
