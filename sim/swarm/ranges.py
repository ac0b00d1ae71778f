"""Specs for what a workload draws per run: a range of numbers, or a list of values to pick one from.

A workload states ranges, not values: `messages = [0, 40]` draws an integer from 0 to 40 in each run, and
`messages = 12` is the range of one value. A value that is not a number (a bool or a string config field,
a choice parameter) is drawn from a list of the values allowed (`in_place = [true, false]`). The specs
check like every other scenario key (`sim.scenario.schema`), so a bad range names its file and key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sim.scenario.schema import Bool, Context, Float, Int, Location, Spec, Str, describe, unknown_key


@dataclass(frozen=True)
class Span:
    """A closed range to draw from; `low == high` is one value."""

    low: Any
    high: Any


@dataclass(frozen=True)
class ValuePick:
    """Values of which a run draws one."""

    values: tuple[Any, ...]


class RangeOf(Spec):
    """One value of `item`'s kind, or `[low, high]` with low <= high: a Span either way."""

    def __init__(self, description: str = "", *, item: Spec, **kw: Any) -> None:
        super().__init__(description, **kw)
        self.item = item
        self.type_name = f"{item.type_name}, or a range [low, high] of them"

    def check(self, value: Any, where: Location, ctx: Context) -> Span:
        if not isinstance(value, list):
            one = self.item.check(value, where, ctx)
            return Span(one, one)
        if len(value) != 2:
            raise where.error(f"a range [low, high] of {self.item.type_name}", f"a list of {len(value)}")
        low, high = (self.item.check(entry, where.index(i), ctx) for i, entry in enumerate(value))
        if low > high:
            raise where.error("a range [low, high] with low <= high", f"[{describe(value[0])}, {describe(value[1])}]")
        return Span(low, high)


class PickOf(Spec):
    """One value of `item`'s kind, or a non-empty list of them: a ValuePick either way."""

    def __init__(self, description: str = "", *, item: Spec, **kw: Any) -> None:
        super().__init__(description, **kw)
        self.item = item
        self.type_name = f"{item.type_name}, or a non-empty list of them"

    def check(self, value: Any, where: Location, ctx: Context) -> ValuePick:
        if not isinstance(value, list):
            return ValuePick((self.item.check(value, where, ctx),))
        if not value:
            raise self.reject(value, where, ctx)
        return ValuePick(tuple(self.item.check(entry, where.index(i), ctx) for i, entry in enumerate(value)))


_CONFIG_DRAWS: dict[type, Spec] = {
    int: RangeOf(item=Int()), float: RangeOf(item=Float()), bool: PickOf(item=Bool()), str: PickOf(item=Str()),
}


class ConfigRanges(Spec):
    """Config fields of the reference, each a range (numbers) or a list to pick from (booleans, strings)."""

    type_name = "a table of reference config fields, each a value, a range [low, high] or a list to pick from"

    def check(self, value: Any, where: Location, ctx: Context) -> dict[str, Span | ValuePick]:
        if not isinstance(value, dict):
            raise self.reject(value, where, ctx)
        fields: Mapping[str, type] = ctx.registry.config_fields
        draws = {}
        for key, entry in value.items():
            if key not in fields:
                raise unknown_key(where.key(key), fields, "a config field of the reference", see="config")
            draws[key] = _CONFIG_DRAWS[fields[key]].check(entry, where.key(key), ctx)
        return draws
