"""Scenario loading: a valid file becomes the expected frozen values; every mistake is one precise ScenarioError.

The mistakes are checked for the exact key path and an "expected ..." message, because that is what lets a
person fix a file without reading the loader. Property tests feed arbitrary bytes and structurally valid
files with one value replaced, and require that nothing but a Scenario or a ScenarioError ever comes out.
"""

from __future__ import annotations

import copy
import datetime
import math
import pickle
import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.scenario import (
    AgentSpec,
    DriveAction,
    DriveSpec,
    ExpectSpec,
    ExploreSpec,
    FaultSpec,
    Scenario,
    ScenarioError,
    SessionSpec,
    TriggerSpec,
    WorldSpec,
    load_paths,
    load_scenario,
)
from sim.scenario.docs import render_reference
from sim.scenario.loader import SCENARIO
from sim.scenario.schema import Bool, Choice, Duration, ListOf, Reference, Registered, Spec, Table

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "scenarios" / "README.md"


@dataclass
class FakeRegistry:
    """The names a small reference would define; enough of each kind to make every check bite."""

    fault_kinds: Mapping[str, Mapping[str, Spec]] = field(default_factory=lambda: {
        "stall": {
            "point": Registered("Where the stall happens.", source="points", noun="a named point", glob=True),
            "duration": Duration("How long the point blocks."),
        },
        "db_error": {
            "transient": Bool("Whether a retry may succeed.", default=False),
            "error": Choice("The SQLite error raised.", values=("locked", "disk_full"), default="locked"),
        },
        "ctrl_c": {"agent": Reference("The agent interrupted.", namespace="agent", default=None)},
        "crash": {"process": Reference("The process that dies.", namespace="process")},
    })
    invariants: Collection[str] = ("single_live_head", "no_commit_after_cancel", "no_duplicate_turn")
    points: Collection[str] = ("provider.summary", "db.write", "db.commit", "compaction.publish")
    events: Collection[str] = ("compaction.summary_started", "frontend.ctrl_c_grace_expired", "turn.persisted")
    config_fields: Mapping[str, type] = field(default_factory=lambda: {
        "threshold_tokens": int, "ctrl_c_grace_s": float, "rotation": bool, "summary_model": str,
    })
    mutants: Collection[str] = ("hard-cancel-rollback", "no-persisted-marker")
    strategies: Collection[str] = ("random", "pct", "portfolio")
    coverage_marks: Collection[str] = ("summary_interrupted", "lease_reclaimed")


@pytest.fixture
def registry() -> FakeRegistry:
    return FakeRegistry()


def write(folder: Path, text: str | bytes, name: str = "scenario.toml") -> Path:
    path = folder / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


FULL = """
name = "full_example"
race = "R14"
reported = "appends made during compression are lost"
source = "hermes-agent #45"
description = "Uses every key."

[world]
sessions = [
  { id = "s0", messages = 12, end_reason = "compression", title = "old" },
  { id = "s1", messages = 40, parent = "s0", model_config = { model = "m1", limits = { ctx = 8 }, tags = ["a", 1] } },
]
config = { threshold_tokens = 2000, ctrl_c_grace_s = 2, rotation = true, summary_model = "small" }
agents = [{ name = "main" }, { name = "second", process = "p2", session = "s0" }]

[[drive]]
at = "0s"
turn = "a long question"

[[drive]]
agent = "second"
nth = 2
point = "db.write"
delay = "250ms"
command = "end_session"
end_reason = "session_reset"
session = "s1"

[[drive]]
after_event = "frontend.ctrl_c_grace_expired"
command = "ctrl_c"

[[fault]]
kind = "stall"
point = "provider.summary"
duration = "1.5s"
at = 3

[[fault]]
kind = "db_error"
probability = 0.25
per_hit = 0.5
point = "db.*"
transient = true

[[fault]]
kind = "ctrl_c"
agent = "second"
after_event = "compaction.summary_started"
delay = "1s"

[expect]
invariants = ["single_live_head", "no_commit_after_cancel"]
outcome = "violation"
must_fail_under = ["hard-cancel-rollback"]
coverage = ["summary_interrupted"]

[explore]
runs = 200
seed = 7
strategy = "pct"
max_steps = 1_000
max_time = "2h"
"""


def trigger(**fields: Any) -> TriggerSpec:
    values: dict[str, Any] = dict.fromkeys(["at", "after_event", "nth", "point", "probability", "per_hit", "until"])
    return TriggerSpec(**{**values, "delay": 0.0, **fields})


def test_a_full_example_loads_into_the_expected_values(tmp_path, registry):
    path = write(tmp_path, FULL)
    assert load_scenario(path, registry) == Scenario(
        path=str(path),
        name="full_example",
        race="R14",
        reported="appends made during compression are lost",
        source="hermes-agent #45",
        description="Uses every key.",
        target="reference",
        world=WorldSpec(
            sessions=(
                SessionSpec("s0", 12, None, "compression", {}, "old", None),
                SessionSpec("s1", 40, "s0", None, {"model": "m1", "limits": {"ctx": 8}, "tags": ["a", 1]}, None, None),
            ),
            config={"threshold_tokens": 2000, "ctrl_c_grace_s": 2.0, "rotation": True, "summary_model": "small"},
            agents=(AgentSpec("main", "p1", "s0", "cli"), AgentSpec("second", "p2", "s0", "cli")),
        ),
        drives=(
            DriveSpec(turn="a long question", message=None, platform="telegram", title=None, title_source="user",
                      command=None, agent="main", session=None, typed=None, end_reason=None, trigger=trigger(at=0.0)),
            DriveSpec(turn=None, message=None, platform="telegram", title=None, title_source="user",
                      command=DriveAction.END_SESSION, agent="second", session="s1", typed=None, end_reason="session_reset",
                      trigger=trigger(nth=2, point="db.write", delay=0.25)),
            DriveSpec(turn=None, message=None, platform="telegram", title=None, title_source="user",
                      command=DriveAction.CTRL_C, agent="main", session=None, typed=None, end_reason=None,
                      trigger=trigger(after_event="frontend.ctrl_c_grace_expired")),
        ),
        faults=(
            FaultSpec("stall", trigger(at=3.0, point="provider.summary"), {"duration": 1.5}),
            FaultSpec(
                "db_error", trigger(probability=0.25, per_hit=0.5, point="db.*"), {"transient": True, "error": "locked"}
            ),
            FaultSpec("ctrl_c", trigger(after_event="compaction.summary_started", delay=1.0), {"agent": "second"}),
        ),
        expect=ExpectSpec(("single_live_head", "no_commit_after_cancel"), "violation", ("hard-cancel-rollback",),
                          ("summary_interrupted",)),
        explore=ExploreSpec(runs=200, seed=7, strategy="pct", max_steps=1000, max_time_s=7200.0, max_store_mb=64),
    )


def test_a_minimal_file_gets_every_default(tmp_path, registry):
    scenario = load_scenario(write(tmp_path, '[[drive]]\nat = 1\nturn = "hi"\n', "minimal_one.toml"), registry)
    assert scenario.name == "minimal_one"
    assert scenario.world == WorldSpec(
        sessions=(SessionSpec("s1", 0, None, None, {}, None, None),), config={},
        agents=(AgentSpec("main", "p1", "s1", "cli"),)
    )
    assert scenario.faults == ()
    assert scenario.expect == ExpectSpec("all", "pass", (), ())
    assert scenario.explore == ExploreSpec(runs=50, seed=0, strategy="portfolio", max_steps=200_000, max_time_s=21600.0,
                                         max_store_mb=64)


@pytest.mark.parametrize("written, seconds", [
    ('"250ms"', 0.25), ('"1.5s"', 1.5), ('"10m"', 600.0), ('"2h"', 7200.0), ('".5s"', 0.5), ("3", 3.0), ("0.5", 0.5),
])
def test_durations_become_float_seconds(tmp_path, registry, written, seconds):
    scenario = load_scenario(write(tmp_path, f'[[drive]]\nat = {written}\nturn = "x"\n'), registry)
    assert scenario.drives[0].trigger.at == seconds


A_DRIVE = '[[drive]]\nat = "0s"\nturn = "hello"\n'
STALL = '[[fault]]\nkind = "stall"\npoint = "provider.summary"\nduration = "10m"\nat = "0s"\n'

# (name, file text, key path, a fragment of what was expected); each is a different kind of mistake.
MISTAKES = [
    ("unknown top-level key", 'nmae = "x"\n', "nmae", "a top-level key"),
    ("unknown nested key", "[world]\nsesions = []\n", "world.sesions", "a key of world"),
    ("unknown fault parameter", STALL + 'durration = "1s"\n', "fault[0].durration", "a key of fault[0]"),
    ("string where an integer goes", '[explore]\nruns = "many"\n', "explore.runs", "an integer of at least 1"),
    ("float where an integer goes", "[explore]\nseed = 1.0\n", "explore.seed", "an integer of at least 0"),
    ("integer out of range", "[explore]\nruns = 0\n", "explore.runs", "an integer of at least 1"),
    ("integer too large to print", "[explore]\nseed = 0x" + "f" * 5000 + "\n", "explore.seed", "an integer of"),
    ("number where a string goes", "reported = 5\n", "reported", "a string"),
    ("a source without its rows", 'source = "hermes-agent"\n', "source", 'a project and row numbers like "hermes-agent #14"'),
    ("string where a boolean goes", '[[fault]]\nkind = "db_error"\nat = 0\ntransient = "yes"\n',
     "fault[0].transient", "true or false"),
    ("garbage duration", STALL.replace('"10m"', '"ten minutes"'), "fault[0].duration", 'a duration like "250ms"'),
    ("negative duration", '[[drive]]\nat = 0\ndelay = -1\nturn = "x"\n', "drive[0].delay", "a duration of 0s or more"),
    ("negative duration text", '[[drive]]\nat = "-5s"\nturn = "x"\n', "drive[0].at", "a duration of 0s or more"),
    ("probability above 1", '[[fault]]\nkind = "db_error"\nprobability = 1.5\npoint = "db.write"\n',
     "fault[0].probability", "a probability from 0 to 1"),
    ("nan probability", '[[fault]]\nkind = "db_error"\nprobability = nan\npoint = "db.write"\n',
     "fault[0].probability", "a probability from 0 to 1"),
    ("unknown fault kind", '[[fault]]\nkind = "stal"\nat = 0\n', "fault[0].kind", 'a fault kind (one of "crash"'),
    ("fault without kind", '[[fault]]\nat = 0\n', "fault[0].kind", "a fault kind"),
    ("missing required fault parameter", '[[fault]]\nkind = "stall"\nat = 0\nduration = 1\n',
     "fault[0].point", "a named point"),
    ("unknown invariant", '[expect]\ninvariants = ["single_live_head", "nope"]\n', "expect.invariants[1]",
     "an invariant (one of"),
    ("invariants neither all nor a list", '[expect]\ninvariants = "some"\n', "expect.invariants",
     '"all" or a list of invariant names'),
    ("unknown point", STALL.replace("provider.summary", "provider.sumary"), "fault[0].point", "a named point"),
    ("point glob selecting nothing", STALL.replace("provider.summary", "zzz.*"), "fault[0].point", "a named point"),
    ("unknown event", '[[drive]]\nafter_event = "compaction.nope"\nturn = "x"\n', "drive[0].after_event",
     "an event kind"),
    ("two triggers at once", '[[drive]]\nat = 0\nafter_event = "turn.persisted"\nturn = "x"\n',
     "drive[0].after_event", 'only one of the keys "at", "after_event", "nth", "probability" (the trigger)'),
    ("no trigger", '[[drive]]\nturn = "x"\n', "drive[0]", "one of the keys"),
    ("nth without point", '[[drive]]\nnth = 2\nturn = "x"\n', "drive[0].nth", '"point" alongside "nth"'),
    ("per_hit without probability", STALL + "per_hit = 0.5\n", "fault[0].per_hit", '"probability" alongside'),
    ("turn and command at once", '[[drive]]\nat = 0\nturn = "x"\ncommand = "ctrl_c"\n', "drive[0].command",
     "only one of the keys"),
    ("no action", "[[drive]]\nat = 0\n", "drive[0]", '"turn", "message", "title", "command" (the action)'),
    ("message to a cli agent", '[[drive]]\nat = 0\nmessage = "hi"\n', "drive[0].agent", 'a gateway agent (frontend = "gateway")'),
    ("unknown command", '[[drive]]\nat = 0\ncommand = "halt"\n', "drive[0].command", 'one of "compress"'),
    ("end_reason on a turn", '[[drive]]\nat = 0\nturn = "x"\nend_reason = "idle"\n', "drive[0].end_reason",
     'end_reason only with command = "end_session"'),
    ("unknown config key", "[world]\nconfig = { threshold = 1 }\n", "world.config.threshold",
     "a config field of the reference"),
    ("config value of the wrong type", '[world]\nconfig = { threshold_tokens = "2000" }\n',
     "world.config.threshold_tokens", "an integer"),
    ("config boolean given a number", "[world]\nconfig = { rotation = 1 }\n", "world.config.rotation", "true or false"),
    ("config key needing quotes", '[world]\nconfig = { "a b" = 1 }\n', 'world.config."a b"', "a config field"),
    ("key with a line break", '[world]\nconfig = { "a\\nb" = 1 }\n', 'world.config."a\\nb"', "a config field"),
    ("unknown mutant", '[expect]\nmust_fail_under = ["no-rollback"]\n', "expect.must_fail_under[0]", "a mutant"),
    ("unknown coverage mark", '[expect]\ncoverage = ["x"]\n', "expect.coverage[0]", "a coverage mark"),
    ("unknown outcome", '[expect]\noutcome = "fail"\n', "expect.outcome", 'one of "pass", "violation"'),
    ("unknown strategy", '[explore]\nstrategy = "dfs"\n', "explore.strategy", 'a strategy (one of "pct", "portfolio", "random")'),
    ("unknown agent in a drive", '[[drive]]\nat = 0\nturn = "x"\nagent = "bob"\n', "drive[0].agent",
     'a declared agent (one of "main")'),
    ("unknown agent in a fault", '[[fault]]\nkind = "ctrl_c"\nat = 0\nagent = "bob"\n', "fault[0].agent",
     "a declared agent"),
    ("unknown process in a fault", '[[fault]]\nkind = "crash"\nat = 0\nprocess = "p9"\n', "fault[0].process",
     'a declared process (one of "p1")'),
    ("undeclared session in a drive", '[[drive]]\nat = 0\nturn = "x"\nsession = "s9"\n', "drive[0].session",
     "a declared session"),
    ("undeclared session of an agent", '[world]\nagents = [{ name = "a", session = "s9" }]\n',
     "world.agents[0].session", "a declared session"),
    ("duplicate session id", '[world]\nsessions = [{ id = "s1" }, { id = "s1" }]\n', "world.sessions[1].id",
     "each session declared once"),
    ("duplicate agent name", '[world]\nagents = [{ name = "a" }, { name = "a" }]\n', "world.agents[1].name",
     "each agent declared once"),
    ("parent listed after its child", '[world]\nsessions = [{ id = "s1", parent = "s2" }, { id = "s2" }]\n',
     "world.sessions[0].parent", "a session listed earlier"),
    ("session id with a space", '[world]\nsessions = [{ id = "s 1" }]\n', "world.sessions[0].id", "a session id"),
    ("no sessions", "[world]\nsessions = []\n", "world.sessions", "a non-empty list of sessions"),
    ("bad name", 'name = "Bad-Name"\n', "name", "a name of lowercase letters, digits and _"),
    ("bad race", 'race = "R27"\n', "race", 'a race id from "R1" to "R26"'),
    ("a list where a table is expected", "[[expect]]\n", "expect", "a table"),
    ("a table where a list is expected", 'drive = { at = 0, turn = "x" }\n', "drive", "a list of drives"),
    ("a date where a string is expected", "reported = 1979-05-27\n", "reported", "a string"),
    ("a non-JSON model_config value", '[world]\nsessions = [{ id = "s1", model_config = { t = inf } }]\n',
     "world.sessions[0].model_config.t", "a string, number, boolean, list or table"),
    ("model_config nested too deeply", '[world]\nsessions = [{ id = "s1", model_config = { t = ' + "[" * 40 + "]" * 40
     + " } }]\n", "world.sessions[0].model_config.t" + "[0]" * 32, "at most 32 levels of nesting"),
    ("a model_config integer beyond 64 bits", '[world]\nsessions = [{ id = "s1", model_config = { t = [0x'
     + "f" * 17 + "] } }]\n", "world.sessions[0].model_config.t[0]", "a string, number, boolean, list or table"),
]


@pytest.mark.parametrize("text, key, expected", [case[1:] for case in MISTAKES], ids=[case[0] for case in MISTAKES])
def test_each_mistake_names_its_key_and_what_was_expected(tmp_path, registry, text, key, expected):
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, registry)
    error = caught.value
    assert (error.file, error.key) == (str(path), key)
    assert expected in error.expected
    assert str(error).startswith(f"{path}: {key}: expected {error.expected}, got ")
    assert "\n" not in str(error)


def test_there_are_at_least_twenty_distinct_mistakes():
    assert len({case[0] for case in MISTAKES}) == len(MISTAKES) >= 20


def test_the_message_is_one_line_with_file_key_expected_and_found(tmp_path, registry):
    path = write(tmp_path, STALL + STALL.replace('"10m"', '"ten minutes"'), "x.toml")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, registry)
    assert str(caught.value) == (
        f'{path}: fault[1].duration: expected a duration like "250ms", "1.5s" or "10m", got "ten minutes"'
    )


def test_typos_get_a_suggestion(tmp_path, registry):
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write(tmp_path, 'nmae = "x"\n'), registry)
    assert caught.value.found == 'an unknown key (did you mean "name"?)'


@pytest.mark.parametrize("text, line, column", [('name = "x"\n[world\n', 2, 7), ('name = "x"\nrace = ', 2, 8)])
def test_a_toml_syntax_error_has_its_line_and_column(tmp_path, registry, text, line, column):
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, registry)
    error = caught.value
    assert (error.key, error.expected, error.line, error.column) == ("", "valid TOML", line, column)
    assert str(error).startswith(f"{path}:{line}:{column}: expected valid TOML, got a syntax error: ")


def test_a_long_list_of_names_shows_the_closest_first_and_is_cut_short(tmp_path, registry):
    registry.points = [f"area{i}.point" for i in range(30)] + ["db.write"]
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write(tmp_path, STALL.replace("provider.summary", "db.wrte")), registry)
    assert caught.value.expected.startswith('a named point (one of "db.write", "area')
    assert caught.value.expected.endswith(", ... (all 31: python -m sim list points))")
    assert caught.value.found == '"db.wrte" (did you mean "db.write"?)'


@pytest.mark.parametrize("text, found", [
    ("x = " + "1" * 5000, "an integer with too many digits to read"),
    ("x = " + "[" * 5000, "arrays or tables nested too deeply to read"),
])
def test_toml_the_parser_cannot_hold_is_a_scenario_error(tmp_path, registry, text, found):
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write(tmp_path, text), registry)
    assert (caught.value.expected, caught.value.found) == ("valid TOML", found)


def test_a_missing_file_is_named(tmp_path, registry):
    path = tmp_path / "nope.toml"
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, registry)
    assert str(caught.value) == f"{path}: expected a readable scenario file, got no such file"


def test_a_directory_is_not_a_scenario_file(tmp_path, registry):
    with pytest.raises(ScenarioError) as caught:
        load_scenario(tmp_path, registry)
    assert caught.value.found == "a directory"


def test_a_file_that_is_not_utf8_points_at_the_bad_byte(tmp_path, registry):
    path = write(tmp_path, b'name = "ok"\nreported = "caf\xe9"\n')
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, registry)
    assert str(caught.value) == f"{path}:2:16: expected UTF-8 text, got the byte 0xe9"


def test_a_byte_order_mark_is_accepted(tmp_path, registry):
    assert load_scenario(write(tmp_path, "\ufeffname = \"bom\"\n" + A_DRIVE), registry).name == "bom"


@pytest.mark.parametrize("text", ["", "# nothing but a comment\n", 'name = "idle"\n[world]\nsessions = [{ id = "s1" }]\n', STALL])
def test_an_empty_or_driverless_scenario_is_refused(tmp_path, registry, text):
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write(tmp_path, text), registry)
    assert caught.value.key == "drive"
    assert "at least one [[drive]]" in str(caught.value)


def test_a_file_name_that_is_not_a_valid_name_needs_a_name_key(tmp_path, registry):
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write(tmp_path, "", "Bad-Name.toml"), registry)
    assert caught.value.key == "name"
    assert caught.value.found == '"Bad-Name", taken from the file name (set name to fix it)'


def test_load_paths_reads_folders_sorted_and_not_recursively(tmp_path, registry):
    for name in ["b.toml", "a.toml", ".#a.toml", "notes.md"]:
        write(tmp_path, A_DRIVE, name)
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", A_DRIVE, "c.toml")
    loaded = load_paths([tmp_path / "sub" / "c.toml", tmp_path, tmp_path / "a.toml"], registry)
    assert [scenario.name for scenario in loaded] == ["c", "a", "b"]


def test_load_paths_names_a_path_that_does_not_exist(tmp_path, registry):
    missing = tmp_path / "nowhere"
    with pytest.raises(ScenarioError) as caught:
        load_paths([missing], registry)
    assert str(caught.value) == f"{missing}: expected a scenario file or a folder of them, got nothing at that path"


def test_load_paths_refuses_a_folder_without_scenarios(tmp_path, registry):
    with pytest.raises(ScenarioError) as caught:
        load_paths([tmp_path], registry)
    assert caught.value.file == str(tmp_path)


def test_two_scenarios_with_one_name_are_refused(tmp_path, registry):
    write(tmp_path, 'name = "same"\n' + A_DRIVE, "a.toml")
    second = write(tmp_path, 'name = "same"\n' + A_DRIVE, "b.toml")
    with pytest.raises(ScenarioError) as caught:
        load_paths([tmp_path], registry)
    assert (caught.value.file, caught.value.key) == (str(second), "name")
    assert str(tmp_path / "a.toml") in caught.value.found


def test_a_scenario_error_survives_pickling(tmp_path, registry):
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write(tmp_path, 'name = "x"\n[world\n'), registry)
    copied = pickle.loads(pickle.dumps(caught.value))
    assert (str(copied), copied.line, copied.column) == (str(caught.value), caught.value.line, caught.value.column)


def test_the_readme_embeds_the_rendered_key_reference():
    assert render_reference() in README.read_text(encoding="utf-8")


def test_the_readme_example_loads_against_the_real_reference(tmp_path):
    """Against the reference's own names, not the fake registry's (tests/test_docs.py also runs it)."""
    from sim.scenario.names import registry as reference_registry

    example = re.search(r"```toml\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert example is not None
    scenario = load_scenario(write(tmp_path, example.group(1)), reference_registry())
    assert scenario.name == tomllib.loads(example.group(1))["name"]


def _documented_specs(table: Table) -> list[tuple[str, Spec]]:
    specs = list(table.fields.items())
    for spec in table.fields.values():
        item = spec.item if isinstance(spec, ListOf) else spec
        if isinstance(item, Table):
            specs += _documented_specs(item)
    for part in table.include:
        specs += _documented_specs(part)
    return specs


def test_every_key_has_a_description_and_every_value_key_an_example():
    for key, spec in _documented_specs(SCENARIO):
        assert spec.description, key
        is_table = isinstance(spec, Table) or isinstance(spec, ListOf) and isinstance(spec.item, Table)
        assert is_table or spec.example, key


# Property tests: whatever the file holds, the loader answers with a Scenario or a ScenarioError.

PROPERTY_SETTINGS = settings(
    derandomize=True, max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def load_outcome(folder: Path, content: str | bytes, registry: FakeRegistry) -> Scenario | ScenarioError:
    try:
        return load_scenario(write(folder, content), registry)
    except ScenarioError as error:
        return error


TOML_TOKENS = st.sampled_from([*'[]{}="\'.,#\n -_:0123456789abcdefinorstuwxyz', "kind", "at", "drive", "[[fault]]"])


@PROPERTY_SETTINGS
@given(content=st.one_of(
    st.binary(max_size=200), st.text(max_size=200), st.lists(TOML_TOKENS, max_size=60).map("".join),
))
def test_arbitrary_content_gives_a_scenario_or_a_scenario_error(tmp_path_factory, content):
    outcome = load_outcome(tmp_path_factory.mktemp("any"), content, FakeRegistry())
    assert isinstance(outcome, Scenario) or len(str(outcome).splitlines()) == 1


def toml_escape(char: str) -> str:
    if char in '"\\':
        return "\\" + char
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return f"\\u{ord(char):04x}"
    return char


def toml_value(value: Any) -> str:
    """A tiny TOML writer: every value inline, which is all the mutated documents need."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + "".join(map(toml_escape, value)) + '"'
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    return "{ " + ", ".join(f"{toml_value(key)} = {toml_value(item)}" for key, item in value.items()) + " }"


def toml_document(document: dict[str, Any]) -> str:
    return "".join(f"{toml_value(key)} = {toml_value(value)}\n" for key, value in document.items())


FULL_DOCUMENT = tomllib.loads(FULL)


def node_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a document, containers included, so a mutation can strike at any depth."""
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    paths = [path] if path else []
    for key, child in children:
        paths += node_paths(child, path + (key,))
    return paths


PLAUSIBLE = st.sampled_from(["0s", "250ms", "-1s", "all", "s1", "s0", "main", "p1", "stall", "db.*", "R1", ""])
SCALARS = st.one_of(
    PLAUSIBLE, st.text(max_size=12), st.integers(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(), st.booleans(), st.dates(), st.datetimes(), st.times(),
)
TOML_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def mutated_documents(draw: st.DrawFn) -> dict[str, Any]:
    """The full example with one value replaced, one key or item removed, or one added."""
    document = copy.deepcopy(FULL_DOCUMENT)
    *parents, last = draw(st.sampled_from(node_paths(document)))
    container = document
    for key in parents:
        container = container[key]
    operation = draw(st.sampled_from(["replace", "remove", "add"]))
    if operation == "replace":
        container[last] = draw(TOML_VALUES)
    elif operation == "remove":
        del container[last]
    elif isinstance(container, list):
        container.append(draw(TOML_VALUES))
    else:
        container[draw(st.sampled_from(["at", "kind", "point", "extra", "id", "name", "turn"]))] = draw(TOML_VALUES)
    return document


@PROPERTY_SETTINGS
@given(document=mutated_documents())
def test_valid_structure_with_any_value_changed_gives_a_scenario_or_a_scenario_error(tmp_path_factory, document):
    outcome = load_outcome(tmp_path_factory.mktemp("mutated"), toml_document(document), FakeRegistry())
    assert isinstance(outcome, Scenario) or len(str(outcome).splitlines()) == 1
    # The writer must produce TOML, or this test would only exercise the syntax error path.
    assert not isinstance(outcome, ScenarioError) or outcome.expected != "valid TOML", outcome


def test_the_toml_writer_round_trips_the_full_example():
    assert tomllib.loads(toml_document(FULL_DOCUMENT)) == FULL_DOCUMENT
