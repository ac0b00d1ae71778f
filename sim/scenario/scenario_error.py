"""The one error a scenario file can cause, so the CLI can report bad input (exit 2) without a traceback."""

from __future__ import annotations

from typing import Any


class ScenarioError(Exception):
    """A scenario file that cannot be used: unreadable, not TOML, or not what the schema expects.

    It carries the file, the key path (dotted, with list indexes: `fault[1].duration`), what was expected
    and what was found as separate fields, so tools can point at the key while `str()` stays one line a
    person can act on: `scenarios/x.toml: fault[1].duration: expected a duration like "250ms", got "ten"`.
    Errors about the file as a whole have an empty key path; TOML syntax and encoding errors also carry the
    line and column, rendered compiler-style (`x.toml:3:7: ...`) so editors can jump to them.
    """

    def __init__(
        self,
        file: str,
        key: str,
        expected: str,
        found: str,
        *,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.file = file
        self.key = key
        self.expected = expected
        self.found = found
        self.line = line
        self.column = column
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}:{self.column}"
        prefix = f"{where}: {self.key}" if self.key else where
        return f"{prefix}: expected {self.expected}, got {self.found}"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields do not survive Exception's default pickling; results cross process
        # boundaries when scenarios are loaded by parallel workers.
        return (_rebuild, (self.file, self.key, self.expected, self.found, self.line, self.column))


def _rebuild(file: str, key: str, expected: str, found: str, line: int | None, column: int | None) -> ScenarioError:
    return ScenarioError(file, key, expected, found, line=line, column=column)
