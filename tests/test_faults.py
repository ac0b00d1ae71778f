"""Fault triggers and the fault plan: each trigger kind fires when it should, and only then."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from faults import FAULT_KINDS
from faults.triggers import Trigger
from sim import World
from sim.core.timefreeze import frozen_time
from sim.kernel.decisions import Draw
from sim.scenario.loader import load_scenario
from sim.scenario.names import registry
from sim.scenario.runner import run_once
from sim.strategies.replay import ReplayStrategy


@dataclass
class Spec:
    at: float | None = None
    after_event: str | None = None
    nth: int | None = None
    point: str | None = None
    probability: float | None = None
    per_hit: float | None = None
    delay: float = 0.0
    until: float | None = None


def never_drawn(stream: str, bound: int) -> int:
    raise AssertionError("a deterministic trigger must not draw")


def test_a_trigger_past_its_until_never_fires():
    trigger = Trigger(Spec(at=1.0, point="p", until=5.0), "s", never_drawn)
    assert [trigger.fires_at_hit(now) for now in (0.5, 3.0, 5.0, 5.5)] == [False, True, True, False]


def test_nth_hit_fires_exactly_once_at_that_hit():
    trigger = Trigger(Spec(nth=3, point="p"), "s", never_drawn)
    assert [trigger.fires_at_hit(0.0) for _ in range(5)] == [False, False, True, False, False]


def test_time_trigger_arms_at_its_time_plus_delay():
    trigger = Trigger(Spec(at=10.0, delay=2.0), "s", never_drawn)
    assert not trigger.fires_at_hit(11.9)
    assert trigger.fires_at_hit(12.0)


def test_event_trigger_arms_on_the_first_matching_event_only():
    trigger = Trigger(Spec(after_event="x.y", delay=1.0), "s", never_drawn)
    assert not trigger.fires_at_hit(5.0)
    assert not trigger.observe("other", 5.0)
    assert trigger.observe("x.y", 5.0)
    assert not trigger.observe("x.y", 9.0)
    assert trigger.armed_at == 6.0
    assert not trigger.fires_at_hit(5.5) and trigger.fires_at_hit(6.0)


def test_random_trigger_is_decided_by_recorded_draws():
    draws = []

    def draw(stream: str, bound: int) -> int:
        draws.append(stream)
        return 0 if len(draws) == 1 else bound - 1

    trigger = Trigger(Spec(probability=0.5, per_hit=0.5, point="p"), "fault.0.stall", draw)
    assert trigger.active
    assert not trigger.fires_at_hit(0.0)
    assert draws == ["fault.0.stall", "fault.0.stall"]


def test_random_trigger_inactive_in_a_run_never_fires():
    trigger = Trigger(Spec(probability=0.1, per_hit=1.0, point="p"), "s", lambda stream, bound: bound - 1)
    assert not trigger.active
    assert not any(trigger.fires_at_hit(0.0) for _ in range(10))


def _fire_twenty_times(world: World) -> list[bool]:
    async def main(rt):
        trigger = Trigger(Spec(probability=0.5, per_hit=0.5, point="p"), "fault.0.stall", world.draw)
        return [trigger.fires_at_hit(rt.now()) for _ in range(20)]

    return world.run(main).value


def test_probability_draws_go_through_the_world_and_replay():
    world = World(4)
    fired = _fire_twenty_times(world)
    assert any(isinstance(d, Draw) and d.stream == "fault.0.stall" for d in world.decisions)
    assert _fire_twenty_times(World(4, ReplayStrategy(world.decisions))) == fired


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_every_fault_kind_is_documented(kind):
    import sys

    doc = sys.modules[FAULT_KINDS[kind].__module__].__doc__ or ""
    for section in ("Effect", "Where", "Parameters", "Trace"):
        assert f"{section}:" in doc, f"{kind}: its module docstring must say {section}"
    assert FAULT_KINDS[kind].where in ("point", "store", "action")


TWO_SECOND_PROCESSES = """\
[world]
sessions = [{ id = "s1", messages = 4 }, { id = "s2", messages = 4 }]

[[drive]]
at = "1s"
turn = "the first question"

[[fault]]
kind = "second_process"
point = "db.append_messages"
nth = 1
session = "s2"
command = "turn"
text = "second_process 1: text"

[[fault]]
kind = "second_process"
point = "db.append_messages"
nth = 1
session = "s1"
command = "turn"
text = "second_process 2: text"
"""


def test_each_action_fault_acts_in_a_task_of_its_own(tmp_path):
    """Invariants follow a running turn by its task: two second processes' turns under one task name were read as
    one turn (multi_process seed 7, run 669)."""
    path = tmp_path / "two_second_processes.toml"
    path.write_text(TWO_SECOND_PROCESSES)
    with frozen_time():
        report = run_once(load_scenario(path, registry()), 0)
    tasks = {record.fields["agent"]: record.task for record in report.result.history if record.kind == "frontend.turn_submitted"}
    assert tasks["extra1"] != tasks["extra2"]
