"""The key reference of scenario files, rendered from the schema so the docs say exactly what the loader checks.

`scenarios/README.md` embeds `render_reference()` verbatim, and a test keeps the two identical.
"""

from __future__ import annotations

import json
from typing import Any

from sim.scenario.model import SCENARIO
from sim.scenario.schema import REQUIRED, Derived, ListOf, Spec, Table, TaggedTable

_TABLE_HEAD = "| Key | Type | Default | Example | Meaning |\n|---|---|---|---|---|"


def render_reference() -> str:
    """Markdown: one section per table of a scenario file, each key with its type, default, example, meaning."""
    sections: list[str] = []
    _render_table(SCENARIO, SCENARIO.title, "", sections)
    return "\n\n".join(sections) + "\n"


def _render_table(table: Table, heading: str, path: str, sections: list[str]) -> None:
    rows = [_row(key, spec, path) for key, spec in table.fields.items()]
    body = [f"### {heading}", table.description, "\n".join([_TABLE_HEAD, *rows])]
    notes = _notes(table)
    if notes:
        body.append(notes)
    sections.append("\n\n".join(body))
    for key, spec in table.fields.items():
        child = _child_table(spec)
        if child is not None:
            child_path = _child_path(path, key)
            _render_table(child, _header(child_path, spec), child_path, sections)
    for part in table.include:
        if not any(section.startswith(f"### {part.title}\n") for section in sections):
            _render_table(part, part.title, path, sections)


def _child_table(spec: Spec) -> Table | None:
    if isinstance(spec, Table):
        return spec
    if isinstance(spec, ListOf) and isinstance(spec.item, Table):
        return spec.item
    return None


def _child_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _header(path: str, spec: Spec) -> str:
    """The TOML header that opens a table: `[world]`, or `[[drive]]` for a list of tables."""
    return f"`[[{path}]]`" if isinstance(spec, ListOf) else f"`[{path}]`"


def _row(key: str, spec: Spec, path: str) -> str:
    if _child_table(spec) is None:
        type_text = spec.type_name
    else:
        type_text = f"{spec.type_name}, see {_header(_child_path(path, key), spec)}"
    example = f"`{spec.example}`" if spec.example else ""
    return f"| `{key}` | {type_text} | {_default_text(spec.default)} | {example} | {spec.description} |"


def _default_text(default: Any) -> str:
    if default is REQUIRED:
        return "required"
    if default is None:
        return "none"
    if isinstance(default, Derived):
        return default.text
    return f"`{_toml(default)}`"


def _toml(value: Any) -> str:
    """A default as it would be written in the file."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + " }" if value else "{}"
    return str(value)


def _notes(table: Table) -> str:
    """The rules that tie keys together, in words."""
    lines = [f"- Exactly one of {_keys(group.keys)} ({group.what})." for group in table.one_of]
    lines += [f"- `{key}` needs {_keys(needed)}." for key, needed in table.requires.items()]
    lines += [f"- Also takes every key of *{part.title}*." for part in table.include]
    if isinstance(table, TaggedTable):
        lines.append(f"- Also takes {table.variants_text}.")
    return "\n".join(lines)


def _keys(keys: tuple[str, ...]) -> str:
    return ", ".join(f"`{key}`" for key in keys)
