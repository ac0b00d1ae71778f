"""`bench mutate` compares the selected matrix with the full one (sim/bench/mutate.py): every way the selection
could lose a kill is a list that must come out empty, and each is shown to fill when it should."""

from __future__ import annotations

from sim.bench.mutate import COMPARISONS, compare, render
from sim.mutation.kill_matrix import MutantResult


def result(name: str, kills: dict[str, str], *, survived: tuple[str, ...] = (), expected: tuple[str, ...] = (),
           reaching: int | None = None) -> MutantResult:
    return MutantResult(name, list(expected), killed_by={s: f"replay {s}" for s in kills}, invariants=dict(kills),
                        survived=list(survived), reaching=reaching)


def test_a_selection_that_agrees_with_the_full_matrix_lost_nothing():
    selected = [result("m", {"a": "inv"}, expected=("a",), reaching=2), result("gap", {}, reaching=0)]
    full = [result("m", {"a": "inv", "b": "inv"}, expected=("a",)), result("gap", {}, survived=("a", "b"))]
    figures = compare(selected, full, {"m": {"a", "b"}, "gap": set()})
    assert all(figures[key] == [] for key in COMPARISONS)
    assert (figures["killed_selected"], figures["killed_full"]) == (1, 1)
    assert render({**figures, "benchmark": "mutate"}).endswith("the selection lost nothing")


def test_every_way_of_losing_a_kill_is_named():
    selected = [result("m", {}, survived=("a",), reaching=1), result("n", {"a": "other"}, reaching=1),
                result("gap", {}, reaching=0)]
    full = [result("m", {"b": "inv"}), result("n", {"a": "inv"}), result("gap", {"c": "inv"})]
    figures = compare(selected, full, {"m": {"a"}, "n": {"a"}, "gap": set()})
    assert figures["killed_only_in_full"] == ["gap", "m"]
    assert figures["verdicts_differ"] == ["gap: UNREACHED (full: killed)", "m: SURVIVED (full: killed)"]
    assert figures["unreached_but_killed_in_full"] == ["gap"]
    assert figures["selected_kills_not_in_full"] == ["n by a (other)"]
    assert figures["full_kills_outside_reach"] == ["gap by c", "m by b"]
    assert "DIFFERS" in render({**figures, "benchmark": "mutate"})
