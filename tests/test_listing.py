"""What may I write? Every name a scenario may use can be listed with a one-line description, errors that
offer candidates point to that list, and the scenario guide links the reference's tables."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli

from sim.cli.listing import UNDESCRIBED, descriptions
from sim.mutation.mutants import load_mutants
from sim.scenario.builder import SEED_MESSAGE_CHARS
from sim.scenario.names import registry

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "scenarios" / "README.md"
NAMES = {
    "events": lambda: registry().events,
    "points": lambda: registry().points,
    "config": lambda: registry().config_fields,
    "marks": lambda: registry().coverage_marks,
    "mutants": lambda: load_mutants(),
}


def sim(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=ROOT)


@pytest.mark.parametrize("subject", sorted(NAMES))
def test_list_prints_every_name_with_a_description(subject):
    done = sim("list", subject, "--json")
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["items"]
    assert sorted(item["name"] for item in items) == sorted(NAMES[subject]())
    undescribed = [item["name"] for item in items if not item["description"] or item["description"] == UNDESCRIBED]
    assert not undescribed, f"no one-line description for {undescribed}"
    text = sim("list", subject).stdout.splitlines()
    assert len(text) == len(items) and all(line.split()[0] == item["name"] for line, item in zip(text, items))


@pytest.mark.parametrize("subject", ["scenarios", "faults", "invariants"])
def test_the_older_subjects_list_too(subject):
    done = sim("list", subject, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["items"]


def test_list_alone_lists_what_can_be_listed():
    bare = sim("list")
    assert bare.returncode == 0, bare.stderr
    subjects = [line.split()[0] for line in bare.stdout.splitlines()]
    assert subjects == ["scenarios", "events", "points", "config", "marks", "mutants", "faults", "invariants"]
    assert all(sim("list", subject, "--json").returncode == 0 for subject in ("config", "faults"))
    assert sim("list", "events", "scenarios").returncode == 2


def test_list_config_shows_each_default():
    from reference.config import CompactionConfig

    items = {item["name"]: item for item in json.loads(sim("list", "config", "--json").stdout)["items"]}
    assert items["threshold_tokens"]["default"] == CompactionConfig().threshold_tokens
    assert items["provider_error"]["default"] is None and items["ctrl_c_grace_s"]["default"] == 2.0
    line = next(line for line in sim("list", "config").stdout.splitlines() if line.startswith("lease_ttl_s "))
    assert line.split()[1:3] == ["float", str(CompactionConfig().lease_ttl_s)]


def test_list_faults_shows_each_parameter():
    items = {item["name"]: item for item in json.loads(sim("list", "faults", "--json").stdout)["items"]}
    assert {p["name"]: p.get("default", "required") for p in items["stall"]["parameters"]} == {"duration": "required", "times": 1}
    assert next(p for p in items["db_write_failure"]["parameters"] if p["name"] == "phase")["values"] == ["before_commit", "after_commit"]
    text = sim("list", "faults").stdout
    assert "    parameters: duration (duration, required), times (integer, default 1)" in text


def test_the_config_table_describes_exactly_what_the_loader_accepts():
    assert sorted(descriptions("config")) == sorted(registry().config_fields)


def test_an_error_with_many_candidates_points_to_the_list_command(tmp_path):
    scenario = tmp_path / "x.toml"
    scenario.write_text('[[drive]]\nafter_event = "compaction.sumary_started"\nturn = "hi"\n')
    done = subprocess.run([sys.executable, "-m", "sim", "run", str(scenario)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert f"(all {len(registry().events)}: python -m sim list events)" in done.stderr
    assert "more)" not in done.stderr
    assert 'did you mean "compaction.summary_started"?' in done.stderr


def test_the_scenario_guide_links_the_reference_tables_and_states_what_had_to_be_read_from_source():
    guide = GUIDE.read_text(encoding="utf-8")
    for table in ("EVENTS.md", "POINTS.md", "CONFIG.md"):
        assert f"(../reference/{table})" in guide
    assert f"{SEED_MESSAGE_CHARS} characters" in guide
    for words in ("`restart` kills the agent's process", "`in_place = false` rotates"):
        assert words in guide
