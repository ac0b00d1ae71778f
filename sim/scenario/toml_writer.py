"""A scenario document written back as TOML: the files the shrinker and a swarm export write.

The standard library reads TOML but does not write it; a scenario document holds only strings, numbers,
booleans, lists and (inline or not) tables, so a small writer covers it, and `tomllib.loads(toml_text(doc))`
gives the document back.
"""

from __future__ import annotations

import json
import math
from typing import Any


def toml_text(document: dict[str, Any]) -> str:
    """A scenario document as TOML: top-level values, then tables, then arrays of tables."""
    plain = {key: value for key, value in document.items() if not _is_table(value) and not _is_table_list(value)}
    lines = [f"{_key_text(key)} = {_value_text(value)}" for key, value in plain.items()]
    for key, value in document.items():
        if _is_table(value):
            lines += ["", f"[{_key_text(key)}]", *_entries(value)]
        elif _is_table_list(value):
            for entry in value:
                lines += ["", f"[[{_key_text(key)}]]", *_entries(entry)]
    return "\n".join(lines) + "\n"


def _is_table(value: Any) -> bool:
    return isinstance(value, dict)


def _is_table_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(entry, dict) for entry in value)


def _entries(table: dict[str, Any]) -> list[str]:
    return [f"{_key_text(key)} = {_value_text(value)}" for key, value in table.items()]


def _key_text(key: str) -> str:
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    return key if bare else _string_text(key)


def _string_text(text: str) -> str:
    # JSON escapes are TOML escapes, except that TOML also wants DEL escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _string_text(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(_value_text, value)) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key_text(k)} = {_value_text(v)}" for k, v in value.items()) + " }" if value else "{}"
    raise TypeError(f"no TOML form for {type(value).__name__} {value!r}")


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)
