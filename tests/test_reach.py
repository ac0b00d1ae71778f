"""Where an edit can first change a run: the unmutated lines a run must execute for a mutant to differ from the
reference (sim/mutation/reach.py), checked on small modules and against what the line tracer reports."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from sim.mutation.line_trace import LineTrace
from sim.mutation.reach import Reach, edit_reach

MODULE = textwrap.dedent('''\
    LIMIT = 3


    def decorate(f):
        return f


    @decorate
    def guarded(x, default=1):
        """Why it guards."""
        total = 0
        if x > LIMIT:
            total += 1
            return total
        else:
            total -= 1
        call(x,
             total)
        return total


    def call(*args):
        return args


    class Holder:
        size = 2

        def method(self):
            return self.size
    ''')


def line_of(text: str) -> int:
    """The 1-based number of the only line that reads `text`."""
    found = [number for number, line in enumerate(MODULE.splitlines(), 1) if line == text]
    assert len(found) == 1, (text, found)
    return found[0]


def reach_of(old: str, new: str) -> Reach:
    assert MODULE.count(old) == 1
    return edit_reach("m.py", MODULE, MODULE.replace(old, new))


def span(first: str, last: str) -> frozenset[int]:
    return frozenset(range(line_of(first), line_of(last) + 1))


IF = span("    if x > LIMIT:", "        total -= 1")
GUARDED = span("@decorate", "    return total")


def test_an_edited_statement_stands_for_its_own_lines():
    assert reach_of("        total += 1", "        total += 2") == Reach("m.py", frozenset({line_of("        total += 1")}))


def test_an_edited_test_stands_for_its_whole_if_so_a_body_only_the_mutant_runs_is_reached_where_the_test_runs():
    assert reach_of("if x > LIMIT:", "if x >= LIMIT:").lines == IF


def test_an_edited_else_line_which_reports_no_line_of_its_own_stands_for_its_if():
    assert reach_of("    else:\n", "    elif x:\n").lines == IF


def test_an_edited_continuation_line_stands_for_its_whole_statement():
    assert reach_of("         total)", "         -total)").lines == span("    call(x,", "         total)")


def test_a_deletion_stands_for_the_deleted_statement():
    assert reach_of("        return total\n", "").lines == {line_of("        return total")}


def test_lines_inserted_into_a_body_stand_for_the_statement_that_holds_both_neighbours():
    inserted = reach_of("        total += 1\n", "        total += 1\n        total *= 2\n")
    assert inserted.lines == IF


def test_lines_inserted_between_two_statements_of_a_function_stand_for_the_function():
    inserted = reach_of("    call(x,\n", "    total = 5\n    call(x,\n")
    assert inserted.lines == GUARDED
    assert not inserted.everywhere


def test_a_docstring_reports_no_line_so_it_stands_for_its_function():
    assert reach_of('"""Why it guards."""', '"""Why not."""').lines == GUARDED


@pytest.mark.parametrize("old, new", [
    ("LIMIT = 3", "LIMIT = 4"),  # module level
    ("def guarded(x, default=1):", "def guarded(x, default=2):"),  # a signature runs where the function is defined
    ("@decorate\n", "\n"),  # a decorator too
    ("    size = 2", "    size = 3"),  # a class body runs at import
    ("class Holder:", "class Holder(object):"),
])
def test_an_edit_of_code_run_at_import_is_reached_everywhere(old, new):
    assert reach_of(old, new).everywhere


def test_a_method_body_is_reached_where_it_runs_not_at_import():
    edited = reach_of("return self.size", "return -self.size")
    assert edited.lines == {line_of("        return self.size")} and not edited.everywhere


def test_the_tracer_reports_a_line_of_every_edit_that_a_run_passes_through(tmp_path: Path, monkeypatch):
    """What the reach of an edit names is what the tracer sees when that code runs: for each edited place, a
    call that passes through it executes a line of its reach."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "m.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    from pkg import m  # type: ignore[import-not-found]  # imported untraced: only what the calls run counts

    tracer = LineTrace(tmp_path, "pkg")
    executed: dict[str, set[int]] = {}
    tracer.start()
    try:
        with tracer.into(executed):
            m.guarded(5)
            m.guarded(0)
    finally:
        tracer.stop()
        sys.modules.pop("pkg.m", None)
        sys.modules.pop("pkg", None)
    lines = executed["pkg/m.py"]
    for old, new in [("total += 1", "total += 2"), ("    else:\n", "    elif x:\n"), ("         total)", "         -total)"),
                     ('"""Why it guards."""', '"""Why not."""'), ("    call(x,\n", "    total = 5\n    call(x,\n")]:
        assert reach_of(old, new).lines & lines, (old, new)
    assert not reach_of("return self.size", "return -self.size").lines & lines  # never called: not reached
