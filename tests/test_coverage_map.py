"""The catalogue's coverage map (sim/mutation/coverage_map.py): kept for one digest of the code, each scenario under the
hash of its file, traced again exactly when what it records can have changed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sim.mutation.coverage_map import CoverageMap, ScenarioLines, code_digest, load, obtain, save, scenario_hash, trace_document
from sim.mutation.reach import Reach

ROOT = Path(__file__).resolve().parent.parent
R1 = ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml"
OTHER = ROOT / "scenarios" / "turn_right_after_restart_keeps_user_message.toml"


def tree(root: Path) -> Path:
    for file in ("contract/c.py", "faults/f.py", "reference/r.py", "sim/s.py", "docs/notes.md"):
        (root / file).parent.mkdir(parents=True, exist_ok=True)
        (root / file).write_text(f"# {file}\n")
    return root


@pytest.mark.parametrize("edit", ["contract/c.py", "faults/f.py", "reference/r.py", "sim/s.py", "sim/new.py"])
def test_the_code_digest_changes_with_any_module_that_decides_what_a_run_executes(tmp_path, edit):
    root = tree(tmp_path)
    before = code_digest(root)
    (root / edit).write_text("changed = True\n")
    assert code_digest(root) != before


def test_the_code_digest_ignores_what_no_run_executes(tmp_path):
    root = tree(tmp_path)
    before = code_digest(root)
    (root / "docs" / "notes.md").write_text("rewritten\n")
    assert code_digest(root) == before


class Tracer:
    """Stands in for the tracing child processes: records which scenario paths it was asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, shards: Sequence[Sequence[str]], jobs: int) -> list[dict[str, Any]]:
        paths = [path for shard in shards for path in shard]
        self.asked += paths
        return [{"common": {"reference/a.py": [1]},
                 "scenarios": [{"path": path, "name": Path(path).stem, "steps": 10, "lines": {"reference/a.py": [5]}}
                               for path in paths]}]


def scenario(folder: Path, name: str, text: str = "") -> Any:
    path = folder / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{text}')
    return SimpleNamespace(name=name, path=str(path), expect=SimpleNamespace(must_fail_under=()))


def test_a_kept_map_is_reused_and_only_a_changed_or_new_scenario_is_traced_again(tmp_path):
    kept = tmp_path / "out" / "coverage-map.json"
    a, b = scenario(tmp_path, "a"), scenario(tmp_path, "b")
    tracer = Tracer()
    first = obtain([a, b], kept, 2, code="code-1", trace=tracer)
    assert first.traced == 2 and "built" in first.summary() and sorted(tracer.asked) == sorted([a.path, b.path])

    tracer.asked.clear()
    again = obtain([a, b], kept, 2, code="code-1", trace=tracer)
    assert again.traced == 0 and tracer.asked == [] and "reused" in again.summary()
    assert again.map.entry(a).lines == {"reference/a.py": frozenset({5})}

    Path(b.path).write_text('name = "b"\n# edited\n')
    c = scenario(tmp_path, "c")
    obtain([a, b, c], kept, 2, code="code-1", trace=tracer)
    assert sorted(tracer.asked) == sorted([b.path, c.path])

    tracer.asked.clear()
    obtain([a, b, c], kept, 2, code="code-2", trace=tracer)
    assert sorted(tracer.asked) == sorted([a.path, b.path, c.path])


def test_a_map_of_other_code_or_a_broken_file_is_not_used(tmp_path):
    kept = tmp_path / "coverage-map.json"
    save(kept, CoverageMap("code-1", {"reference/a.py": frozenset({1})}, {"h": ScenarioLines("a", {}, 3)}))
    assert load(kept, "code-1").scenarios["h"].steps == 3
    assert load(kept, "code-2").scenarios == {}
    kept.write_text("{not json")
    assert load(kept, "code-1").scenarios == {}
    assert load(tmp_path / "missing.json", "code-1").scenarios == {}
    assert not list(tmp_path.glob("*.partial"))


def test_reaching_scenarios_are_those_that_execute_a_needed_line_cheapest_first(tmp_path):
    a, b, c = (scenario(tmp_path, name) for name in "abc")
    coverage = CoverageMap("code", {"reference/a.py": frozenset({1})}, {
        scenario_hash(a.path): ScenarioLines("a", {"reference/a.py": frozenset({5, 6})}, 30),
        scenario_hash(b.path): ScenarioLines("b", {"reference/a.py": frozenset({6}), "reference/b.py": frozenset({9})}, 10),
        scenario_hash(c.path): ScenarioLines("c", {"reference/b.py": frozenset({5})}, 5),
    })
    assert coverage.reaching([a, b, c], Reach("reference/a.py", frozenset({6, 7}))) == [b, a]
    assert coverage.reaching([a, b, c], Reach("reference/b.py", frozenset({2}))) == []
    assert coverage.reaching([a, b, c], Reach("reference/a.py", frozenset({1}))) == [c, b, a]  # what loading runs
    assert coverage.reaching([a, b, c], Reach("reference/z.py", frozenset(), everywhere=True)) == [c, b, a]


def test_each_scenario_is_traced_as_if_alone_in_its_process():
    """A cached function runs its body once per process: each scenario must still be charged with it, or a
    mutant of that body would be run only against whichever scenario happened to run first."""
    document = trace_document([R1, OTHER])
    body = next(number for number, line in enumerate((ROOT / "reference" / "db.py").read_text().splitlines(), 1)
                if line.strip().startswith('return "now" in inspect.signature'))
    first, second = document["scenarios"]
    assert body in first["lines"]["reference/db.py"] and body in second["lines"]["reference/db.py"]
    assert first["steps"] > 0 and json.dumps(document)  # what a child prints


def test_the_map_is_built_by_child_processes(tmp_path):
    scenarios = [SimpleNamespace(name=R1.stem, path=str(R1))]
    built = obtain(scenarios, tmp_path / "coverage-map.json", 1)
    lines = built.map.entry(scenarios[0]).lines
    assert built.traced == 1 and "reference/agent.py" in lines and "reference/chat.py" not in lines
