"""Operator mutation: the edits each operator makes, stable ids, seeded sampling, the equivalents file, the
overlay that leaves the working tree alone, and one end-to-end run of `mutate --operators`."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import checkout_env

from sim.mutation import operators
from sim.mutation.mutants import ROOT, overlay_with
from sim.mutation.operators import (
    SKIPPED,
    Equivalent,
    Killers,
    MutantRun,
    OperatorCandidate,
    OperatorReport,
    all_candidates,
    catalogue_verdict,
    chosen,
    load_equivalents,
    module_candidates,
    reference_sources,
    run_sample,
    sample,
    stale_equivalents,
    swarm_verdict,
)

FILE = "pkg/synthetic.py"
# The "é" before the last line's `!=` proves columns are characters, not UTF-8 bytes.
SYNTHETIC = '''"""Synthetic: one construct for every operator."""


async def run(lease, rt, items, limit):
    if lease is None:
        raise ValueError("no lease")
    if not items and limit > 0:
        rt.emit("empty")
        return []
    await lease.release()
    count = await lease.refresh()
    stamp(items, count)
    await rt.checkpoint("after")
    return "é" != items[1:limit] or False
'''
EXPECTED = [
    ("5:8:guard", "lease is None", "False"),
    ("5:14:compare", "is", "is not"),
    ("7:8:not", "not ", ""),
    ("7:8:guard", "not items and limit > 0", "False"),
    ("7:18:boolop", "and", "or"),
    ("7:28:compare", ">", "<="),
    ("7:30:constant", "0", "1"),
    ("9:9:return", "return []", "pass"),
    ("10:5:call", "await lease.release()", "pass"),
    ("10:5:swap", "await lease.release()\n    count = await lease.refresh()", "count = await lease.refresh()\n    await lease.release()"),
    ("12:5:call", "stamp(items, count)", "pass"),
    ("14:16:compare", "!=", "=="),
    ("14:25:constant", "1", "2"),
    ("14:34:boolop", "or", "and"),
    ("14:37:constant", "False", "True"),
]


def _tree_digest() -> str:
    hasher = hashlib.sha256()
    for path in sorted((ROOT / "reference").rglob("*.py")):
        hasher.update(path.read_bytes())
    return hasher.hexdigest()


# ---- operators -----------------------------------------------------------------------------------


def test_each_operator_makes_the_expected_edit_in_a_stable_order():
    found = [(c.id.removeprefix(f"{FILE}:"), c.original, c.replacement) for c in module_candidates(FILE, SYNTHETIC)]
    assert found == EXPECTED
    assert {candidate_id.split(":")[-1] for candidate_id, _, _ in found} == set(operators.OPERATORS)


def test_observers_are_never_dropped_or_swapped_and_a_read_before_its_binding_is_not_swapped():
    touched = {c.line for c in module_candidates(FILE, SYNTHETIC)}
    assert not touched & {8, 13}, "emit and checkpoint only observe"
    swaps = [c.id for c in module_candidates(FILE, SYNTHETIC) if c.operator == "swap"]
    assert swaps == [f"{FILE}:10:5:swap"], "`stamp(items, count)` reads the `count` line 11 binds"


@pytest.mark.parametrize("candidate", module_candidates(FILE, SYNTHETIC), ids=lambda c: c.id)
def test_text_outside_the_edit_is_byte_identical(candidate: OperatorCandidate):
    mutated = candidate.apply(SYNTHETIC)
    assert mutated[:candidate.start] == SYNTHETIC[:candidate.start]
    assert mutated[candidate.start + len(candidate.replacement):] == SYNTHETIC[candidate.end:]
    assert mutated != SYNTHETIC
    compile(mutated, FILE, "exec", dont_inherit=True)


def test_the_diff_shows_exactly_the_edited_line():
    compare = next(c for c in module_candidates(FILE, SYNTHETIC) if c.id == f"{FILE}:5:14:compare")
    changed = [line for line in compare.diff(SYNTHETIC).splitlines() if line[:1] in "+-"]
    assert changed == [f"--- a/{FILE}", f"+++ b/{FILE}", "-    if lease is None:", "+    if lease is not None:"]


def test_an_edit_whose_text_moved_on_is_refused():
    candidate = module_candidates(FILE, SYNTHETIC)[0]
    with pytest.raises(ValueError, match="no longer reads"):
        candidate.apply(SYNTHETIC.replace("lease is None", "lease is Nope"))


def test_every_reference_candidate_compiles_and_has_a_unique_id():
    sources = reference_sources()
    candidates = all_candidates(sources)
    assert not set(SKIPPED) & set(sources)
    assert len({c.id for c in candidates}) == len(candidates)
    assert candidates == all_candidates(reference_sources()), "enumeration is deterministic"
    for candidate in candidates:
        compile(candidate.apply(sources[candidate.file]), candidate.file, "exec", dont_inherit=True)


# ---- sampling and running ------------------------------------------------------------------------


def test_sampling_is_deterministic_for_a_seed():
    candidates = all_candidates(reference_sources())
    first, again, other = sample(candidates, 1, 20), sample(candidates, 1, 20), sample(candidates, 2, 20)
    assert first == again and first != other
    assert len(first) == 20 and len(set(first)) == 20 and set(first) <= set(candidates)
    assert len(sample(candidates, 1, None)) == len(candidates)


def test_no_mutant_is_launched_once_the_budget_has_run_out(monkeypatch):
    launch = module_candidates(FILE, SYNTHETIC)
    monkeypatch.setattr(operators, "run_candidate", lambda candidate, *_: MutantRun(candidate, None, "", 0.0))
    everything = run_sample(launch, {FILE: SYNTHETIC}, Killers(("scenarios",)), jobs=3, timeout=1.0, budget=None)
    assert [run.candidate for run in everything] == launch, "results come back in launch order"
    assert run_sample(launch, {FILE: SYNTHETIC}, Killers(("scenarios",)), jobs=3, timeout=1.0, budget=0.0) == []


def _verdict(name: str, invariant: str | None = None, problems: tuple[str, ...] = ()) -> dict:
    violation = None if invariant is None else {"invariant": invariant, "explanation": "why"}
    return {"scenario": name, "passed": invariant is None and not problems, "problems": list(problems), "violation": violation}


@pytest.mark.parametrize("code, scenarios, stderr, how", [
    (0, [_verdict("a")], "", None),
    (1, [_verdict("a", "run_completes"), _verdict("b", "lease_exclusive")], "", "invariant"),
    (1, [_verdict("a", "run_completes")], "", "crash"),
    (1, [_verdict("a", problems=("fault stall never fired in 20 runs",))], "", "vacuity"),
    (2, None, "ImportError: cannot import name 'x'", "crash"),
])
def test_a_catalogue_run_is_classified_by_how_it_kills(code, scenarios, stderr, how):
    stdout = "" if scenarios is None else json.dumps({"scenarios": scenarios, "passed": code == 0})
    assert catalogue_verdict(code, stdout, stderr)[0] == how


def _failure(invariant: str) -> dict:
    return {"invariant": invariant, "scenario_name": "single_agent_seed0_run3"}


@pytest.mark.parametrize("code, failures, stderr, how", [
    (0, [], "", None),
    (1, [_failure("run_completes"), _failure("lease_mutual_exclusion")], "", "invariant"),
    (1, [_failure("run_completes")], "", "crash"),
    (2, None, "ImportError: cannot import name 'x'", "crash"),
])
def test_a_swarm_run_is_classified_by_how_it_kills(code, failures, stderr, how):
    stdout = "" if failures is None else json.dumps({"failures": failures, "passed": code == 0})
    assert swarm_verdict(code, stdout, stderr)[0] == how


def test_swarm_options_need_a_swarm_killer(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "sim", "mutate", "--operators", "--swarm-runs", "5"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60, env=checkout_env())
    assert done.returncode == 2 and "--killers swarm or both" in done.stderr, done.stderr


def test_the_overlay_never_modifies_the_working_tree():
    before = _tree_digest()
    file = "reference/lease.py"
    source = (ROOT / file).read_text(encoding="utf-8")
    candidate = next(c for c in all_candidates({file: source}) if c.operator == "call")
    with overlay_with(file, candidate.apply(source), label="test") as folder:
        assert (folder / file).read_text(encoding="utf-8") == candidate.apply(source)
    assert not folder.exists()
    assert _tree_digest() == before


# ---- equivalents and the score -------------------------------------------------------------------


def test_equivalents_are_left_out_of_the_score_and_a_killed_one_is_contradicted(tmp_path: Path):
    candidates = module_candidates(FILE, SYNTHETIC)
    marked = {c.id: Equivalent(c.id, c.line_text, "cannot differ") for c in candidates[:2]}
    hows = ["invariant", None, None, "crash", "timeout", "vacuity", None]
    runs = [MutantRun(c, how, "", 1.0) for c, how in zip([candidates[1], candidates[0], *candidates[2:]], hows)]
    report = OperatorReport(candidates, candidates[:7], runs, marked, {FILE: SYNTHETIC}, 1, 2, 60.0)
    assert [run.candidate.id for run in report.equivalent_runs()] == [candidates[0].id]
    assert [run.candidate.id for run in report.contradicted()] == [candidates[1].id]
    assert report.killed() == 4 and report.non_equivalent() == 6
    assert operators.score_line(report) == "mutation score: 4 killed / 6 non-equivalent = 66.7%"
    rendered = operators.render(report)
    assert f"marked equivalent but killed (invariant: ): {candidates[1].id}" in rendered
    assert [line for line in rendered.splitlines() if line.startswith("SURVIVED")] == [
        f"SURVIVED {run.candidate.id}" for run in report.survivors()
    ]


def test_with_both_killers_the_swarm_alone_is_scored_over_the_same_non_equivalent_mutants():
    """The swarm judges first: its kills are its own, the catalogue's come after, and both share one denominator."""
    candidates = module_candidates(FILE, SYNTHETIC)[:4]
    judged = [("invariant", "swarm"), ("vacuity", "catalogue"), (None, None), ("crash", "swarm")]
    runs = [MutantRun(c, how, "", 1.0, killer) for c, (how, killer) in zip(candidates, judged)]
    report = OperatorReport(candidates, candidates, runs, {}, {FILE: SYNTHETIC}, 1, 2, 60.0, both=True)
    assert report.killed(killer="swarm") == 2 and report.killed(killer="catalogue") == 1
    assert operators.score_line(report) == (
        "mutation score: 3 killed / 4 non-equivalent = 75.0%; the swarm alone 2 = 50.0%, the catalogue after it 1")
    document = operators.report_json(report)
    assert (document["swarm_score"], document["killed_by_swarm"], document["killed_by_catalogue"]) == (50.0, 2, 1)
    assert [entry["killer"] for entry in document["mutants"]] == ["swarm", "catalogue", None, "swarm"]


def test_stale_equivalent_ids_are_reported_by_name(tmp_path: Path):
    path = tmp_path / "equivalent.toml"
    path.write_text(
        '[[equivalent]]\nid = "pkg/synthetic.py:5:14:compare"\nline = "if lease is None:"\nreason = "r"\n\n'
        '[[equivalent]]\nid = "pkg/synthetic.py:7:28:compare"\nline = "if limit > 0:"\nreason = "r"\n\n'
        '[[equivalent]]\nid = "pkg/synthetic.py:99:1:call"\nline = "gone()"\nreason = "r"\n',
        encoding="utf-8",
    )
    equivalents = load_equivalents(path)
    assert stale_equivalents(equivalents, module_candidates(FILE, SYNTHETIC)) == [
        "pkg/synthetic.py:7:28:compare: the line now reads 'if not items and limit > 0:'",
        "pkg/synthetic.py:99:1:call: no such candidate",
    ]


def test_every_checked_in_equivalent_pins_its_line_and_says_why():
    for entry in load_equivalents().values():
        assert entry.line.strip() and entry.reason.strip(), entry.id
        assert entry.id.split(":")[-1] in operators.OPERATORS, entry.id


# ---- selection by the coverage map ---------------------------------------------------------------


def _catalogue_reaching(tmp_path: Path, candidate: OperatorCandidate, reached: bool) -> tuple[Any, Any]:
    """A one-scenario catalogue whose map has it execute the candidate's lines, or not."""
    from sim.mutation.coverage_map import CoverageMap, ScenarioLines, scenario_hash
    from sim.mutation.reach import edit_reach

    source = reference_sources()[candidate.file]
    needed = edit_reach(candidate.file, source, candidate.apply(source))
    path = tmp_path / "one.toml"
    path.write_text('name = "one"\n')
    one = SimpleNamespace(name="one", path=str(path))
    lines = needed.lines if reached else frozenset({max(needed.lines) + 1000})
    coverage = CoverageMap("code", {}, {scenario_hash(path): ScenarioLines("one", {candidate.file: lines}, 1)})
    return one, operators.Selection(coverage, (one,))


def _function_body_candidate() -> OperatorCandidate:
    """A candidate inside a function body (one at import level is reached by every scenario)."""
    return next(c for c in all_candidates(reference_sources()) if c.file == "reference/pool.py" and c.operator == "compare")


def test_a_candidate_no_scenario_reaches_is_unreached_and_never_run(tmp_path: Path, monkeypatch):
    candidate = _function_body_candidate()
    _, selection = _catalogue_reaching(tmp_path, candidate, reached=False)
    monkeypatch.setattr(operators, "overlay_with", lambda *a, **k: pytest.fail("an unreached mutant was run"))
    run = operators.run_candidate(candidate, reference_sources()[candidate.file], Killers(scenarios=("scenarios",)), 10.0, selection)
    assert not run.killed and run.unreached and run.verdict == "UNREACHED"
    report = OperatorReport([candidate], [candidate], [run], {}, reference_sources(), 1, 1, 1.0)
    assert f"UNREACHED {candidate.id}" in operators.render(report).splitlines()
    assert operators.report_json(report)["unreached"] == [candidate.id] and report.score() == 0.0


def test_a_reached_candidate_is_judged_by_the_reaching_scenarios_until_the_first_violation(tmp_path: Path, monkeypatch):
    candidate = _function_body_candidate()
    one, selection = _catalogue_reaching(tmp_path, candidate, reached=True)
    judged: list[list[str]] = []
    monkeypatch.setattr(operators, "_overlay_run", lambda folder, argv, timeout, verdict: judged.append(list(argv)) or ("invariant", "one: x"))
    run = operators.run_candidate(candidate, reference_sources()[candidate.file], Killers(scenarios=("scenarios",)), 10.0, selection)
    assert run.killed and not run.unreached
    assert judged[0][:2] == ["run", one.path] and "scenarios" not in judged[0] and "--stop-at-violation" in judged[0]


# ---- end to end ----------------------------------------------------------------------------------


def test_mutate_operators_end_to_end_on_a_tiny_catalogue(tmp_path: Path):
    catalogue = tmp_path / "scenarios"
    catalogue.mkdir()
    shutil.copy(ROOT / "scenarios" / "host_unwind_lets_worker_commit.toml", catalogue)
    done = subprocess.run(
        [sys.executable, "-m", "sim", "mutate", "--operators", "--max", "2", "--seed", "1", "--scenarios", str(catalogue),
         "--min-score", "0", "--json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, env=checkout_env(),
    )  # this checkout's sim and reference, not an installed copy's (the candidates are computed from this one)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["run"] == document["sampled"] == 2 and document["passed"]
    launched = sample(all_candidates(reference_sources()), 1, 2)
    assert sorted(m["id"] for m in document["mutants"]) == sorted(c.id for c in launched)
    assert all(m["diff"].startswith("--- a/reference/") for m in document["mutants"])


def test_the_known_equivalent_mutants_name_current_candidates():
    assert stale_equivalents(load_equivalents(), all_candidates(reference_sources())) == []


def test_only_takes_the_named_candidates_in_order_and_names_the_unknown():
    candidates = module_candidates(FILE, SYNTHETIC)
    second, first = candidates[1].id, candidates[0].id
    assert chosen(candidates, [second, first, second]) == [candidates[1], candidates[0]]
    with pytest.raises(ValueError, match="not a current candidate: reference/x.py:1:1:call"):
        chosen(candidates, [first, "reference/x.py:1:1:call"])


@pytest.mark.parametrize("extra, expected", [
    (["--only", "reference/nowhere.py:1:1:call"], "--only: not a current candidate: reference/nowhere.py:1:1:call"),
    (["--only", "reference/lease.py:1:1:call", "--seed", "1"], "it takes neither --seed nor --max"),
])
def test_only_refuses_unknown_ids_and_a_sample(tmp_path: Path, extra: list[str], expected: str):
    done = subprocess.run([sys.executable, "-m", "sim", "mutate", "--operators", *extra],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60, env=checkout_env())
    assert done.returncode == 2 and expected in done.stderr, done.stderr
