"""A small declarative schema: what each scenario key may hold, its default, an example and what it means.

Validation, error messages and the key reference in `scenarios/README.md` all come from the same specs, so
the docs cannot drift from what the loader accepts. Fault kinds declare their parameters with these specs
too, which is why they are public.

A spec's `check(value, where, ctx)` returns the value converted (durations to float seconds, lists to
tuples) or raises a `ScenarioError` naming the exact key path. `where` is the key path being checked; `ctx`
carries the registry (the names the reference defines: points, events, invariants ...) and collects the
names the file declares and references, which are resolved once the whole file has been read, because a
reference may come before its declaration.
"""

from __future__ import annotations

import datetime
import difflib
import json
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from contract.params import REQUIRED, Param, ParamType
from sim.scenario.scenario_error import ScenarioError

if TYPE_CHECKING:
    from sim.scenario.loader import ScenarioRegistry

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
JSON_MAX_DEPTH = 32
_LISTED_NAMES_MAX = 12
# Registry sources and the `python -m sim list` subject that prints each in full.
_LIST_SUBJECTS = {"fault_kinds": "faults", "invariants": "invariants", "points": "points", "events": "events",
                  "config_fields": "config", "mutants": "mutants", "coverage_marks": "marks"}
_SHOWN_CHARS_MAX = 60
_SHOWN_INT_LIMIT = 10**_SHOWN_CHARS_MAX
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_DURATION = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h)")
_DURATION_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_EXAMPLES = 'a duration like "250ms", "1.5s" or "10m"'
ID_PATTERN = r"[A-Za-z0-9_.-]+"




@dataclass(frozen=True)
class Derived:
    """A default the loader computes from other keys (the first session, the file name); `text` documents it."""

    text: str


class Location(NamedTuple):
    """Where a value sits: the file and the key path from the document's root (a named tuple: one is made for
    every key of every table checked, thousands per generated run, and only a rejected value reads it)."""

    file: str
    keys: tuple[str | int, ...] = ()

    def key(self, name: str) -> Location:
        return Location(self.file, self.keys + (name,))

    def index(self, position: int) -> Location:  # type: ignore[override]  # a list item's location; never tuple.index
        return Location(self.file, self.keys + (position,))

    @property
    def path(self) -> str:
        """The dotted key path with list indexes, quoting keys that are not bare TOML keys: `world."a b"`."""
        text = ""
        for part in self.keys:
            if isinstance(part, int):
                text += f"[{part}]"
            else:
                shown = part if _BARE_KEY.fullmatch(part) else quote(part)
                text += f".{shown}" if text else shown
        return text

    def error(self, expected: str, found: str) -> ScenarioError:
        return ScenarioError(self.file, self.path, expected, found)


def quote(text: str) -> str:
    """A double-quoted string that stays on one line: anything unprintable (newlines, U+2028) is escaped."""
    quoted_text = json.dumps(text, ensure_ascii=False)
    return "".join(char if char.isprintable() else f"\\u{ord(char):04x}" for char in quoted_text)


def describe(value: Any) -> str:
    """How a found value is shown in a message: TOML-like scalars, and only the shape of containers."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return quote(value if len(value) <= _SHOWN_CHARS_MAX else value[: _SHOWN_CHARS_MAX - 3] + "...")
    if isinstance(value, int):
        # Checked before str(): Python refuses to print integers of more than 4300 digits.
        return str(value) if abs(value) < _SHOWN_INT_LIMIT else "an integer too large to show"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, (datetime.date, datetime.time)):
        return f"a date/time ({value.isoformat()})"
    return type(value).__name__


def quoted(names: Iterable[str]) -> str:
    return ", ".join(map(quote, names))


def listing(names: Collection[str], near: Any = None, see: str | None = None) -> str:
    """The allowed names for a message; long lists put the closest matches first and are cut short.

    A list cut short names the command that prints all of them (`see`: what `python -m sim list` shows).
    """
    ordered = sorted(names)
    if not ordered:
        return "none are defined"
    if len(ordered) <= _LISTED_NAMES_MAX:
        return f"one of {quoted(ordered)}"
    if isinstance(near, str):
        close = difflib.get_close_matches(near, ordered, n=3)
        ordered = close + [name for name in ordered if name not in close]
    rest = f"all {len(ordered)}: python -m sim list {see}" if see else f"and {len(ordered) - _LISTED_NAMES_MAX} more"
    return f"one of {quoted(ordered[:_LISTED_NAMES_MAX])}, ... ({rest})"


def suggestion(value: Any, names: Collection[str]) -> str:
    """A " (did you mean ...?)" hint for a likely typo, or nothing."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, sorted(names), n=1)
    return f" (did you mean {quote(close[0])}?)" if close else ""


def unknown_key(where: Location, allowed: Collection[str], owner: str, see: str | None = None) -> ScenarioError:
    """The error for a key the table does not know, listing the keys it does, with a typo hint."""
    key = where.keys[-1]
    return where.error(f"{owner} ({listing(allowed, key, see)})", "an unknown key" + suggestion(key, allowed))


def missing(spec: Spec, where: Location, ctx: Context) -> ScenarioError:
    return where.error(spec.expected(ctx, None), "nothing (the key is missing)")


class Context:
    """What validating one file needs besides the value: the registry, and the names the file declares.

    Declarations (session ids, agent names, processes) and references to them are collected while the file
    is checked and resolved by `check_references()` at the end, so order inside the file does not matter.
    """

    def __init__(self, registry: ScenarioRegistry) -> None:
        self.registry = registry
        self._declared: dict[str, dict[str, Location]] = {}
        self._references: list[tuple[str, str, Location]] = []

    def declare(self, namespace: str, name: str, where: Location, *, unique: bool) -> None:
        names = self._declared.setdefault(namespace, {})
        if unique and name in names:
            first = names[name].path
            raise where.error(f"each {namespace} declared once", f"{describe(name)} again (first at {first})")
        names.setdefault(name, where)

    def refer(self, namespace: str, name: str, where: Location) -> None:
        self._references.append((namespace, name, where))

    def check_references(self) -> None:
        for namespace, name, where in self._references:
            declared = self._declared.get(namespace, {})
            if name not in declared:
                raise where.error(
                    f"a declared {namespace} ({listing(declared, name)})", describe(name) + suggestion(name, declared)
                )


class Spec(ABC):
    """One key's rule: how to check and convert its value, and what the docs say about it."""

    type_name: str

    def __init__(self, description: str = "", *, default: Any = REQUIRED, example: str | None = None) -> None:
        self.description = description
        self.default = default
        self.example = example

    def expected(self, ctx: Context, value: Any) -> str:
        """What a message says was expected; `value` lets name lists show the closest matches first."""
        return self.type_name

    def reject(self, value: Any, where: Location, ctx: Context) -> ScenarioError:
        return where.error(self.expected(ctx, value), describe(value))

    @abstractmethod
    def check(self, value: Any, where: Location, ctx: Context) -> Any:
        """The value converted for the loaded scenario, or a ScenarioError naming `where`."""


class Str(Spec):
    """A string, optionally matching a pattern described in words for the message."""

    def __init__(self, description: str = "", *, pattern: str | None = None, pattern_text: str = "", **kw: Any) -> None:
        super().__init__(description, **kw)
        self._pattern = re.compile(pattern) if pattern else None
        self.type_name = pattern_text or "a string"

    def check(self, value: Any, where: Location, ctx: Context) -> str:
        if not isinstance(value, str) or (self._pattern is not None and not self._pattern.fullmatch(value)):
            raise self.reject(value, where, ctx)
        return value


def _bounds_text(noun: str, low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"{noun} from {low} to {high}"
    if low is not None:
        return f"{noun} of at least {low}"
    return noun


class Int(Spec):
    """An integer within bounds (TOML's 64-bit range by default); booleans and floats like 3.0 are refused."""

    def __init__(self, description: str = "", *, min: int = INT64_MIN, max: int = INT64_MAX, **kw: Any) -> None:
        super().__init__(description, **kw)
        self._min, self._max = min, max
        low = None if min == INT64_MIN else min
        high = None if max == INT64_MAX else max
        self.type_name = _bounds_text("an integer", low, high)

    def check(self, value: Any, where: Location, ctx: Context) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not self._min <= value <= self._max:
            raise self.reject(value, where, ctx)
        return value


def _finite_float(value: Any) -> float | None:
    """The value as a finite float, or None: booleans, non-numbers, inf, nan and huge integers do not count."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


class Float(Spec):
    """A finite number; integers are accepted and converted, since `2` for 2.0 is what people write."""

    def __init__(
        self, description: str = "", *, min: float | None = None, max: float | None = None, **kw: Any
    ) -> None:
        super().__init__(description, **kw)
        self._min, self._max = min, max
        self.type_name = _bounds_text("a number", min, max)

    def check(self, value: Any, where: Location, ctx: Context) -> float:
        number = _finite_float(value)
        if (
            number is None
            or (self._min is not None and number < self._min)
            or (self._max is not None and number > self._max)
        ):
            raise self.reject(value, where, ctx)
        return number


class Probability(Float):
    """A chance, as a number from 0 to 1."""

    def __init__(self, description: str = "", **kw: Any) -> None:
        super().__init__(description, min=0, max=1, **kw)
        self.type_name = "a probability from 0 to 1"


class Bool(Spec):
    type_name = "true or false"

    def check(self, value: Any, where: Location, ctx: Context) -> bool:
        if not isinstance(value, bool):
            raise self.reject(value, where, ctx)
        return value


class Duration(Spec):
    """A span of virtual time: "250ms", "1.5s", "10m", "2h", or a bare number of seconds; float seconds out."""

    type_name = 'a duration ("250ms", "1.5s", "10m", "2h", or a number of seconds)'

    def expected(self, ctx: Context, value: Any) -> str:
        return _DURATION_EXAMPLES

    def check(self, value: Any, where: Location, ctx: Context) -> float:
        seconds = self._seconds(value)
        if seconds is None:
            raise self.reject(value, where, ctx)
        if seconds < 0:
            raise where.error("a duration of 0s or more", describe(value))
        return abs(seconds)  # folds -0.0 into 0.0

    @staticmethod
    def _seconds(value: Any) -> float | None:
        if not isinstance(value, str):
            return _finite_float(value)
        match = _DURATION.fullmatch(value.removeprefix("-"))
        if match is None:
            return None
        seconds = float(match.group(1)) * _DURATION_UNIT_S[match.group(2)]
        if not math.isfinite(seconds):
            return None
        return -seconds if value.startswith("-") else seconds


class _Names(Spec):
    """A string that must be one of a set of names; subclasses say where the names come from."""

    noun = ""
    see: str | None = None  # what `python -m sim list` prints them all with

    @abstractmethod
    def names(self, ctx: Context) -> Collection[str]:
        """The allowed names, for this file's registry."""

    def expected(self, ctx: Context, value: Any) -> str:
        allowed = listing(self.names(ctx), value, self.see)
        return f"{self.noun} ({allowed})" if self.noun else allowed

    def reject(self, value: Any, where: Location, ctx: Context) -> ScenarioError:
        return where.error(self.expected(ctx, value), describe(value) + suggestion(value, self.names(ctx)))

    def check(self, value: Any, where: Location, ctx: Context) -> str:
        if not isinstance(value, str) or not self._allows(value, self.names(ctx)):
            raise self.reject(value, where, ctx)
        return value

    def _allows(self, value: str, names: Collection[str]) -> bool:
        return value in names


class Choice(_Names):
    """One of a fixed set of words written in the schema (an enum)."""

    def __init__(self, description: str = "", *, values: Iterable[str], **kw: Any) -> None:
        super().__init__(description, **kw)
        self.values = tuple(values)
        self.type_name = " or ".join(map(quote, self.values))

    def names(self, ctx: Context) -> Collection[str]:
        return self.values


class Registered(_Names):
    """A name the reference defines (a point, an event kind, an invariant ...), read from the registry.

    With `glob`, a trailing `*` selects every name with that prefix ("db.*"); it must select at least one.
    """

    def __init__(self, description: str = "", *, source: str, noun: str, glob: bool = False, **kw: Any) -> None:
        super().__init__(description, **kw)
        self.source = source
        self.noun = noun
        self.glob = glob
        self.see = _LIST_SUBJECTS.get(source)
        self.type_name = f"{noun}, or a prefix ending in *" if glob else noun

    def names(self, ctx: Context) -> Collection[str]:
        return getattr(ctx.registry, self.source)

    def _allows(self, value: str, names: Collection[str]) -> bool:
        if value in names:
            return True
        if not (self.glob and value.endswith("*")):
            return False
        prefix = value[:-1]
        return "*" not in prefix and any(name.startswith(prefix) for name in names)


class Declared(Spec):
    """A name this file introduces (a session id, an agent); others refer to it with `Reference`."""

    def __init__(self, description: str = "", *, namespace: str, noun: str, unique: bool = True, **kw: Any) -> None:
        super().__init__(description, **kw)
        self.namespace = namespace
        self.unique = unique
        self._name = Str(pattern=ID_PATTERN, pattern_text=f"{noun} (letters, digits, _ . -)")
        self.type_name = self._name.type_name

    def check(self, value: Any, where: Location, ctx: Context) -> str:
        name = self._name.check(value, where, ctx)
        ctx.declare(self.namespace, name, where, unique=self.unique)
        return name


class Reference(Spec):
    """The name of something declared elsewhere in the file; resolved after the whole file is read."""

    def __init__(self, description: str = "", *, namespace: str, **kw: Any) -> None:
        super().__init__(description, **kw)
        self.namespace = namespace
        self.type_name = f"a declared {namespace}"

    def check(self, value: Any, where: Location, ctx: Context) -> str:
        if not isinstance(value, str):
            raise self.reject(value, where, ctx)
        ctx.refer(self.namespace, value, where)
        return value


class Either(Spec):
    """The first alternative that accepts the value's shape: `"all"` or a list of names.

    An alternative that fails on a nested key (a bad name inside the list) has understood the shape, so its
    more precise error is raised; if every alternative refuses the value itself, the message lists them all.
    """

    def __init__(self, description: str = "", *, alternatives: tuple[Spec, ...], **kw: Any) -> None:
        super().__init__(description, **kw)
        self.alternatives = alternatives
        self.type_name = " or ".join(alternative.type_name for alternative in alternatives)

    def check(self, value: Any, where: Location, ctx: Context) -> Any:
        for alternative in self.alternatives:
            try:
                return alternative.check(value, where, ctx)
            except ScenarioError as error:
                if error.key != where.path:
                    raise
        raise self.reject(value, where, ctx)


class ListOf(Spec):
    """A list whose items all follow one spec; returned as a tuple so loaded scenarios stay immutable."""

    def __init__(self, description: str = "", *, item: Spec, plural: str, non_empty: bool = False, **kw: Any) -> None:
        super().__init__(description, **kw)
        self.item = item
        self.non_empty = non_empty
        self.type_name = f"a non-empty list of {plural}" if non_empty else f"a list of {plural}"

    def check(self, value: Any, where: Location, ctx: Context) -> tuple[Any, ...]:
        if not isinstance(value, list) or (self.non_empty and not value):
            raise self.reject(value, where, ctx)
        return tuple(self.item.check(entry, where.index(position), ctx) for position, entry in enumerate(value))


class ExactlyOne(NamedTuple):
    """Keys of which a table must set exactly one, and what they are together (e.g. "the trigger")."""

    what: str
    keys: tuple[str, ...]


def _owner(where: Location) -> str:
    return f"a key of {where.path}" if where.keys else "a top-level key"


class Table(Spec):
    """A TOML table with known keys: unknown keys are errors, missing keys take their defaults.

    `include` merges shared key sets (the trigger keys of drives and faults), documented once under their
    `title`. `one_of` lists groups of keys of which exactly one must be set; `requires` says which keys
    only make sense together with others (`nth` counts hits of a `point`).
    """

    type_name = "a table"

    def __init__(
        self,
        description: str = "",
        *,
        fields: Mapping[str, Spec],
        include: tuple[Table, ...] = (),
        one_of: tuple[ExactlyOne, ...] = (),
        requires: Mapping[str, tuple[str, ...]] | None = None,
        title: str = "",
        model: type | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(description, **kw)
        self.fields = dict(fields)
        self.include = include
        self.one_of = one_of
        self.requires = dict(requires or {})
        self.title = title
        self.model = model  # the dataclass whose fields declare these keys (`sim.scenario.declare`)

    def all_fields(self) -> dict[str, Spec]:
        merged = dict(self.fields)
        for part in self.include:
            merged.update(part.all_fields())
        return merged

    def all_one_of(self) -> tuple[ExactlyOne, ...]:
        return self.one_of + tuple(group for part in self.include for group in part.all_one_of())

    def all_requires(self) -> dict[str, tuple[str, ...]]:
        merged = dict(self.requires)
        for part in self.include:
            merged.update(part.all_requires())
        return merged

    @cached_property
    def _merged(self) -> tuple[dict[str, Spec], tuple[ExactlyOne, ...], dict[str, tuple[str, ...]]]:
        """`all_fields`, `all_one_of` and `all_requires`, merged once: a table is checked thousands of times
        (every drive and fault of every generated run) and its includes never change."""
        return self.all_fields(), self.all_one_of(), self.all_requires()

    def fields_for(self, value: dict[str, Any], where: Location, ctx: Context) -> dict[str, Spec]:
        """The keys this particular table may hold (not to be changed by the caller); a tagged table's depend
        on its tag."""
        return self._merged[0]

    def check(self, value: Any, where: Location, ctx: Context) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.reject(value, where, ctx)
        fields = self.fields_for(value, where, ctx)
        for key in value:
            if key not in fields:
                raise unknown_key(where.key(key), fields, _owner(where))
        _, one_of, requires = self._merged
        for group in one_of:
            _check_exactly_one(group, value, where)
        for key in value:
            for needed in requires.get(key, ()):
                if needed not in value:
                    raise where.key(key).error(f'"{needed}" alongside "{key}"', f'no "{needed}"')
        checked = {key: fields[key].check(entry, where.key(key), ctx) for key, entry in value.items()}
        for key, spec in fields.items():
            if key not in checked:
                checked[key] = _default(spec, where, key, ctx)
        return checked


def _check_exactly_one(group: ExactlyOne, value: dict[str, Any], where: Location) -> None:
    present = [key for key in value if key in group.keys]
    if not present:
        raise where.error(f"one of the keys {quoted(group.keys)} ({group.what})", "none of them")
    if len(present) > 1:
        raise where.key(present[1]).error(
            f"only one of the keys {quoted(group.keys)} ({group.what})", f'both "{present[0]}" and "{present[1]}"'
        )


def _default(spec: Spec, table: Location, key: str, ctx: Context) -> Any:
    """A missing key's value: an error if required, None if absent or derived later, else the default checked.
    The key's location is made only when needed: most keys of most tables are absent and default to None."""
    if spec.default is REQUIRED:
        raise missing(spec, table.key(key), ctx)
    if spec.default is None or isinstance(spec.default, Derived):
        return None
    return spec.check(spec.default, table.key(key), ctx)


class TaggedTable(Table):
    """A table whose tag key picks further keys from the registry: a fault's `kind` picks its parameters.

    A kind may redeclare an included key (e.g. make `point` required for a stall); the loader still reads
    that key's value where the included table says it belongs.
    """

    def __init__(
        self,
        description: str = "",
        *,
        tag: str,
        tag_spec: Registered,
        variants_text: str,
        fields: Mapping[str, Spec],
        **kw: Any,
    ) -> None:
        super().__init__(description, fields={tag: tag_spec, **fields}, **kw)
        self.tag = tag
        self.tag_spec = tag_spec
        self.variants_text = variants_text

    def fields_for(self, value: dict[str, Any], where: Location, ctx: Context) -> dict[str, Spec]:
        if self.tag not in value:
            raise missing(self.tag_spec, where.key(self.tag), ctx)
        variant = self.tag_spec.check(value[self.tag], where.key(self.tag), ctx)
        variants = self.tag_spec.names(ctx)
        assert isinstance(variants, Mapping), "a tagged table's tag names a registry mapping (its variants' fields)"
        return {**self._merged[0], **variants[variant]}


class JsonTable(Spec):
    """A free-form table stored as JSON (a session's model_config): no dates, no inf/nan, 64-bit integers."""

    type_name = "a table of strings, numbers, booleans, lists and tables"

    def check(self, value: Any, where: Location, ctx: Context) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.reject(value, where, ctx)
        return _json(value, where, 0)


def _json(value: Any, where: Location, depth: int) -> Any:
    if depth > JSON_MAX_DEPTH:
        raise where.error(f"at most {JSON_MAX_DEPTH} levels of nesting", "deeper nesting")
    if isinstance(value, dict):
        return {key: _json(entry, where.key(key), depth + 1) for key, entry in value.items()}
    if isinstance(value, list):
        return [_json(entry, where.index(i), depth + 1) for i, entry in enumerate(value)]
    if isinstance(value, (str, bool)) or isinstance(value, int) and INT64_MIN <= value <= INT64_MAX:
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise where.error("a string, number, boolean, list or table", describe(value))


_CONFIG_VALUE_SPECS: dict[type, Spec] = {int: Int(), float: Float(), bool: Bool(), str: Str()}


class ConfigOverrides(Spec):
    """Overrides of the reference's configuration; the registry says which fields exist and their types."""

    type_name = "a table of reference config fields"

    def check(self, value: Any, where: Location, ctx: Context) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.reject(value, where, ctx)
        fields: Mapping[str, type] = ctx.registry.config_fields
        overrides = {}
        for key, entry in value.items():
            if key not in fields:
                raise unknown_key(where.key(key), fields, "a config field of the reference", see="config")
            overrides[key] = _CONFIG_VALUE_SPECS[fields[key]].check(entry, where.key(key), ctx)
        return overrides


def spec_for(param: Param) -> Spec:
    """The check a fault kind's parameter declaration stands for."""
    common: dict[str, Any] = {"default": param.default, "example": param.example}
    if param.type is ParamType.TEXT:
        return Str(param.description, **common)
    if param.type is ParamType.INTEGER:
        return Int(param.description, min=INT64_MIN if param.minimum is None else param.minimum, **common)
    if param.type is ParamType.DURATION:
        return Duration(param.description, **common)
    if param.type is ParamType.CHOICE:
        return Choice(param.description, values=param.values, **common)
    return Reference(param.description, namespace=param.namespace, **common)
