"""Curated mutants: each applies to the code it names, and applying one never touches the working tree."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from reference.fixes import FIXES
from sim.mutation.mutants import ROOT, Mutant, StaleMutant, load_mutants, overlay

MUTANTS = load_mutants()


def _tree_digest() -> str:
    hasher = hashlib.sha256()
    for path in sorted((ROOT / "reference").rglob("*.py")):
        hasher.update(path.read_bytes())
    return hasher.hexdigest()


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_each_mutant_applies_to_its_fix(name):
    mutant = MUTANTS[name]
    assert name in {fix.name for fix in FIXES}, f"{name} reverts no registered fix"
    mutated = mutant.mutated_source()
    original = (ROOT / mutant.file).read_text()
    assert mutated != original
    assert len(mutated.splitlines()) <= len(original.splitlines()) + 8, "a curated mutant is a small edit"


def test_a_mutant_whose_text_moved_on_is_stale_by_name(tmp_path: Path):
    mutant = Mutant("hard-cancel-through-fence", "reference/agent.py", "text that is not there", "x", tmp_path / "m.toml")
    with pytest.raises(StaleMutant, match="mutant hard-cancel-through-fence: its text does not occur"):
        mutant.mutated_source()


def test_a_mutant_whose_marker_is_gone_is_stale_by_name(tmp_path: Path):
    mutant = Mutant("no-such-fix", "reference/agent.py", "return", "x", tmp_path / "m.toml")
    with pytest.raises(StaleMutant, match="expected one '# FIX no-such-fix' marker"):
        mutant.mutated_source()


def test_overlay_holds_the_mutated_copy_and_leaves_the_tree_alone():
    before = _tree_digest()
    mutant = MUTANTS["hard-cancel-through-fence"]
    with overlay(mutant) as folder:
        assert (folder / mutant.file).read_text() == mutant.mutated_source()
        assert (folder / "reference" / "store").is_dir()
    assert not folder.exists()
    assert _tree_digest() == before


def test_the_environment_carries_mutant_settings_only_to_the_cli_entry():
    """Inside the library the mutant and the forced failure are arguments; only the CLI's entry reads what a
    parent process passed through the environment."""
    reads = re.compile(r"environ(?:\.get)?\s*[(\[]\s*(?:NAME_ENV|OVERLAY_ENV|\"COMPACTION_SIM)")
    readers = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "sim").rglob("*.py") if reads.search(path.read_text()))
    assert readers == ["sim/cli/__init__.py"]
    assert not [path for path in (ROOT / "sim").rglob("*.py") if "FORCE_FAIL_ENV" in path.read_text()]


def test_a_forced_failure_is_an_argument_of_the_run(tmp_path):
    from sim.scenario.loader import load_scenario
    from sim.scenario.names import registry
    from sim.scenario.runner import FORCED_FAIL, run_once

    scenario = load_scenario(ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml", registry())
    assert not run_once(scenario, 0).violations
    assert [v.invariant for v in run_once(scenario, 0, force_fail=True).violations] == [FORCED_FAIL]
