"""Scenario keys declared once, on the dataclasses that hold them once loaded.

A field of a loaded-scenario dataclass says which key of the file it comes from and the spec that checks it
(`key(Duration(...))`), or that it holds the keys of another table written inline (`inline(TRIGGER)`: the
trigger keys sit in each drive and fault). The tables the loader checks and the docs render are derived
from the dataclass (`table_of`), and a checked table becomes its dataclass with `build`, so a key cannot be
declared in one place and read in another.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

from sim.scenario.schema import Spec, Table, TaggedTable

T = TypeVar("T")
SPEC = "scenario_spec"
KEY = "scenario_key"
INLINE = "scenario_inline"


def key(spec: Spec, *, name: str | None = None) -> Any:
    """A field read from the file's key `name` (default: the field's own name), checked by `spec`."""
    return dataclasses.field(metadata={SPEC: spec, KEY: name})


def inline(table: Table) -> Any:
    """A field built from `table`'s keys, which are written in this table rather than nested in their own."""
    return dataclasses.field(metadata={INLINE: table})


def _keys(model: type) -> dict[str, Spec]:
    return {f.metadata[KEY] or f.name: f.metadata[SPEC] for f in dataclasses.fields(model) if SPEC in f.metadata}


def _inlined(model: type) -> tuple[Table, ...]:
    return tuple(f.metadata[INLINE] for f in dataclasses.fields(model) if INLINE in f.metadata)


def table_of(model: type, description: str, **options: Any) -> Table:
    """The table whose keys `model`'s fields declare."""
    return Table(description, fields=_keys(model), include=_inlined(model), model=model, **options)


def tagged_table_of(model: type, description: str, *, tag: str, variants_text: str, **options: Any) -> TaggedTable:
    """Like `table_of`, for a table whose `tag` key picks further keys from the registry (a fault's kind)."""
    keys = _keys(model)
    tag_spec = keys.pop(tag)
    return TaggedTable(description, tag=tag, tag_spec=tag_spec, variants_text=variants_text, fields=keys,  # type: ignore[arg-type]  # the tag's spec is a Registered, as tagged tables declare theirs
                       include=_inlined(model), model=model, **options)


def build(model: type[T], checked: dict[str, Any], **computed: Any) -> T:
    """A checked table as its dataclass; fields that are not keys (or need more than their key) are `computed`."""
    values = {}
    for name, source, inlined in _sources(model):  # type: ignore[arg-type]  # a class is hashable: the checker reads type(x).__hash__ as the instance's
        if name in computed:
            values[name] = computed[name]
        elif source is not None:
            values[name] = checked[source]
        elif inlined is not None:
            values[name] = build(inlined, checked)
        else:
            raise TypeError(f"{model.__name__}.{name} is no key of the file: the loader must compute it")
    return model(**values)


@functools.cache
def _sources(model: type) -> tuple[tuple[str, str | None, type | None], ...]:
    """Per field of `model`: its name, the key it is read from, the model of the table it inlines. Worked out
    once per model: a generated run builds some forty tables, and reading the field metadata each time was a
    third of that."""
    return tuple((f.name, f.metadata[KEY] or f.name if SPEC in f.metadata else None,
                  f.metadata[INLINE].model if INLINE in f.metadata else None)
                 for f in dataclasses.fields(model))
