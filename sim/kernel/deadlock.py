"""What a deadlock report says: each blocked task, what it waits on by name, who holds it, and the cycle.

A wait-for graph has an edge from a parked task to each task that holds what it waits on (a lock's owner, a
nursery's unfinished children, an isolated call's worker). A deadlock whose edges close a cycle is a
circular wait; one without a cycle is a lost wakeup: some task waits on something nobody left can set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task


@dataclass(frozen=True)
class BlockedTask:
    """One parked task: what it waits on by name, the tasks holding that, and the line it waits at."""

    task: str
    waits_on: str
    held_by: tuple[str, ...]
    where: str

    def line(self) -> str:
        holders = f" (held by {', '.join(map(repr, self.held_by))})" if self.held_by else ""
        return f"  task {self.task!r} waits on {self.waits_on}{holders} at {self.where}"


def blocked_task(task: Task) -> BlockedTask:
    target = task.waiting_on
    if isinstance(target, str):
        return BlockedTask(task.name, target or "nothing", (), task.where())
    return BlockedTask(task.name, target.describe(), tuple(t.name for t in target.holders()), task.where())


def wait_for(tasks: Iterable[Task]) -> tuple[tuple[BlockedTask, ...], tuple[BlockedTask, ...]]:
    """Every blocked task in spawn order, and the first wait-for cycle among them (empty if there is none)."""
    blocked = tuple(blocked_task(task) for task in sorted(tasks, key=lambda t: t.tid))
    return blocked, find_cycle(blocked)


def find_cycle(blocked: tuple[BlockedTask, ...]) -> tuple[BlockedTask, ...]:
    """Follow held-by edges depth first from each task in turn; the first walk that meets itself is the cycle."""
    by_name = {entry.task: entry for entry in blocked}
    cleared: set[str] = set()  # tasks from which no cycle can be reached

    def walk(trail: list[BlockedTask]) -> tuple[BlockedTask, ...]:
        names = [entry.task for entry in trail]
        for holder in trail[-1].held_by:
            if holder in names:
                return tuple(trail[names.index(holder):])
            if holder in by_name and holder not in cleared:
                cycle = walk([*trail, by_name[holder]])
                if cycle:
                    return cycle
        cleared.add(trail[-1].task)
        return ()

    for entry in blocked:
        cycle = () if entry.task in cleared else walk([entry])
        if cycle:
            return cycle
    return ()


def describe(blocked: tuple[BlockedTask, ...], cycle: tuple[BlockedTask, ...]) -> list[str]:
    """The report's lines: every blocked task, then the cycle, or who waits on something nobody holds."""
    lines = [entry.line() for entry in blocked]
    if cycle:
        hops = [f"waits on {entry.waits_on} held by {cycle[(i + 1) % len(cycle)].task!r}" for i, entry in enumerate(cycle)]
        lines.append(f"  wait-for cycle: {cycle[0].task!r} " + ", which ".join(hops))
    else:
        stuck = [f"{entry.task!r}, which waits on {entry.waits_on}" for entry in blocked if not entry.held_by]
        lines.append("  no wait-for cycle: nothing left can wake " + "; ".join(stuck))
    return lines
