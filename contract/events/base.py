"""What every event is: a frozen dataclass whose class names its kind and whose fields are its trace fields.

`rt.emit(LeaseAcquired(session=..., holder=...))` records one. The trace shows the kind string and the
fields by their keys (`trace_fields()`), in declaration order; a field whose attribute name cannot be its
key (`from` is a Python keyword, durations carry their unit) names its key with `trace(key=...)`, and an
optional field that is absent rather than empty is left out of the trace while it is None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar, dataclass_transform

from contract.ids import AttemptId, HolderId, SessionId

KEY = "trace_key"
OMIT_IF_NONE = "omit_if_none"
NOTE = "note"


def trace(*, key: str | None = None, note: str = "", omit_if_none: bool = False, default: Any = dataclasses.MISSING) -> Any:
    """A field with trace metadata: its key in the trace, a note for the docs, whether None leaves it out (such a
    field says `default=None` too, where a type checker sees that the field may be left out)."""
    if omit_if_none and default is not None:
        raise TypeError("a field left out of the trace while None says default=None (so a type checker sees it may be left out)")
    metadata = {KEY: key, NOTE: note, OMIT_IF_NONE: omit_if_none}
    return dataclasses.field(default=default, metadata=metadata)


_E = TypeVar("_E")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field, trace))
def event(cls: type[_E]) -> type[_E]:
    """Every event class is declared with this: immutable, slotted, and built with keywords only, so an emit site
    reads as the record it writes and a forgotten field is an error where it is made (by a type checker too:
    `dataclass_transform` tells it the class is a dataclass built so)."""
    return dataclasses.dataclass(frozen=True, slots=True, kw_only=True)(cls)


@dataclasses.dataclass(frozen=True)
class TraceField:
    """How one attribute of an event class appears in the trace and in the docs."""

    attribute: str
    key: str
    type_text: str
    note: str
    omit_if_none: bool


@event
class Event:
    """Something observable that happened; subclasses set `kind`, document when they are emitted in their
    docstring's first line, and list in `feeds` the races (§3 of the background) whose invariants read them."""

    kind: ClassVar[str] = ""
    feeds: ClassVar[tuple[str, ...]] = ()

    def trace_fields(self) -> dict[str, Any]:
        """The fields as the trace shows them: by key, in declaration order, absent optional ones left out."""
        shown = {}
        for spec in layout(type(self)):
            value = getattr(self, spec.attribute)
            if value is None and spec.omit_if_none:
                continue
            shown[spec.key] = value
        return shown

    @classmethod
    def from_trace_fields(cls, fields: Mapping[str, Any]) -> Event:
        """The event whose trace shows `fields` (a real run's log line read back), its ids as their value types."""
        values = {}
        for spec in layout(cls):
            if spec.key in fields:
                value = fields[spec.key]
                id_type = _ID_TYPES.get(spec.type_text.split(" | ")[0])
                values[spec.attribute] = id_type(value) if id_type is not None and value is not None else value
        return cls(**values)

    @classmethod
    def fits(cls, keys: set[str]) -> bool:
        """Whether a trace with these keys is one of this class's: every key known, every required one there."""
        return keys <= {spec.key for spec in layout(cls)} and _required_keys(cls) <= keys

    @classmethod
    def summary(cls) -> str:
        """When the event is emitted, in one line: its docstring's first paragraph."""
        first = (cls.__doc__ or "").strip().split("\n\n")[0]
        return " ".join(line.strip() for line in first.splitlines())


_LAYOUTS: dict[type, tuple[TraceField, ...]] = {}


def layout(cls: type[Event]) -> tuple[TraceField, ...]:
    """The trace fields of an event class, worked out once per class."""
    found = _LAYOUTS.get(cls)
    if found is None:
        found = _LAYOUTS[cls] = tuple(_trace_field(f) for f in dataclasses.fields(cls))
    return found


def _trace_field(f: dataclasses.Field[Any]) -> TraceField:
    key = f.metadata.get(KEY) or f.name
    type_text = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    return TraceField(f.name, key, type_text, f.metadata.get(NOTE, ""), bool(f.metadata.get(OMIT_IF_NONE)))


_ID_TYPES: dict[str, type[str]] = {"AttemptId": AttemptId, "HolderId": HolderId, "SessionId": SessionId}


def _required_keys(cls: type[Event]) -> set[str]:
    keys = {spec.attribute: spec.key for spec in layout(cls)}
    return {keys[f.name] for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
