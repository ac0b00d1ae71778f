"""Shrinking: real catalogue failures under curated mutants get smaller and still replay byte for byte.

The failures come from `python -m sim run --mutant` in a subprocess, as a user meets them; the lenient
replay and the TOML writer the shrinker stands on are checked directly.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from support import run_cli

from sim.core.world import World
from sim.kernel.decisions import Draw, TaskChoice
from sim.scenario.toml_writer import toml_text
from sim.shrinking.scenario_shrinker import _drive_renaming
from sim.strategies.follow import FollowSchedule, Recording
from sim.strategies.prefix import PrefixReplay
from sim.strategies.replay import ReplayStrategy

ROOT = Path(__file__).resolve().parent.parent
LATE_RELEASE = ROOT / "scenarios" / "late_release_frees_new_holders_lease.toml"
# Under this mutant two of the scenario's three faults play no part in the failure.
LOOSE_MUTANT = "cancelled-attempt-keeps-cooldown"
# Under this one every fault of the scenario is needed.
TIGHT_MUTANT = "holder-qualified-release"


def sim(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


def failing_repro(scenario: Path, mutant: str, tmp_path: Path) -> Path:
    out = tmp_path / "found"
    done = sim("run", str(scenario), "--mutant", mutant, "--out", str(out), "--no-shrink", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "shrunk" not in done.stdout
    return next(out.glob("*.repro.json"))


def test_a_mutant_failure_shrinks_to_half_its_decisions_and_replays_byte_for_byte(tmp_path):
    repro = failing_repro(LATE_RELEASE, LOOSE_MUTANT, tmp_path)
    original = json.loads(repro.read_text())
    done = sim("shrink", str(repro), "--mutant", LOOSE_MUTANT, "--json", "--out", str(tmp_path / "shrunk"), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["invariant"] == original["invariant"]
    assert result["before"]["decisions"] == len(original["decisions"])
    assert result["after"]["decisions"] * 2 <= result["before"]["decisions"]
    assert result["after"]["faults"] < result["before"]["faults"]
    shrunk = json.loads(Path(result["repro"]).read_text())
    assert shrunk["invariant"] == original["invariant"] and len(shrunk["decisions"]) == result["after"]["decisions"]
    assert shrunk["scenario"] == result["scenario"]
    header = Path(result["scenario"]).read_text().splitlines()[0]
    assert str(repro) in header and original["invariant"] in header
    replays = [sim("replay", result["repro"], "--mutant", LOOSE_MUTANT, cwd=tmp_path) for _ in range(2)]
    assert [r.returncode for r in replays] == [1, 1]
    assert "identical to the recording" in replays[0].stdout
    assert f"FAIL {shrunk['name']}: {original['invariant']}" in replays[0].stdout
    assert replays[0].stdout == replays[1].stdout


def test_the_fault_plan_shrink_drops_a_fault_that_plays_no_part(tmp_path):
    folder = tmp_path / "copy"
    folder.mkdir()
    scenario = folder / LATE_RELEASE.name
    shutil.copy(LATE_RELEASE, scenario)
    with scenario.open("a") as file:
        file.write('\n[[fault]]\nkind = "ctrl_c"\nat = "30m"\n')
    repro = failing_repro(scenario, TIGHT_MUTANT, tmp_path)
    done = sim("shrink", str(repro), "--mutant", TIGHT_MUTANT, "--json", cwd=tmp_path)
    result = json.loads(done.stdout)
    assert (result["before"]["faults"], result["after"]["faults"]) == (4, 3)
    shrunk = tomllib.loads(Path(result["scenario"]).read_text())
    assert [fault["kind"] for fault in shrunk["fault"]] == ["stall", "db_busy", "second_process"]
    assert Path(result["repro"]).parent == repro.parent
    assert "Shrunk from late_release_frees_new_holders_lease: dropped 1 of 4 faults (ctrl_c)" in shrunk["description"]


def test_run_shrinks_each_failure_and_prints_sizes_and_the_replay(tmp_path):
    out = tmp_path / "out"
    done = sim("run", str(LATE_RELEASE), "--mutant", LOOSE_MUTANT, "--out", str(out), cwd=tmp_path)
    assert done.returncode == 1
    invariant = json.loads((out / "late_release_frees_new_holders_lease-seed0.repro.json").read_text())["invariant"]
    assert f"shrunk late_release_frees_new_holders_lease ({invariant})" in done.stdout
    assert any(line.split()[:1] == ["decisions"] for line in done.stdout.splitlines())
    shrunk_repro = out / "late_release_frees_new_holders_lease_shrunk-seed0.repro.json"
    assert f"replay: python -m sim replay {shrunk_repro}" in done.stdout
    as_json = json.loads(sim("run", str(LATE_RELEASE), "--mutant", LOOSE_MUTANT, "--out", str(out), "--json", cwd=tmp_path).stdout)
    assert as_json["scenarios"][0]["shrink"]["repro"] == str(shrunk_repro)


def test_a_generated_failure_sheds_the_turns_that_only_filled_the_transcript(tmp_path):
    """Run 2 of the multi_process workload fills a session with 25 turns before the compaction the mutant breaks:
    dropping them alone leaves the threshold out of reach, lowering it alone starts a compaction turns early."""
    workload = ROOT / "scenarios" / "swarm" / "multi_process.toml"
    found = sim("swarm", str(workload), "--seed", "0", "--runs", "3", "--mutant", "clone-concurrent-tail",
                "--out", str(tmp_path / "found"), "--json", cwd=tmp_path)
    repro = json.loads(found.stdout)["failures"][0]["repro"]
    done = sim("shrink", repro, "--mutant", "clone-concurrent-tail", "--json", "--out", str(tmp_path / "shrunk"), cwd=tmp_path)
    result = json.loads(done.stdout)
    before, after = (result[side]["faults"] + result[side]["drives"] for side in ("before", "after"))
    assert before >= 30 and after * 10 <= before * 3, (before, after)
    assert "threshold_tokens lowered" in Path(result["scenario"]).read_text()
    description = tomllib.loads(Path(result["scenario"]).read_text())["description"]
    assert description.startswith("Generated from the workload multi_process: root seed 0, run 2.")
    assert f"dropped {result['before']['drives'] - result['after']['drives']} of {result['before']['drives']} drives (turn \"" in description
    replay = sim("replay", result["repro"], "--mutant", "clone-concurrent-tail", cwd=tmp_path)
    assert replay.returncode == 1 and "identical to the recording" in replay.stdout


# A generated find (workload cooldown, root seed 0, run 1525) after the other moves: the provider fails at its
# 2nd summary call, but the first call is made by the compaction of turn 1, which plays no other part.
COUNTED_FAULT = """
name = "counted_fault"
[world]
sessions = [{ id = "s1", messages = 22 }]
config = { threshold_tokens = 1, in_place = false, idle_timeout_s = 19.173, ceiling_timeout_s = 39.776, provider_latency_s = 36.836, provider_tick_s = 2.39, ctrl_c_grace_s = 2.008, summary_failure_cooldown_s = 496.057 }
agents = [{ name = "a1", process = "p1", session = "s1", frontend = "cli" }]
[[drive]]
at = 72.18
agent = "a1"
turn = "turn 1 of a1"
[[drive]]
at = 143.408
agent = "a1"
turn = "turn 2 of a1"
[[drive]]
at = 148.136
agent = "a1"
command = "ctrl_c"
[[fault]]
kind = "provider_error"
point = "provider.summary"
nth = 2
until = 300.0
[[fault]]
kind = "stall"
point = "db.record_cooldown"
at = 117.97
until = 300.0
duration = 181.117
[explore]
runs = 1
seed = 6799416971298380475
strategy = "pct"
"""


def test_a_dropped_turn_that_passed_a_counted_faults_point_takes_one_hit_off_its_count(tmp_path):
    scenario = tmp_path / "counted_fault.toml"
    scenario.write_text(COUNTED_FAULT)
    repro = failing_repro(scenario, "cooldown-exact-restore", tmp_path)
    done = sim("shrink", str(repro), "--mutant", "cooldown-exact-restore", "--json", "--out", str(tmp_path / "shrunk"),
               cwd=tmp_path)
    result = json.loads(done.stdout)
    assert (result["before"]["drives"], result["after"]["drives"]) == (3, 2)
    text = Path(result["scenario"]).read_text()
    assert [drive["turn"] for drive in tomllib.loads(text)["drive"] if "turn" in drive] == ["turn 2 of a1"]
    assert tomllib.loads(text)["fault"][0]["nth"] == 1 and "fires at hit 1 of its point, not 2" in text
    replay = sim("replay", result["repro"], "--mutant", "cooldown-exact-restore", cwd=tmp_path)
    assert replay.returncode == 1 and "identical to the recording" in replay.stdout


def test_shrinking_a_run_that_no_longer_fails_is_bad_input(tmp_path):
    repro = failing_repro(LATE_RELEASE, LOOSE_MUTANT, tmp_path)
    # As if recorded on a reference whose bug has been fixed since: the same run now holds.
    repro.write_text(json.dumps({**json.loads(repro.read_text()), "mutant": None}))
    done = sim("shrink", str(repro), cwd=tmp_path)
    assert done.returncode == 2
    invariant = json.loads(repro.read_text())["invariant"]
    assert f"does not violate {invariant} (it shows no violation)" in done.stderr and "Traceback" not in done.stderr


# ---- what the shrinker stands on -----------------------------------------------------------------


async def two_workers(rt):
    """Two tasks that checkpoint in turn, one of them drawing a number: task choices and a draw."""
    async def worker(name):
        for _ in range(3):
            await rt.checkpoint()
        if name == "a":
            rt.rng("coin").randrange(4)

    async with rt.open_nursery() as nursery:
        nursery.start_soon(worker, "a")
        nursery.start_soon(worker, "b")


@pytest.mark.parametrize("recorded", [[], [TaskChoice(2, 9)] * 40, [Draw("coin", 4, 3)] * 40])
def test_the_lenient_replay_always_runs_and_its_recording_replays_strictly(recorded):
    lenient = World(0, PrefixReplay(recorded)).run(two_workers)
    assert lenient.outcome == "ok"
    strict = World(0, ReplayStrategy(lenient.decisions)).run(two_workers)
    assert strict.digest() == lenient.digest()


def test_past_the_end_and_on_the_wrong_kind_the_lenient_replay_takes_the_default():
    strategy = PrefixReplay([TaskChoice(3, 5), Draw("s", 10, 7), TaskChoice(2, 1)])
    strategy.begin(0)
    assert strategy.choose_task([object(), object()], None) == 1  # clamped into range
    assert strategy.choose_task([object(), object()], None) == 0  # a draw was recorded here
    assert strategy.draw("s", 10) == 0  # a task choice was recorded here
    assert strategy.draw("s", 10) == 0  # past the end


def named_workers(names, steps):
    """Tasks called by `names` that each note their steps in `steps` and draw once: what a schedule steers."""
    async def worker(rt, name):
        for number in range(3):
            steps.append((name, number))
            await rt.checkpoint()
        rt.rng(f"coin.{name}").randrange(4)

    async def main(rt):
        async with rt.open_nursery() as nursery:
            for name in names:
                nursery.start_soon(worker, rt, name, name=name)

    return main


def test_a_schedule_recorded_by_name_replays_the_same_run():
    steered = Recording(PrefixReplay([TaskChoice(3, 2), TaskChoice(3, 1), Draw("coin.a", 4, 3)] * 5))
    first = World(0, steered).run(named_workers("abc", []))
    again = World(0, FollowSchedule(steered.schedule())).run(named_workers("abc", []))
    assert again.digest() == first.digest()


def test_following_a_schedule_without_a_removed_task_keeps_the_others_order():
    """Indices shift once task b is gone; names do not, so a and c step in the order they did with b."""
    steps_with_b: list = []
    steered = Recording(PrefixReplay([TaskChoice(3, 0), TaskChoice(3, 1), TaskChoice(3, 2)] * 6))
    recorded = World(0, steered).run(named_workers("abc", steps_with_b))
    expected = [step for step in steps_with_b if step[0] != "b"]
    by_index: list = []
    World(0, PrefixReplay(recorded.decisions)).run(named_workers("ac", by_index))
    assert by_index != expected
    by_name: list = []
    World(0, FollowSchedule(steered.schedule().renamed(lambda name: None if name == "b" else name))).run(
        named_workers("ac", by_name))
    assert by_name == expected


def test_a_drive_task_is_renamed_to_its_position_among_the_kept_drives():
    rename = _drive_renaming((3, 5, 7), (3, 7))
    assert [rename("drive.0.turn"), rename("drive.1.command"), rename("drive.2.turn"), rename("fault.stall")] == [
        "drive.0.turn", None, "drive.1.turn", "fault.stall"]


def test_the_scenario_writer_round_trips_awkward_text():
    document = {
        "name": "x_shrunk", "description": 'quotes " and \\ and\nnew line, tab\t, del \x7f, ünïcode',
        "world": {"config": {"threshold_tokens": 400, "lease_ttl_s": 4.0, "in_place": False},
                  "sessions": [{"id": "s1", "model_config": {"a.b": [1, 2.5e-07, "c"], "empty": {}}}]},
        "drive": [{"at": "0s", "turn": "hi"}],
        "fault": [{"kind": "stall", "at": 1.5, "duration": float("inf")}, {"kind": "ctrl_c", "nth": 2, "point": "db.*"}],
        "expect": {"invariants": "all"},
    }
    assert tomllib.loads(toml_text(document)) == document
