"""Where an edit of the reference can first change a run: the lines of the unmutated file it stands on.

Runs are deterministic, so a run under a mutant is the unmutated run, step for step, until it first executes
code the mutant changed; at that moment the unmutated run executes the code that stood there. A run that never
executes any line of that code runs the same under the mutant, and passes as the unmutated reference does. A
scenario can kill a mutant only if its unmutated runs execute one of the lines this module names (`Reach`).

The lines are those of the UNMUTATED file. Each line a patch replaces or deletes stands for the innermost
statement that holds it, and a statement stands for every line of it, since which of its lines a tracer
reports depends on the bytecode (an `else:` or a `finally:` line reports nothing, a statement that spans
lines may report only its later ones). A statement that reports no line of its own (`global`, a docstring, a
bare constant) stands for the statement around it. Lines inserted between two lines stand for the innermost
statement that holds both neighbours: a new first line of a body runs only when the statement around it does.
So a mutated `if` whose body only runs under the mutant is reached wherever its test runs.

An edit of code that runs at import (module or class level, a decorator, a signature, a default) changes every
run in a process that imports it, whatever the scenario: it is reached everywhere.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterator
from dataclasses import dataclass

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Reach:
    """The unmutated lines of `file` whose execution a mutant needs; `everywhere`: it changes import-time code."""

    file: str
    lines: frozenset[int]
    everywhere: bool = False


@dataclass(frozen=True)
class _Statement:
    node: ast.stmt
    first: int  # decorators included
    last: int
    depth: int
    parent: _Statement | None
    in_function: bool  # inside a function's body: runs when called, not at import

    def span(self) -> frozenset[int]:
        return frozenset(range(self.first, self.last + 1))

    def header_last(self) -> int:
        """The last line of a definition's header (decorators, signature), before its body."""
        return self.node.body[0].lineno - 1  # type: ignore[attr-defined]  # a definition node: it has a body


def edit_reach(file: str, before: str, after: str) -> Reach:
    """The lines of `before` (the unmutated text of `file`) on which the edit to `after` can first be run."""
    statements = list(_statements(ast.parse(before, filename=file).body, None, 0, False))
    replaced, gaps = _touched(before.splitlines(), after.splitlines())
    holders = [_innermost(statements, line, line) for line in replaced]
    holders += [_innermost(statements, gap, gap + 1) for gap in gaps]
    lines: set[int] = set()
    for holder, line in zip(holders, [*replaced, *(gap + 1 for gap in gaps)]):
        witness = _witness(holder, line)
        if witness is None:
            return Reach(file, frozenset(), everywhere=True)
        lines |= witness
    return Reach(file, frozenset(lines))


def _touched(before: list[str], after: list[str]) -> tuple[list[int], list[int]]:
    """The 1-based lines of `before` the edit replaces or deletes, and the gaps it inserts into (after line k)."""
    replaced: list[int] = []
    gaps: list[int] = []
    for tag, start, end, _, _ in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            replaced += range(start + 1, end + 1)
        elif tag == "insert":
            gaps.append(start)
    return replaced, gaps


def _statements(body: list[ast.stmt], parent: _Statement | None, depth: int, in_function: bool) -> Iterator[_Statement]:
    for node in body:
        decorators = [d.lineno for d in getattr(node, "decorator_list", [])]
        statement = _Statement(node, min([node.lineno, *decorators]), node.end_lineno or node.lineno, depth, parent, in_function)
        yield statement
        inner = in_function or isinstance(node, _FUNCTIONS)
        for field in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(node, field, []), statement, depth + 1, inner)
        for handler in getattr(node, "handlers", []):
            yield from _statements(handler.body, statement, depth + 1, inner)
        for case in getattr(node, "cases", []):
            yield from _statements(case.body, statement, depth + 1, inner)


def _innermost(statements: list[_Statement], first: int, last: int) -> _Statement | None:
    """The deepest statement whose lines hold both `first` and `last`; None at module level."""
    holding = [s for s in statements if s.first <= first and last <= s.last]
    return max(holding, key=lambda s: s.depth, default=None)


def _silent(node: ast.stmt) -> bool:
    """A statement a line tracer never reports: it compiles to no instruction of its own."""
    return isinstance(node, (ast.Global, ast.Nonlocal)) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))


def _witness(statement: _Statement | None, line: int) -> frozenset[int] | None:
    """The lines that run whenever the code at `line` (held by `statement`) runs; None: it runs at import."""
    while statement is not None and _silent(statement.node):
        statement = statement.parent
    if statement is None:
        return None
    runs_where_defined = isinstance(statement.node, ast.ClassDef) or (
        isinstance(statement.node, _DEFINITIONS) and line <= statement.header_last())
    if (runs_where_defined or not isinstance(statement.node, _FUNCTIONS)) and not statement.in_function:
        return None
    return statement.span()
