"""Coverage feedback: a feedback campaign is a pure function of its inputs (the same runs for the same root seed,
whatever the number of jobs), its first batch is the plain campaign, its later runs are biased by what earlier
runs reached, and a biased run still exports to a scenario file that replays byte for byte."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from support import run_cli

from sim.bench.swarm_feedback import compare_feedback, first_find, render, unmutated_failures
from sim.core.search import Shard
from sim.core.timefreeze import frozen_time
from sim.scenario.loader import load_scenario
from sim.scenario.names import registry
from sim.scenario.runner import run_once
from sim.swarm import load_workload, load_workloads
from sim.swarm.campaign import campaign
from sim.swarm.export import export_run
from sim.swarm.feedback import BATCH, NO_BIAS, Bias, Feedback, enable_key
from sim.swarm.generate import enabled_kinds, scenario_document
from sim.swarm.generated_runs import run_generated, summarise
from sim.swarm.results import document
from sim.swarm.signature import signature

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "scenarios" / "swarm"
SINGLE = WORKLOADS / "single_agent.toml"
RUNS = 2 * BATCH + 3  # three batches: the plain one, and two biased ones


def rows(done):
    return [dataclasses.astuple(run) for run in done.runs]


@pytest.fixture(scope="module")
def workloads():
    return load_workloads([WORKLOADS], registry())


@pytest.fixture(scope="module")
def fed(workloads):
    return campaign(workloads, 3, runs=RUNS, feedback=True)


def test_the_same_inputs_give_the_same_feedback_campaign(workloads, fed):
    again = campaign(workloads, 3, runs=RUNS, feedback=True)
    assert rows(again) == rows(fed)
    assert again.biases == fed.biases


def test_a_feedback_campaign_gives_the_same_runs_whatever_the_number_of_jobs(workloads, fed):
    assert rows(campaign(workloads, 3, runs=RUNS, feedback=True, jobs=2)) == rows(fed)


def test_the_first_batch_is_the_plain_campaign_and_later_batches_are_biased(workloads, fed):
    plain = campaign(workloads, 3, runs=RUNS)
    assert rows(plain)[:BATCH] == rows(fed)[:BATCH]
    assert all(fed.bias_of(index) == NO_BIAS for index in range(BATCH))
    assert all(fed.bias_of(index) != NO_BIAS for index in range(BATCH, RUNS))
    assert [run.scenario for run in plain.runs] == [run.scenario for run in fed.runs]
    biased = [index for index in range(BATCH, RUNS) if scenario_document(workloads[index % len(workloads)], 3, index)
              != scenario_document(workloads[index % len(workloads)], 3, index, fed.bias_of(index))]
    assert biased, "the bias changed no draw"


def test_a_runs_bias_is_folded_from_the_signatures_of_the_batches_before_it(workloads, fed):
    feedback = Feedback()
    for run in fed.runs[:BATCH]:
        feedback.add(run.signature)
    index = BATCH + 1
    assert fed.bias_of(index) == feedback.bias(workloads[index % len(workloads)])


def test_a_biased_run_exports_to_a_scenario_that_replays_byte_for_byte(workloads, fed, tmp_path):
    index = BATCH + 2
    with frozen_time():
        report = run_generated(workloads, 3, index, fed.bias_of(index))
    assert summarise(workloads, 3, index, report, fed.bias_of(index)) == fed.runs[index]
    # Export checks the written file breaks the same invariant; a passing run is written the same way, so check
    # its replay directly.
    document_ = scenario_document(workloads[index % len(workloads)], 3, index, fed.bias_of(index))
    assert "biased by the coverage" in document_["description"]
    if report.violations:
        exported = export_run(workloads[index % len(workloads)], 3, index, report.violations[0].invariant, tmp_path,
                              bias=fed.bias_of(index))
        assert exported.report.result.digest() == report.result.digest()


def test_an_exported_biased_failure_fails_the_same_way(workloads, tmp_path):
    done = campaign(workloads, 0, runs=6 * BATCH, feedback=True)
    failing = [run for run in done.runs if run.failure is not None and run.index >= BATCH]
    if not failing:
        pytest.skip("no biased run failed on this reference")
    run = failing[0]
    workload = workloads[run.index % len(workloads)]
    exported = export_run(workload, 0, run.index, run.failure[0], tmp_path, bias=done.bias_of(run.index))
    scenario = load_scenario(exported.scenario, registry())
    with frozen_time():
        replays = [run_once(scenario, scenario.explore.seed) for _ in range(2)]
    assert {replay.result.digest() for replay in replays} == {exported.report.result.digest()}


def test_a_feedback_campaign_refuses_a_shard(workloads):
    with pytest.raises(ValueError, match="cannot be sharded"):
        campaign(workloads, 0, shard=Shard(0, 2), runs=2, feedback=True)


def test_the_neutral_bias_draws_the_plain_run():
    single = load_workload(SINGLE, registry())
    assert scenario_document(single, 5, 7, Bias()) == scenario_document(single, 5, 7)
    assert enabled_kinds(single, 5, 7, Bias()) == enabled_kinds(single, 5, 7)


def test_point_weights_favour_points_a_kind_has_not_fired_at():
    single = load_workload(SINGLE, registry())
    kind, draw = next((kind, draw) for kind, draw in single.swarm.faults.items() if draw.points and len(draw.points) > 1)
    feedback = Feedback()
    for _ in range(3):
        feedback.add({f"fault:{kind}@{draw.points[0]}", f"on:{enable_key(single, 'fault', kind)}"})
    weights = feedback.bias(single).point_weights(kind)
    assert weights is not None and weights[0] < min(weights[1:])
    assert sum(weights) == pytest.approx(1.0)


def test_a_kind_whose_runs_reached_rare_marks_is_enabled_more_often():
    single = load_workload(SINGLE, registry())
    fruitful, dull = (enable_key(single, "fault", kind) for kind in list(single.swarm.faults)[:2])
    feedback = Feedback()
    for number in range(4):
        feedback.add({f"on:{dull}", "pair:a>b"})
        feedback.add({f"on:{fruitful}", f"pair:new{number}>b"})
    bias = feedback.bias(single)
    assert bias.chance(fruitful, 0.5) > 0.5 > bias.chance(dull, 0.5)
    assert bias.chance(fruitful, 1.0) == 1.0 and bias.chance(dull, 0.0) == 0.0


def test_a_signature_names_pairs_fault_points_checks_and_kinds():
    single = load_workload(SINGLE, registry())
    with frozen_time():
        report = run_generated([single], 0, 3)
    marks = signature(report.result.history, ["w/fault.stall"])
    kinds = [record.event.kind for record in report.result.history]
    assert f"pair:{kinds[0]}>{kinds[1]}" in marks
    assert "on:w/fault.stall" in marks
    assert any(mark.startswith("check:") for mark in marks)


def test_the_results_document_counts_the_signature_and_says_feedback_was_on(fed):
    result = document(fed, ["w"], {}, mutant=None)
    assert result["feedback"] is True
    assert result["signature_reached"]["pair"] == sum(mark.startswith("pair:") for mark in result["signature"])
    assert result["signature_reached"]["on"] > 0


def test_the_command_gives_the_same_feedback_campaign_for_any_jobs_and_refuses_a_shard(tmp_path):
    one, two = (run_cli("swarm", str(SINGLE), "--feedback", "--runs", str(BATCH + 2), "--json", "-j", jobs, "--out", f"out{jobs}",
                        cwd=tmp_path) for jobs in ("1", "2"))
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert a["feedback"] and a["per_run"] == b["per_run"] and a["signature"] == b["signature"]
    sharded = run_cli("swarm", str(SINGLE), "--feedback", "--shard", "1/2", cwd=tmp_path)
    assert sharded.returncode == 2 and "--feedback with --shard 1/2" in sharded.stderr


def test_the_benchs_search_draws_the_runs_the_campaign_draws(workloads):
    """`bench swarm --feedback` searches run by run; it must meet the failures the campaign meets, in order,
    and skip exactly the scenarios known to fail unmutated (here: all of them)."""
    runs = 3 * BATCH
    done = campaign(workloads, 0, runs=runs, feedback=True)
    failing = [run.index for run in done.runs if run.failure is not None]
    found = first_find(workloads, 0, runs, True, frozenset(), lambda document: True)
    assert found["found"] == (failing[0] if failing else None)
    assert first_find(workloads, 0, runs, True, frozenset(), lambda document: False)["found"] is None
    assert first_find(workloads, 0, runs, True, frozenset(unmutated_failures(workloads, 0, runs, True)), lambda document: True)["found"] is None


def test_the_race_measures_both_modes_under_a_mutant_and_they_agree_within_the_first_batch(workloads, tmp_path):
    result = compare_feedback(workloads, ["appends-ignore-lease"], roots=1, max_runs=BATCH, jobs=1, out_dir=tmp_path)
    entry = result["per_mutant"]["appends-ignore-lease"]
    assert entry["plain"]["runs"] == entry["feedback"]["runs"]
    assert entry["plain"]["runs"][0] is not None and 1 <= entry["plain"]["runs"][0] <= BATCH
    assert "appends-ignore-lease" in render(result)
