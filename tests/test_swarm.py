"""Generated workloads: the generator is a pure function of (workload, root seed, run index), its streams are
independent, bad workload files are refused with file, key and expectation, and a failing generated run
written out as a scenario fails the same way and shrinks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sim.core.search import Shard
from sim.core.timefreeze import frozen_time
from sim.scenario.loader import load_scenario
from sim.scenario.names import registry
from sim.scenario.runner import run_once
from sim.scenario.scenario_error import ScenarioError
from sim.shrinking.scenario_shrinker import shrink
from sim.swarm import generate, load_workload, load_workloads
from sim.swarm.campaign import campaign
from sim.swarm.export import export_run
from sim.swarm.generate import scenario_document
from sim.swarm.generated_runs import failure_class, run_generated
from sim.swarm.results import document, merge

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "scenarios" / "swarm"
SINGLE = WORKLOADS / "single_agent.toml"

MINIMAL = """\
name = "tiny"
[swarm]
active = "1m"
[swarm.actions]
turn = { per_minute = 2.0, probability = 1.0 }
"""


def workload(tmp_path: Path, text: str, name: str = "tiny.toml"):
    path = tmp_path / name
    path.write_text(text)
    return load_workload(path, registry())


def test_the_same_seed_and_run_index_generate_the_same_scenario():
    single = load_workload(SINGLE, registry())
    assert generate(single, 7, 3) == generate(single, 7, 3)
    assert scenario_document(single, 7, 3) != scenario_document(single, 7, 4)
    assert scenario_document(single, 7, 3) != scenario_document(single, 8, 3)


def test_a_generated_run_replays_byte_for_byte():
    single = load_workload(SINGLE, registry())
    with frozen_time():
        first, second = run_generated([single], 0, 5), run_generated([single], 0, 5)
    assert first.result.digest() == second.result.digest()


def test_a_new_fault_kind_does_not_reshuffle_the_world_the_actions_or_the_other_faults(tmp_path):
    base = workload(tmp_path, MINIMAL + '[swarm.faults.stall]\npoints = ["provider.summary"]\nduration = ["1s", "1m"]\nprobability = 1.0\n')
    more = workload(tmp_path, MINIMAL + '[swarm.faults.stall]\npoints = ["provider.summary"]\nduration = ["1s", "1m"]\nprobability = 1.0\n'
                    '[swarm.faults.provider_error]\npoints = ["provider.summary"]\nprobability = 1.0\n', "more.toml")
    for run in range(5):
        a, b = scenario_document(base, 1, run), scenario_document(more, 1, run)
        assert a["world"] == b["world"] and a["drive"][:-1] == b["drive"][:-1]  # the probe time may move
        assert [f for f in b["fault"] if f["kind"] == "stall"] == a["fault"]
        assert any(f["kind"] == "provider_error" for f in b["fault"])


def test_an_after_event_trigger_aims_a_fault_at_a_step_of_the_protocol(tmp_path):
    """A commit's admission falls at a different time in every run; a fault anchored on the event meets it."""
    anchored = workload(tmp_path, MINIMAL.replace('active = "1m"', 'active = "1m"\nenable = 1.0') + """
[swarm.world]
messages = [20, 20]
config = { threshold_tokens = 100, provider_latency_s = 2.0, in_place = true }
[swarm.faults.stall]
points = ["db.archive_and_compact"]
triggers = ["after_event"]
after_events = ["fence.begin_ok"]
duration = ["5s", "5s"]
count = [1, 1]
""")
    with frozen_time():
        for run in range(3):
            (fault,) = scenario_document(anchored, 0, run)["fault"]
            assert (fault["point"], fault["after_event"]) == ("db.archive_and_compact", "fence.begin_ok")
            history = run_generated([anchored], 0, run).result.history
            admitted = next(record.seq for record in history if record.kind == "fence.begin_ok")
            fired = next(record for record in history if record.kind == "fault.fired")
            assert fired.seq > admitted and fired.fields["point"] == "db.archive_and_compact"


def test_each_run_enables_a_subset_of_the_kinds():
    single = load_workload(SINGLE, registry())
    kinds = [frozenset(f["kind"] for f in scenario_document(single, 0, run)["fault"]) for run in range(30)]
    assert len(set(kinds)) > 10
    assert all(len(k) < len(single.swarm.faults) for k in kinds[:10])


def test_every_fault_and_action_kind_is_exercised_by_the_catalogue_workloads():
    from sim.swarm.workload_model import ActionKind

    workloads = load_workloads([WORKLOADS], registry())
    assert {kind for w in workloads for kind in w.swarm.faults} == set(registry().fault_kinds)
    workloads += load_workloads([WORKLOADS / "hermes"], registry())  # the typed interrupt is hermes-agent's
    assert {kind for w in workloads for kind in ActionKind if w.swarm.actions.of(kind).rate > 0} == set(ActionKind)


def test_drawn_worlds_respect_the_references_rules():
    single = load_workload(SINGLE, registry())
    for run in range(40):
        document = scenario_document(single, 3, run)
        config = document["world"]["config"]
        assert config["ceiling_timeout_s"] >= config["idle_timeout_s"]
        live = [s for s in document["world"]["sessions"] if "end_reason" not in s]
        openings = [drive for drive in document["drive"] if drive["at"] == 0.0]
        assert live or openings, "every lineage keeps a live head, or an orphan that an opening turn heals"


@pytest.mark.parametrize("text, key, expected", [
    ('[swarm]\nactive = "soon"\n', "swarm.active", "a duration"),
    ('[swarm.world]\nmessages = [30, 3]\n', "swarm.world.messages", "low <= high"),
    ('[swarm.world]\nagents = 1\nprocesses = 2\n', "swarm.world.processes", "at most as many processes as agents"),
    ('[swarm.world]\nconfig = { threshold = 3 }\n', "swarm.world.config.threshold", "a config field"),
    ('[swarm.actions]\nturns = { per_minute = 1.0 }\n', "swarm.actions.turns", "did you mean \"turn\""),
    ('[swarm.faults.stal]\npoints = ["host.wait"]\n', "swarm.faults.stal", "a fault kind"),
    ('[swarm.faults.stall]\nduration = "1s"\n', "swarm.faults.stall.points", "the points where stall may act"),
    ('[swarm.faults.stall]\npoints = ["host.wait"]\n', "swarm.faults.stall.duration", "it has no default"),
    ('[swarm.faults.stall]\npoints = ["no.such"]\nduration = "1s"\n', "swarm.faults.stall.points[0]", "a named point"),
    ('[swarm.faults.crash]\nprocess = "p1"\n', "swarm.faults.crash.process", "unknown key"),
    ('[swarm.faults.db_write_failure]\npoints = ["db.*"]\nphase = ["later"]\n', "swarm.faults.db_write_failure.phase[0]", "before_commit"),
    ('[swarm.faults.host_interrupt]\npoints = ["host.wait"]\ntriggers = ["after_event"]\n',
     "swarm.faults.host_interrupt.after_events", 'event kinds exactly when "after_event" is one of the triggers, got none'),
    ('[swarm.faults.host_interrupt]\npoints = ["host.wait"]\nafter_events = ["fence.begin_ok"]\n',
     "swarm.faults.host_interrupt.after_events", 'got event kinds, but no "after_event" trigger'),
    ('[swarm.faults.host_interrupt]\npoints = ["host.wait"]\ntriggers = ["after_event"]\nafter_events = ["fence.begin"]\n',
     "swarm.faults.host_interrupt.after_events[0]", 'did you mean "fence.begin_ok"'),
])
def test_a_bad_workload_names_the_file_the_key_and_what_was_expected(tmp_path, text, key, expected):
    with pytest.raises(ScenarioError) as error:
        workload(tmp_path, text)
    message = str(error.value)
    assert error.value.key == key and message.startswith(str(tmp_path / "tiny.toml")), message
    assert expected in message


def test_a_scripted_scenario_and_a_workload_refuse_each_others_loader(tmp_path):
    with pytest.raises(ScenarioError, match=r"swarm: expected a scripted scenario .*python -m sim swarm"):
        load_scenario(SINGLE, registry())
    with pytest.raises(ScenarioError, match=r"swarm: expected a \[swarm\] table"):
        load_workload(ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml", registry())


def _first_failure(workloads, root_seed: int = 0, limit: int = 60):
    with frozen_time():
        for index in range(limit):
            report = run_generated(workloads, root_seed, index)
            if report.violations:
                return index, report
    pytest.skip("no generated run failed on this reference")


def test_a_failing_run_exported_as_a_scenario_fails_with_the_same_invariant_and_shrinks(tmp_path):
    single = load_workload(SINGLE, registry())
    index, report = _first_failure([single])
    invariant = report.violations[0].invariant
    exported = export_run(single, 0, index, invariant, tmp_path)
    again = load_scenario(exported.scenario, registry())
    with frozen_time():
        rerun = run_once(again, again.explore.seed)
    assert failure_class(rerun) == failure_class(report)
    assert rerun.result.digest() == report.result.digest()
    shrunk = shrink(again, rerun.seed, rerun.result.decisions, invariant, source=exported.repro, out_dir=tmp_path / "shrunk",
                    time_limit=20.0)
    before, after = shrunk.before, shrunk.after
    assert after.faults + after.drives < before.faults + before.drives
    kept = load_scenario(shrunk.scenario_path, registry())
    assert all(fault in again.faults for fault in kept.faults) and all(drive in again.drives for drive in kept.drives)


def test_shards_merged_equal_one_campaign():
    workloads = load_workloads([WORKLOADS], registry())
    whole = document(campaign(workloads, 4, runs=12), ["w"], {}, mutant=None)
    shards = [document(campaign(workloads, 4, shard=Shard(i, 3), runs=4), ["w"], {}, mutant=None) for i in range(3)]
    merged = merge(shards)
    for key in ("cpu_s", "shards"):
        whole.pop(key), merged.pop(key)
    assert merged == whole


def test_a_campaign_gives_the_same_runs_whatever_the_number_of_jobs():
    workloads = load_workloads([WORKLOADS], registry())
    one, two = campaign(workloads, 2, runs=6), campaign(workloads, 2, runs=6, jobs=2)
    assert [dataclasses.astuple(run) for run in one.runs] == [dataclasses.astuple(run) for run in two.runs]


def test_a_run_past_its_memory_bound_ends_as_an_overrun_and_the_campaign_goes_on(tmp_path):
    """Each run's store outgrows the bound as its world is built (300 messages of 160 characters): named as the
    memory bound it passed, one failure class, and every run of the campaign still made."""
    workloads = [workload(tmp_path, MINIMAL.replace("[swarm]\n", "[swarm]\nmax_store_mb = 0.05\n")
                          .replace("[swarm.actions]", "[swarm.world]\nmessages = 300\n[swarm.actions]"))]
    done = campaign(workloads, 0, runs=3)
    assert [run.failure for run in done.runs] == [("run_completes", "MemoryBudgetExceeded")] * 3
    report = run_generated(workloads, 0, 1)
    assert report.result.outcome == "budget"
    assert "store budget of 0.05 MB exhausted (the run's memory bound): the store holds" in report.violations[0].explanation


def test_merging_a_shard_twice_is_refused():
    workloads = load_workloads([SINGLE], registry())
    shard = document(campaign(workloads, 0, shard=Shard(0, 2), runs=2), ["w"], {}, mutant=None)
    with pytest.raises(ValueError, match="appears in two results"):
        merge([shard, shard])


COMMAND_FAILS = """\
[world]
sessions = [{ id = "s1", messages = 12 }]
config = { threshold_tokens = 400 }

[[drive]]
at = "1s"
command = "compress"

[[drive]]
at = "2s"
title = "a title"

[[fault]]
kind = "host_interrupt"
point = "host.wait"
nth = 1

[[fault]]
kind = "db_busy"
point = "db.set_session_title"
nth = 1
"""


def test_a_command_that_fails_is_shown_to_the_user_and_the_run_goes_on(tmp_path):
    """Generated runs found it: a /compress or /title whose store call failed ended the whole run."""
    path = tmp_path / "command_fails.toml"
    path.write_text(COMMAND_FAILS)
    scenario = load_scenario(path, registry())
    with frozen_time():
        report = run_once(scenario, 0)
    assert report.result.error is None and report.violations == []
    failed = [record.fields for record in report.result.history if record.kind == "frontend.command_failed"]
    assert [(fields["command"], fields["error"].split(":")[0]) for fields in failed] == [
        ("compress", "HostInterrupted"), ("title", "OperationalError")]


UNTIL = """\
[world]
sessions = [{ id = "s1", messages = 12 }]
config = { threshold_tokens = 400 }

[[drive]]
at = "0s"
turn = "before"

[[drive]]
at = "10m"
turn = "after"

[[fault]]
kind = "provider_error"
point = "provider.summary"
probability = 1.0
times = 5
until = "5m"
"""


def test_a_trigger_acts_only_until_its_deadline(tmp_path):
    path = tmp_path / "until.toml"
    path.write_text(UNTIL)
    scenario = load_scenario(path, registry())
    with frozen_time():
        report = run_once(scenario, 0)
    assert report.fired == [1]
    assert [r.time for r in report.result.history if r.kind == "fault.fired"] == [0.0]


def test_every_workload_key_is_documented_in_the_guide():
    from sim.swarm.workload_model import ACTIONS, FAULT_KEYS, SWARM, WORLD_RANGES

    guide = (ROOT / "scenarios" / "README.md").read_text(encoding="utf-8")
    section = guide[guide.index("## Generated workloads"):guide.index("## Key reference")]
    keys = [*WORLD_RANGES.fields, *ACTIONS.fields, "per_minute", "probability", *FAULT_KEYS]
    keys += [key for key in SWARM.fields if f"`[swarm.{key}" not in section]  # a table is documented by its header
    assert [key for key in keys if f"`{key}`" not in section] == []


def test_the_guides_workload_example_loads(tmp_path):
    guide = (ROOT / "scenarios" / "README.md").read_text(encoding="utf-8")
    section = guide[guide.index("## Generated workloads"):guide.index("## Key reference")]
    example = section.split("```text\n")[1].split("```")[0]
    loaded = workload(tmp_path, example, "one_terminal.toml")
    assert loaded.swarm.faults["stall"].triggers == ("nth", "per_hit")


OUTSIDE_WRITE_FAILS_AT_TIP = """\
[world]
sessions = [{ id = "s1", messages = 4, end_reason = "compression" }, { id = "s2", parent = "s1", messages = 4 }]
agents = [{ name = "main", session = "s2" }]

[[drive]]
at = "0s"
turn = "a turn on the live head"

[[fault]]
kind = "message_mid_compression"
at = "1s"
session = "s1"

[[fault]]
kind = "db_busy"
point = "db.append_messages"
nth = 2
"""


def test_an_outside_write_that_fails_at_the_live_tip_is_recorded_and_the_run_goes_on(tmp_path):
    """Generated runs found it: the outside writer's second try (at the tip of a rotated session) let an injected
    store error escape, ending the whole run."""
    path = tmp_path / "outside.toml"
    path.write_text(OUTSIDE_WRITE_FAILS_AT_TIP)
    scenario = load_scenario(path, registry())
    with frozen_time():
        report = run_once(scenario, 0)
    assert report.result.error is None, report.violations
    failed = [record.fields for record in report.result.history if record.kind == "append.failed"]
    assert failed == [{"session": "s2", "error": "OperationalError", "writer": "external"}]


def test_an_orphan_is_drawn_once_where_an_agent_starts_and_gets_an_opening_turn(tmp_path):
    drawn = workload(tmp_path, '[swarm.world]\nsessions = 3\nagents = 2\norphan = 1.0\nfork = 1.0\n')
    for run in range(10):
        document = scenario_document(drawn, 0, run)
        sessions = document["world"]["sessions"]
        orphans = [s["id"] for s in sessions if s.get("end_reason") == "compression"]
        started = {agent["session"]: agent["name"] for agent in reversed(document["world"]["agents"])}
        assert len(orphans) == 1 and orphans[0] in started
        assert [(d["at"], d["agent"]) for d in document["drive"] if d["at"] == 0.0] == [(0.0, started[orphans[0]])]
        assert all(s["model_config"] == {next(iter(s["model_config"])): s["parent"]} for s in sessions[1:])


def _failing(witness_kinds: list[str]) -> object:
    """A run that broke one invariant, witnessed by events of these kinds in this order."""
    from types import SimpleNamespace

    from sim.invariants import Violation

    history = [SimpleNamespace(kind=kind) for kind in witness_kinds]
    return SimpleNamespace(violations=[Violation("aborted_attempt_leaves_parent_unchanged", "", tuple(range(len(history))), 0.0)],
                           result=SimpleNamespace(history=history, error=None))


def test_runs_of_one_bug_witnessed_by_more_or_fewer_rows_are_one_failure_class():
    """The 10,000-run hermes campaign split one aborted attempt into 24 classes by how many rows it had appended."""
    appended = [failure_class(_failing(["append.ok"] * rows + ["compaction.finished"])) for rows in (2, 3, 25)]  # type: ignore[arg-type]  # a stand-in report
    assert appended[0] == appended[1] == appended[2] == ("aborted_attempt_leaves_parent_unchanged", "append.ok", "compaction.finished")
    reordered = failure_class(_failing(["compaction.finished", "append.ok"]))  # type: ignore[arg-type]  # as above
    interleaved = failure_class(_failing(["append.ok", "compaction.finished", "append.ok"]))  # type: ignore[arg-type]  # as above
    assert len({appended[0], reordered, interleaved}) == 3  # which kinds witness it, and in which order, still tell classes apart


def test_a_baseline_written_before_the_fold_knows_its_classes_folded():
    from sim.swarm.results import known_classes

    baseline = {"failures": [{"invariant": "x", "witnesses": ["append.ok", "append.ok", "compaction.finished"]}]}
    assert known_classes(baseline) == {("x", "append.ok", "compaction.finished")}
