"""What every fault kind shares: its parameters, its trigger, and the three places a fault can act.

A fault acts at one of three places, and its kind says which:
- `point`: at a hit of a named point in the reference (`await rt.checkpoint(label)`): it may stall there
  or raise there. The label is matched against the trigger's `point` (a trailing `*` is a prefix).
- `store`: inside a store transaction, just before or just after its COMMIT (the store's fault hook).
- `action`: at a moment (a virtual time, after an event, or at a point hit) it does something from the
  outside: a Ctrl+C, a crash, a second process, a message arriving.
Every firing is recorded as a `fault.fired` event (`contract.events.faults`), so a run shows that its
faults actually happened. Parameters are declared with `contract.params`; the scenario loader validates them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from enum import StrEnum
from typing import Any, ClassVar, Protocol

from contract.events import Event
from contract.params import Param, integer
from faults.triggers import Draw, Trigger, TriggerSpecLike

TIMES = integer("How many times the fault fires at most in one run.", minimum=1, default=1, example="3")


class Placement(StrEnum):
    """Where a fault kind acts."""

    POINT = "point"
    STORE = "store"
    ACTION = "action"


class FaultSpecLike(Protocol):
    """A fault as a scenario declares it (the loader's `FaultSpec`)."""

    kind: str
    trigger: TriggerSpecLike
    params: dict[str, Any]


class FaultContext(Protocol):
    """What faults may do to the running system; the scenario harness implements it."""

    rt: Any

    def emit(self, event: Event) -> None: ...

    def host_ceiling_s(self) -> float: ...

    def ctrl_c(self, agent: str | None) -> Awaitable[None]: ...

    def alive(self, process: str) -> bool: ...

    def crash(self, process: str) -> None: ...

    def restart(self, process: str, *, recycle_pid: bool = False) -> Awaitable[None]: ...

    def second_process(self, session: str | None, command: str, text: str) -> Awaitable[None]: ...

    def external_append(self, session: str | None, text: str) -> Awaitable[None]: ...

    def unleased_rotation(self, session: str | None) -> Awaitable[None]: ...


class Fault:
    """One fault in one run. Subclasses set `kind`, `where`, `params` and override the matching hook."""

    kind: ClassVar[str]
    where: ClassVar[Placement]
    params: ClassVar[Mapping[str, Param]]

    def __init__(self, index: int, spec: FaultSpecLike, draw: Draw) -> None:
        self.index = index
        self.spec = spec
        self.args = spec.params
        self.trigger = Trigger(spec.trigger, f"fault.{index}.{self.kind}", draw)
        self.fired = 0

    @property
    def task_name(self) -> str:
        """The name of the task an action fault acts in (a point-triggered one adds its firing's number): unique
        in the run, since invariants follow a running turn by its task, and two second processes' turns under
        one name were read as one turn."""
        return f"fault.{self.index}.{self.kind}"

    @property
    def point(self) -> str | None:
        return self.spec.trigger.point

    def matches(self, label: str) -> bool:
        point = self.point
        if point is None:
            return False
        return label.startswith(point[:-1]) if point.endswith("*") else label == point

    def try_fire(self, now: float) -> bool:
        """Count a hit; True (and one more firing) if the trigger says this hit fires and the limit allows."""
        if self.fired >= self.args.get("times", 1) or not self.trigger.fires_at_hit(now):
            return False
        self.fired += 1
        return True

    def firing(self) -> dict[str, Any]:
        """The fields every `fault.fired` event starts with: which fault, its kind, and this firing's number."""
        return {"fault": self.index, "fault_kind": self.kind, "firing": self.fired}

    async def at_point(self, ctx: FaultContext, label: str) -> None:
        """A `point` fault's effect at the hit (stall or raise)."""

    def applies(self, op: str, phase: str) -> bool:
        """Whether a `store` fault acts on the store operation `op` at `phase` of its transaction."""
        raise NotImplementedError(f"{self.kind} is not a store fault")

    def at_store(self, ctx: FaultContext, op: str, phase: str) -> None:
        """A `store` fault's effect inside the transaction (raise)."""

    async def act(self, ctx: FaultContext) -> None:
        """An `action` fault's effect at its moment."""
