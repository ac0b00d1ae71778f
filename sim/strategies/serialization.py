"""The one place decisions become JSON and come back: trace lines, repro files and their sparse form.

A task choice is `["task", options, choice]`, a draw `["draw", stream, bound, choice]`. A repro file keeps
only the non-default decisions, each prefixed with its position among all the run's choice points, so a
decision list is as long as the deviations a reader has to understand; `expand` restores the full
sequence with `DEFAULT` at the other points.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sim.kernel.decisions import DEFAULT, Decision, Draw, Recorded, TaskChoice, is_default

TASK = "task"
DRAW = "draw"


def to_json(decision: Decision) -> list[Any]:
    if isinstance(decision, TaskChoice):
        return [TASK, decision.options, decision.choice]
    return [DRAW, decision.stream, decision.bound, decision.choice]


def from_json(entry: Sequence[Any]) -> Decision:
    """A decision from its JSON form; ValueError naming what was expected otherwise."""
    parts: list[Any] = list(entry) if isinstance(entry, (list, tuple)) and entry else [None]
    kind, fields = parts[0], parts[1:]
    if kind == TASK and len(fields) == 2 and all(_is_count(f) for f in fields) and fields[1] < fields[0]:
        return TaskChoice(fields[0], fields[1])
    if kind == DRAW and len(fields) == 3 and isinstance(fields[0], str) and all(_is_count(f) for f in fields[1:]) \
            and fields[2] < fields[1]:
        return Draw(fields[0], fields[1], fields[2])
    raise ValueError(f"expected [\"task\", options, choice] or [\"draw\", stream, bound, choice], got {entry!r}")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def sparse(decisions: Sequence[Decision]) -> list[list[Any]]:
    """The non-default decisions, each as [position, *its JSON form]."""
    return [[position, *to_json(decision)] for position, decision in enumerate(decisions) if not is_default(decision)]


def expand(entries: Sequence[Sequence[Any]], points: int) -> list[Recorded]:
    """The full decision sequence of `points` choice points from its sparse form; ValueError if malformed."""
    full: list[Recorded] = [DEFAULT] * points
    for entry in entries:
        if not isinstance(entry, (list, tuple)) or not entry or not _is_count(entry[0]):
            raise ValueError(f"expected [position, kind, ...], got {entry!r}")
        position = entry[0]
        if position >= points:
            raise ValueError(f"a decision at position {position} lies outside the run's {points} choice points")
        full[position] = from_json(entry[1:])
    return full
