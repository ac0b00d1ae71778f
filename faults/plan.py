"""A run's fault plan: the scenario's faults installed at the points, the store and the clock of one World.

`FaultPlan` is the single dispatcher: the World's checkpoint hook calls `at_point`, the store's fault hook
calls `at_store`, the kernel's event listener calls `observe`, and `run_actions` starts one task per action
fault that waits for its moment. Faults fire in the order they are declared.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from faults import FAULT_KINDS
from faults.base import Fault, FaultContext, Placement
from faults.triggers import Draw, Trigger


class FaultPlan:
    def __init__(self, specs: Sequence[Any], draw: Draw, ctx: FaultContext) -> None:
        self._ctx = ctx
        self.faults: list[Fault] = [FAULT_KINDS[spec.kind](index, spec, draw) for index, spec in enumerate(specs)]
        self._points = [f for f in self.faults if f.point is not None and f.where != Placement.STORE]
        self._store = [f for f in self.faults if f.where == Placement.STORE]
        self._actions = [f for f in self.faults if f.where == Placement.ACTION and f.point is None]
        self._awaiting = by_awaited_event(f.trigger for f in self._points + self._store)
        self._at_label: dict[str, list[Fault]] = {}  # each label's point faults, found once per run
        self._nursery: Any = None

    # ---- hooks ---------------------------------------------------------------------------------

    async def at_point(self, label: str) -> None:
        """A named point was reached: let every matching point fault decide, in declaration order."""
        matching = self._at_label.get(label)
        if matching is None:
            matching = self._at_label[label] = [fault for fault in self._points if fault.matches(label)]
        for fault in matching:
            if fault.try_fire(self._ctx.rt.now()):
                if fault.where == Placement.ACTION:
                    self._nursery.start_soon(fault.act, self._ctx, name=f"{fault.task_name}.{fault.fired}")
                else:
                    await fault.at_point(self._ctx, label)

    def at_store(self, op: str, phase: str) -> None:
        for fault in self._store:
            if fault.applies(op, phase) and fault.try_fire(self._ctx.rt.now()):
                fault.at_store(self._ctx, op, phase)

    def observe(self, kind: str, time: float) -> None:
        """Arm event-triggered point and store faults (action faults are armed by `Moments`)."""
        for trigger in self._awaiting.get(kind, ()):
            trigger.observe(kind, time)

    # ---- actions -------------------------------------------------------------------------------

    def track_actions(self, moments: Moments) -> None:
        """Have `moments` watch the action faults' triggers from the start of the run."""
        for fault in self._actions:
            moments.track(fault.trigger)

    async def run_actions(self, nursery: Any, moments: Moments) -> None:
        """Start each time- or event-triggered action fault; point-triggered ones start at their hit."""
        self._nursery = nursery
        for fault in self._actions:
            nursery.start_soon(self._act_at_moment, fault, moments, name=fault.task_name)

    def act_in(self, nursery: Any) -> None:
        """Start the point-triggered action faults that fire from now on in `nursery`: for a system whose own
        threads go on hitting points after the drives' nursery closed (a hermes turn runs on after its drive typed
        it), so a crash at such a hit acts instead of raising into the code that hit the point."""
        self._nursery = nursery

    async def _act_at_moment(self, fault: Fault, moments: Moments) -> None:
        if await moments.wait(fault.trigger) and fault.try_fire(self._ctx.rt.now()):
            await fault.act(self._ctx)

    def fired(self) -> list[int]:
        """How many times each fault fired in this run, in declaration order."""
        return [fault.fired for fault in self.faults]


class Moments:
    """Waits for time- and event-armed triggers, woken by the events themselves (no polling).

    A wait whose event never comes would keep the run from ending; when the system is otherwise idle the
    harness calls `give_up`, which ends every pending wait (that drive or fault simply never fires).
    """

    def __init__(self, rt: Any) -> None:
        self._rt = rt
        self._armed: dict[int, Any] = {}
        self._tracked: dict[str, list[Trigger]] = {}  # by the event kind each awaits
        self._pending: list[Any] = []

    def track(self, trigger: Trigger) -> None:
        """Watch a trigger's event from now on, before any task waits for it: an event recorded before its
        waiter gets to run still arms it (tracking only at `wait` would miss it, depending on the schedule)."""
        if trigger.spec.after_event is not None:
            self._tracked.setdefault(trigger.spec.after_event, []).append(trigger)
        self._armed[id(trigger)] = self._rt.event()

    def observe(self, kind: str, time: float) -> None:
        for trigger in self._tracked.get(kind, ()):
            if trigger.observe(kind, time):
                self._armed[id(trigger)].set()

    async def wait(self, trigger: Trigger) -> bool:
        """Sleep until a tracked trigger's moment; False if it is inactive in this run or never armed."""
        if not trigger.active or (trigger.armed_at is None and trigger.spec.after_event is None):
            return False
        if trigger.armed_at is None:
            with self._rt.cancel_scope() as scope:
                self._pending.append(scope)
                await self._armed[id(trigger)].wait()
            if scope in self._pending:
                self._pending.remove(scope)
            if scope.cancelled_caught:
                return False
        await self._rt.sleep_until(trigger.armed_at)
        return True

    def give_up(self) -> bool:
        """End every wait still pending; True if there was one (so the run can go on to finish)."""
        pending, self._pending = self._pending, []
        for scope in pending:
            scope.cancel()
        return bool(pending)


def by_awaited_event(triggers: Iterable[Trigger]) -> dict[str, list[Trigger]]:
    """Triggers by the event kind they wait for, in their order: every recorded event is offered only to the
    triggers it can arm, not to every fault of the run (a trigger with no `after_event` ignores them all)."""
    awaiting: dict[str, list[Trigger]] = {}
    for trigger in triggers:
        if trigger.spec.after_event is not None:
            awaiting.setdefault(trigger.spec.after_event, []).append(trigger)
    return awaiting
