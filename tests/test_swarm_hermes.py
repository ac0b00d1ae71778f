"""Generated workloads on hermes-agent as released: drawn from what the release can take, judged by the invariants
that apply to it, and their failures exported as scenario files of that target that replay by digest.

The first tests need no release (they generate runs, never run them); those that run one skip, naming it and the
command that installs it, when this machine's store lacks it (`.ci/run` installs it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, checkout_env, run_cli

from sim.scenario import targeting, targets
from sim.scenario.names import reference_points, registry
from sim.scenario.scenario_error import ScenarioError
from sim.swarm.generate import generate
from sim.swarm.workload_loader import load_workload, load_workloads

RELEASE = "hermes==0.19.0"
CATALOGUE = ROOT / "scenarios" / "swarm"
HERMES = CATALOGUE / "hermes"
RUNS = 40  # generated (never run) per workload: enough for every kind a workload enables to be drawn


def drawn_beyond(scenario: object, can: targets.Capabilities) -> list[str]:
    """What a generated scenario asks that the target cannot take (empty when everything fits)."""
    beyond = [f"drive {drive.action}" for drive in scenario.drives if str(drive.action) not in can.drives]
    for fault in scenario.faults:
        if fault.kind not in can.faults:
            beyond.append(f"fault {fault.kind}")
        elif fault.trigger.point is not None and fault.trigger.point not in can.faults[fault.kind]:
            beyond.append(f"{fault.kind} at {fault.trigger.point}")
        if fault.trigger.after_event is not None and fault.trigger.after_event not in can.events:
            beyond.append(f"{fault.kind} after {fault.trigger.after_event}")
        beyond += [f"{fault.kind}.{name}" for name in can.refused.get(fault.kind, ()) if fault.params.get(name) is not None]
    beyond += [f"setting {key}" for key in scenario.world.config if key not in can.settings]
    beyond += [f"{agent.frontend} agent" for agent in scenario.world.agents if agent.frontend not in can.frontends]
    return beyond


@pytest.mark.parametrize("release", ["hermes==0.16.0", RELEASE])
def test_every_workload_on_a_release_draws_only_what_the_release_can_take(release):
    can = targeting.capabilities(release)
    workloads = load_workloads([CATALOGUE, HERMES], registry(), release)
    kinds: set[str] = set()
    for workload in workloads:
        for index in range(RUNS):
            scenario = generate(workload, 0, index)  # checked by the target too: a refusal would raise here
            assert scenario.target == release
            assert drawn_beyond(scenario, can) == [], (workload.name, index)
            kinds |= {fault.kind for fault in scenario.faults} | {str(drive.action) for drive in scenario.drives}
    # ... and still draws every kind of what it can take, titles too: from the sources the release takes (/title: the
    # user's only), not cut
    assert kinds == set(can.faults) | set(can.drives)
    single = next(workload for workload in workloads if workload.name == "single_agent")
    assert "swarm.faults.late_worker (hermes has no late_worker fault)" in [str(cut).replace(release, "hermes") for cut in single.cuts]
    gateway = next(workload for workload in workloads if workload.name == "gateway")
    assert gateway.title_sources == ("user",) and not any(cut.keys == ("swarm", "actions", "title") for cut in gateway.cuts)
    titles = [drive for index in range(RUNS) for drive in generate(gateway, 0, index).drives if str(drive.action) == "title"]
    assert titles and {drive.title_source for drive in titles} == {"user"}
    # the reference's gateway workload asks /compress of any agent, which hermes's gateway does not take: no gateway
    # agents there; the release's own gateway workload asks none, and keeps them
    assert any(str(cut).startswith(f"swarm.world.gateway ({release}'s gateway agents take no compress") for cut in gateway.cuts)
    ours = next(workload for workload in workloads if workload.name == "hermes_gateway")
    assert ours.swarm.world.gateway == 1.0


def test_a_release_before_in_place_compaction_draws_none_of_its_store_writes():
    (workload,) = load_workloads([HERMES / "two_processes.toml"], registry(), "hermes==0.16.0")
    points = {point for draw in workload.swarm.faults.values() for point in draw.points or ()}
    assert points and not points & {"db.archive_and_compact", "db.refresh_lease"}
    assert "in_place" not in workload.swarm.world.config  # fixed at False before 0.18.2: not drawn


def test_on_the_reference_a_workload_draws_no_point_only_a_release_has():
    workloads = load_workloads([CATALOGUE], registry())
    assert all(workload.target == "reference" and workload.cuts == () for workload in workloads)
    released_only = set(targets.released_points()) - set(reference_points())
    assert "db.replace_messages" in released_only
    drawn = {point for workload in workloads for draw in workload.swarm.faults.values() for point in draw.points or ()}
    assert drawn and not drawn & released_only


def test_a_workload_naming_its_release_may_ask_only_what_it_can_take(tmp_path):
    path = tmp_path / "asks_too_much.toml"
    path.write_text(f'target = "{RELEASE}"\n[swarm.actions]\nturn = {{ per_minute = 1.0 }}\n'
                    '[swarm.faults.late_worker]\npoints = ["provider.summary"]\npast_host_by = ["1s", "2s"]\n')
    with pytest.raises(ScenarioError) as raised:
        load_workload(path, registry())
    assert raised.value.key == "swarm.faults.late_worker" and RELEASE in raised.value.expected


def test_a_bad_target_is_exit_2_naming_it(tmp_path):
    done = run_cli("swarm", str(HERMES), "--target", "hermes==9.9.9", "--runs", "1", "--out", "out", cwd=tmp_path)
    assert done.returncode == 2 and "hermes==9.9.9" in done.stderr, done.stderr
    (tmp_path / "bad.toml").write_text('target = "hermes==0.12.0"\n[swarm.actions]\nturn = { per_minute = 1.0 }\n')
    done = run_cli("swarm", "bad.toml", "--runs", "1", "--out", "out", cwd=tmp_path)
    assert done.returncode == 2 and "bad.toml: target" in done.stderr and "hermes==0.12.0" in done.stderr, done.stderr


# ---- the release itself ---------------------------------------------------------------------------------------


def installed(target: str = RELEASE) -> None:
    reason = targets.unavailable(target)
    if reason is not None:
        pytest.skip(f"{target}: {reason}")


def test_a_campaign_on_the_release_finds_failures_exported_with_their_target_that_replay_by_digest(tmp_path):
    installed()
    done = run_cli("swarm", str(HERMES / "terminal.toml"), "--runs", "4", "-j", "2", "--json", "--out", "out", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    results = json.loads(done.stdout)
    assert results["target"] == RELEASE and results["runs"] == 4 and results["failures"]
    # every class is the release's doing, not a check that could not read it
    assert not [f["explanation"] for f in results["failures"] if "the check itself raised" in f["explanation"]]
    failure = results["failures"][0]
    assert f'target = "{RELEASE}"' in (tmp_path / failure["scenario"]).read_text()
    python, *command = failure["replay"].split()
    replayed = subprocess.run([sys.executable, *command], capture_output=True, text=True, cwd=tmp_path, env=checkout_env())
    assert replayed.returncode == 1 and "identical to the recording" in replayed.stdout, replayed.stderr
    rerun = run_cli("run", failure["scenario"], "--no-shrink", "--json", "--out", "out", cwd=tmp_path)
    assert json.loads(rerun.stdout)["scenarios"][0]["violation"]["invariant"] == failure["invariant"]


def test_a_find_on_the_release_shrinks_there_to_a_scenario_of_that_target(tmp_path):
    installed()
    done = run_cli("swarm", str(HERMES / "terminal.toml"), "--runs", "1", "--shrink", "--json", "--out", "out", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    shrunk = json.loads(done.stdout)["failures"][0]["shrunk"]
    assert shrunk["after"]["drives"] <= shrunk["before"]["drives"] and shrunk["after"]["faults"] <= shrunk["before"]["faults"]
    assert f'target = "{RELEASE}"' in Path(tmp_path / shrunk["scenario"]).read_text()
    replayed = run_cli("replay", shrunk["repro"], cwd=tmp_path)
    assert replayed.returncode == 1 and "identical to the recording" in replayed.stdout, replayed.stderr


def test_the_workloads_of_a_release_are_no_catalogue_items_for_pytest():
    """`scenarios/swarm/hermes/` holds workloads, not scenarios: pytest must not collect them as scenario files."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", str(HERMES)], capture_output=True,
                          text=True, cwd=ROOT, env=checkout_env())
    assert "no tests collected" in done.stdout and "error" not in done.stdout.lower(), done.stdout


def test_a_worker_answers_on_a_channel_nothing_else_prints_to():
    """A release prints (its status lines, a log handler made on sys.stdout at import): in a `-j` worker that would
    break the line protocol and end the campaign. What else the worker prints goes to stderr."""
    program = ("import sys; from sim.swarm.workers import answer_channel; channel = answer_channel(); "
               "print('printed by the code under test'); sys.stdout.flush(); channel.write('{}\\n'); channel.flush()")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, env=checkout_env())
    assert done.stdout == "{}\n" and "printed by the code under test" in done.stderr, (done.stdout, done.stderr)


@pytest.mark.parametrize("name, fault, then", [
    # a store that refuses to end the session leaves it open, and the turn after runs
    ("end_refused", '[[fault]]\nkind = "db_write_failure"\npoint = "db.end_session"\nnth = 1\n',
     '[[drive]]\nat = "1s"\nturn = "then a question"\n'),
    # a process that dies under its user's action ends the action (its thread), not the run
    ("dies_ending", '[[fault]]\nkind = "crash"\npoint = "db.end_session"\nnth = 1\nprocess = "p1"\n', ""),
])
def test_an_end_session_that_fails_or_dies_in_the_store_leaves_the_run_to_finish(tmp_path, name, fault, then):
    installed()
    path = tmp_path / f"{name}.toml"
    path.write_text(f'target = "{RELEASE}"\n[world]\nsessions = [{{ id = "s1", messages = 4 }}]\n'
                    '[[drive]]\nat = "0s"\ncommand = "end_session"\n' + then + fault, encoding="utf-8")
    done = run_cli("run", str(path), "--runs", "1", "--no-shrink", "--json", "--out", "out", cwd=tmp_path)
    verdict = json.loads(done.stdout)["scenarios"][0]
    assert "run_completes" not in verdict["violated"] and verdict["faults_fired"] == [1], verdict
