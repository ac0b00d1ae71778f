"""What invariants may read of the running system besides the history (`sim.invariants.SystemView`).

The store, the reference's configuration (and the terminal's Ctrl+C grace), the agents (each with its live transcript and its process),
whether a lease holder's process is dead, and which agent's user a task acts for. Invariants judge what the system observably did; this is the part
of it they may look at directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reference.config import CompactionConfig
from reference.store import SessionStore
from sim.scenario.builder import AgentSlot, SystemBuilder
from sim.scenario.drives import DRIVE_TASK
from sim.scenario.gateways import GATEWAY_TASK


class StoreReads:
    """The store as invariants read it: each read runs once per state of the data, however many ask.

    After most events several invariants read the same sessions and rows, while writes are far rarer; the
    store's `changes` count moves on every write (a rolled-back one too), so an answer is kept until it
    does. A list is handed out as a copy, so no reader can change what the next one is told.
    """

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self.keeps_title_source = store.keeps_title_source  # a property of the store, not a read
        self._changes = -1
        self._answers: dict[tuple[Any, ...], Any] = {}

    def __getattr__(self, op: str) -> Callable[..., Any]:
        """The store's `op`, answering from what it read since the last write (kept on the instance, so this
        runs once per operation)."""
        read = getattr(self._store, op)

        def answer(*args: Any, **kw: Any) -> Any:
            changes = self._store.changes
            if changes != self._changes:
                self._answers.clear()
                self._changes = changes
            key = (op, args, *kw.items())
            found = self._answers.get(key, self)
            if found is self:
                found = self._answers[key] = read(*args, **kw)
            return found[:] if type(found) is list else found

        setattr(self, op, answer)
        return answer


class ScenarioView:
    def __init__(self, built: SystemBuilder) -> None:
        self._built = built
        self.store = StoreReads(built.store)

    @property
    def config(self) -> CompactionConfig:
        return self._built.config

    @property
    def ctrl_c_grace_s(self) -> float:
        return self._built.grace_s

    @property
    def agents(self) -> Mapping[str, AgentSlot]:
        return self._built.agents

    def process_of(self, incarnation: str) -> str:
        """The scenario's process an incarnation (an attempt id's process) belongs to: `p2r1` is `p2` restarted."""
        return self._built.process_of_incarnation[incarnation]

    def holder_is_dead(self, holder: str) -> bool:
        return self._built.process_table.holder_is_dead(holder)

    def agent_of_task(self, task: str) -> str | None:
        """The agent whose user a task acts for: a drive's task (`drive.<index>.<action>`) types at its agent's
        terminal, a gateway task (`gateway.<agent>`) serves its agent's queue; None for any other task."""
        kind, _, rest = task.partition(".")
        if kind == DRIVE_TASK:
            return self._built.scenario.drives[int(rest.partition(".")[0])].agent
        if kind == GATEWAY_TASK:
            return rest
        return None
