"""What one generated run reached, finer than the event kinds its coverage marks name.

A run's signature is a set of marks, each a string with its family first:
- `pair:A>B`: an event of kind B recorded right after one of kind A (orders of events, not just events);
- `fault:K@P`: a fault of kind K fired at P (its point; for a store fault `db.<op>`, the point that names its
  operation; `-` for a fault that acts at a moment, such as a crash);
- `check:I.M`: invariant I had something to judge: its method M read an event of the run (its
  precondition was met, so the run could have broken it that way).
- `on:K`: the action or fault kind K was enabled in the run (swarm testing's subset); the feedback credits
  a kind with what the runs it was on reached.

Marks are derived from the history alone after the run, so taking a signature changes nothing about the run.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from contract.events.faults import FaultFired
from contract.history import HistoryEvent
from sim.invariants import INVARIANTS

PAIR, FAULT, CHECK, ON = "pair:", "fault:", "check:", "on:"
FAMILIES = (PAIR, FAULT, CHECK, ON)


def signature(history: Sequence[HistoryEvent], enabled: Iterable[str] = ()) -> frozenset[str]:
    """The marks of a run's history, with the kinds that were enabled in it."""
    kinds = [record.event.kind for record in history]
    marks = {f"{PAIR}{a}>{b}" for a, b in zip(kinds, kinds[1:])}
    marks |= {f"{FAULT}{record.event.fault_kind}@{fault_place(record.event)}"
              for record in history if isinstance(record.event, FaultFired)}
    marks |= checks({type(record.event) for record in history})
    marks |= {f"{ON}{kind}" for kind in enabled}
    return frozenset(marks)


def fault_place(event: FaultFired) -> str:
    """Where a firing acted, named as a workload names its points (`-` for a fault at a moment)."""
    point = getattr(event, "point", None)
    if point is not None:
        return str(point)
    op = getattr(event, "op", None)
    return "-" if op is None else f"db.{op}"


def checks(event_classes: set[type]) -> set[str]:
    """`check:` marks: each invariant method that some event class of the run is routed to."""
    return set().union(*map(_checks_of, event_classes))


@functools.cache
def _checks_of(event_class: type) -> frozenset[str]:
    """The invariant methods that read events of one class (worked out once per class and process)."""
    methods = ((name, invariant.handler_name(event_class)) for name, invariant in INVARIANTS.items())
    return frozenset(f"{CHECK}{name}.{method}" for name, method in methods if method is not None)


def family_counts(marks: Iterable[str]) -> dict[str, int]:
    """How many marks of each family: the size of what a run or a campaign reached."""
    counts = {family.rstrip(":"): 0 for family in FAMILIES}
    for mark in marks:
        family = mark.split(":", 1)[0]
        counts[family] = counts.get(family, 0) + 1
    return counts
