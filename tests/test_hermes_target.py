"""hermes-agent as a target of the scenario language: what it can be asked, what the oracle judges, and seed 000.

The first tests need no release (they check what a scenario may ask of one); those that run a release skip,
naming it and the command that installs it, when this machine's store lacks it (`.ci/run` installs it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, checkout_env

from sim.invariants import INVARIANTS
from sim.scenario import targets
from sim.scenario.loader import load_scenario
from sim.scenario.names import registry
from sim.scenario.scenario_error import ScenarioError
from targets.hermes.system import _status as system_status

SEED_000 = ROOT / "scenarios" / "hermes" / "seed_000_ctrl_c_next_turn_second_writer.toml"
RELEASE = "hermes==0.19.0"


def scenario_text(body: str, target: str = RELEASE, config: str = "") -> str:
    return f'target = "{target}"\n[world]\nsessions = [{{ id = "s1", messages = 4 }}]\nconfig = {{ {config} }}\n' + body


def load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "x.toml"
    path.write_text(text, encoding="utf-8")
    return load_scenario(path, registry())


TURN = '[[drive]]\nat = "0s"\nturn = "q"\n'


@pytest.mark.parametrize("config, body, key, said", [
    ("", '[[drive]]\nat = "0s"\ncommand = "stop"\n', "drive[0]", "a drive hermes==0.19.0 can take"),
    ("", '[[drive]]\nat = "0s"\ntitle = "t"\ntitle_source = "llm"\n', "drive[0].title_source", "keeps no title source"),
    ("", TURN + '[[fault]]\nkind = "lease_expiry"\npoint = "lease.refresh"\nnth = 1\n', "fault[0].kind",
     "a fault hermes==0.19.0 can take"),
    ("", TURN + '[[fault]]\nkind = "stall"\npoint = "host.wait"\nnth = 1\nduration = "1s"\n', "fault[0].point",
     "a point of hermes==0.19.0 for stall"),
    ("pool_cap = 2", TURN, "world.config.pool_cap", "a setting hermes==0.19.0 has"),
    ("", TURN + '[[fault]]\nkind = "message_mid_compression"\npoint = "turn.model"\nnth = 1\n', "fault[0].point",
     "a point of hermes==0.19.0 for message_mid_compression"),
])
def test_what_a_release_cannot_do_is_bad_input_naming_the_target(tmp_path, config, body, key, said):
    with pytest.raises(ScenarioError) as raised:
        load(tmp_path, scenario_text(body, config=config))
    assert raised.value.key == key and said in raised.value.expected


@pytest.mark.parametrize("command", ["compress", "ctrl_c"])
def test_a_terminal_command_for_a_gateway_agent_is_bad_input_naming_the_target(tmp_path, command):
    text = (f'target = "{RELEASE}"\n[world]\nsessions = [{{ id = "s1", messages = 4 }}]\n'
            'agents = [{ name = "bot", session = "s1", frontend = "gateway" }]\n'
            f'[[drive]]\nat = "0s"\ncommand = "{command}"\n')
    with pytest.raises(ScenarioError) as raised:
        load(tmp_path, text)
    assert raised.value.key == "drive[0]" and f"{RELEASE}'s gateway takes" in raised.value.expected


def test_a_ctrl_c_fault_pressed_at_a_gateway_agent_is_bad_input_naming_the_target(tmp_path):
    text = (f'target = "{RELEASE}"\n[world]\nsessions = [{{ id = "s1", messages = 4 }}]\n'
            'agents = [{ name = "bot", session = "s1", frontend = "gateway" }]\n'
            '[[drive]]\nat = "0s"\nmessage = "q"\n[[fault]]\nkind = "ctrl_c"\nat = "1s"\n')
    with pytest.raises(ScenarioError) as raised:
        load(tmp_path, text)
    assert raised.value.key == "fault[0].agent" and f"{RELEASE}'s gateway has no ctrl_c" in raised.value.expected


def test_a_release_before_in_place_compaction_refuses_the_setting(tmp_path):
    with pytest.raises(ScenarioError, match="no in_place setting before 0.18.2"):
        load(tmp_path, scenario_text(TURN, "hermes==0.16.0", config="in_place = true"))


def test_an_unknown_target_is_bad_input(tmp_path):
    with pytest.raises(ScenarioError) as raised:
        load(tmp_path, scenario_text(TURN, "hermes==0.12.0"))
    assert raised.value.key == "target"


def test_an_invariant_applies_to_hermes_only_when_hermes_shows_what_it_needs():
    applies = {name: targets.applies(invariant, RELEASE) for name, invariant in INVARIANTS.items()}
    assert applies["told_messages_kept_once_in_order"] is None
    assert applies["single_live_head"] is None
    assert "fence" in (applies["no_commit_after_cancel"] or "")  # hermes has no fence: nothing to judge there
    assert applies["dead_holder_reclaimable"] is None  # the holder hook names the attempt and crashes their pid
    assert applies["commit_holds_lease"] is None
    assert "setting pool_cap" in (applies["pool_admission_bounded"] or "")
    assert applies["title_follows_conversation"] is None  # titles given by /title, and rotations (R17)
    assert applies["no_false_auto_reset"] is None  # the gateway's reset, the attempt's outcome (R23)
    assert applies["overflow_recovery_ignores_cooldown"] is None  # the provider's refusal, the cooldown's block
    assert "host.returned" in (applies["caller_session_follows_rotation"] or "")  # hermes's attempt has no host
    assert all(targets.applies(invariant, "reference") is None for invariant in INVARIANTS.values())


def test_list_invariants_says_which_apply_to_a_release_and_why_not():
    done = subprocess.run([sys.executable, "-m", "sim", "list", "invariants", "--target", RELEASE, "--json"],
                          capture_output=True, text=True, cwd=ROOT, env=checkout_env())
    items = {item["name"]: item for item in json.loads(done.stdout)["items"]}
    assert items["told_messages_kept_once_in_order"]["applies"] == "yes"
    assert items["no_commit_after_cancel"]["description"].startswith("not applicable: needs fence.")


# ---- the release itself ---------------------------------------------------------------------------------------


def installed(target: str = RELEASE) -> None:
    reason = targets.unavailable(target)
    if reason is not None:
        pytest.skip(f"{target}: {reason}")


def sim_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, cwd=cwd, env=checkout_env())


def test_seed_000_loses_the_users_messages_on_0_19_0_and_the_reference_keeps_them(tmp_path):
    installed()
    on_hermes = sim_cli("run", str(SEED_000), "--runs", "1", "--json", "--no-shrink", "--out", str(tmp_path))
    verdict = json.loads(on_hermes.stdout)["scenarios"][0]
    assert {"told_messages_kept_once_in_order", "acknowledged_appends_survive"} <= set(verdict["violated"])
    on_reference = sim_cli("run", str(SEED_000), "--target", "reference", "--runs", "3", "--json", "--out", str(tmp_path))
    assert json.loads(on_reference.stdout)["scenarios"][0]["violation"] is None
    again = sim_cli("replay", verdict["replay"].split()[-1])
    assert again.returncode == 1 and "identical to the recording" in again.stdout, again.stderr


def test_an_attempt_that_moved_without_making_its_child_failed():
    assert system_status(True, False, True) == "rotated"
    assert system_status(False, True, False) == "committed"
    assert system_status(False, False, True) == "failed"  # 0.18.2 keeps the new id when create_session fails
    assert system_status(False, False, False) == "unchanged"


def test_lease_faults_reach_hermes_and_its_holders_name_their_attempt(tmp_path):
    """db.refresh_lease faults hermes's refresh (R3's scenario needs its fault fired and its marks reached), and a
    crashed holder is judged by its attempt and pid (R24's scenario fails by dead_holder_reclaimable)."""
    installed()
    folder = ROOT / "scenarios" / "hermes"
    done = sim_cli("run", str(folder / "lapsed_holders_release_leaves_new_holders_lease.toml"),
                   str(folder / "crashed_holder_blocks_compaction_for_ttl.toml"), "--runs", "1", "--json", "--no-shrink",
                   "--out", str(tmp_path))
    verdicts = {verdict["scenario"]: verdict for verdict in json.loads(done.stdout)["scenarios"]}
    assert verdicts["lapsed_holders_release_leaves_new_holders_lease"]["passed"], done.stdout
    assert verdicts["crashed_holder_blocks_compaction_for_ttl"]["violated"] == ["dead_holder_reclaimable"]


def test_releases_prints_a_scenario_by_target_table(tmp_path):
    installed()
    done = sim_cli("releases", str(SEED_000), "--targets", f"hermes==0.16.0,{RELEASE},reference", "--runs", "1", "--json",
                   "--out", str(tmp_path))
    cells = json.loads(done.stdout)["cells"]["seed_000_ctrl_c_next_turn_second_writer"]
    assert cells["hermes==0.16.0"] == "not expressible"  # no in-place compaction before 0.18.2
    assert cells[RELEASE].startswith("FAIL") and cells["reference"] == "pass"


R23 = ROOT / "scenarios" / "hermes" / "cooldown_blocks_overflow_recovery_and_gateway_resets.toml"


def test_a_cooldown_blocking_the_overflow_recovery_resets_the_gateways_session_on_every_release(tmp_path):
    """R23: every release takes the blocked recovery for exhaustion and the gateway resets the session; the reference
    recovers past the cooldown. With hermes's default static fallback summary, 0.16.0 commits a "summary
    unavailable" handoff during the cooldown instead, so its recovery shrinks the context and nothing is reset."""
    releases = ("hermes==0.16.0", "hermes==0.17.0", "hermes==0.18.2", RELEASE)
    for target in releases:
        installed(target)
    done = sim_cli("releases", str(R23), "--targets", ",".join((*releases, "reference")), "--runs", "1", "--json",
                   "--out", str(tmp_path))
    cells = json.loads(done.stdout)["cells"][R23.stem]
    failing = "FAIL no_false_auto_reset, overflow_recovery_ignores_cooldown (seed 0)"
    assert cells == {**dict.fromkeys(releases, failing), "reference": "pass"}, cells
    default = tmp_path / "default_fallback.toml"
    default.write_text(R23.read_text(encoding="utf-8").replace("static_fallback_summary = false", "static_fallback_summary = true"),
                       encoding="utf-8")
    done = sim_cli("run", str(default), "--target", "hermes==0.16.0", "--runs", "1", "--json", "--no-shrink", "--out", str(tmp_path))
    assert json.loads(done.stdout)["scenarios"][0]["violation"] is None, done.stdout


def test_a_main_model_error_hermes_reads_as_an_overflow_is_one(tmp_path):
    """A provider error with no code whose text says the prompt is too long: hermes's classifier reads it as an
    overflow, its turn loop recovers from it, and the cooldown blocking that recovery is judged."""
    installed()
    text = R23.read_text(encoding="utf-8").replace('raises = "context_length_exceeded"\n', "")
    by_text = tmp_path / "overflow_by_text.toml"
    by_text.write_text(text.replace("This model's context window was exceeded by the input.", "The prompt is too long."),
                       encoding="utf-8")
    done = sim_cli("run", str(by_text), "--runs", "1", "--json", "--no-shrink", "--out", str(tmp_path))
    assert "overflow_recovery_ignores_cooldown" in json.loads(done.stdout)["scenarios"][0]["violated"], done.stdout


def test_the_r23_file_reaches_the_reference_s_overflow_recovery(tmp_path):
    """Without its fix (the recovery bypasses the cooldown) the reference fails the same file: the provider's refusal
    at `turn.model` reaches its overflow recovery."""
    done = sim_cli("run", str(R23), "--target", "reference", "--runs", "1", "--json", "--no-shrink",
                   "--mutant", "overflow-bypasses-cooldown", "--out", str(tmp_path))
    assert json.loads(done.stdout)["scenarios"][0]["violated"] == ["overflow_recovery_ignores_cooldown"], done.stdout


def test_the_r23_file_replays_identically_over_20_seeds():
    installed()
    done = sim_cli("check-determinism", str(R23), "--seeds", "20", "--target", RELEASE)
    assert done.returncode == 0 and "20 runs in two processes: 0 differences" in done.stdout, done.stdout + done.stderr


def test_numbered_answers_are_never_one_message_twice():
    from types import SimpleNamespace

    from targets.hermes.provider import script_main_model

    agent = SimpleNamespace()
    script_main_model(agent, "the answer of a1", numbered=True)
    said = [agent._interruptible_api_call({}).choices[0].message.content,
            agent._interruptible_streaming_api_call({}).choices[0].message.content]
    assert said == ["the answer of a1 #1", "the answer of a1 #2"]


def test_the_view_reads_hermes_wall_clock_times_as_virtual_seconds(tmp_path):
    import sqlite3

    from sim.threads.clock import EPOCH_S
    from targets.hermes.view import HermesStore

    path = tmp_path / "state.db"
    with sqlite3.connect(path) as db:
        db.executescript("CREATE TABLE sessions (id TEXT, parent_session_id TEXT, started_at REAL, ended_at REAL, "
                         "end_reason TEXT, message_count INTEGER);"
                         "CREATE TABLE messages (id INTEGER, session_id TEXT, role TEXT, content TEXT, timestamp REAL);"
                         "CREATE TABLE compression_locks (session_id TEXT, holder TEXT, acquired_at REAL, expires_at REAL);")
        db.execute("INSERT INTO sessions VALUES ('s1', NULL, ?, NULL, NULL, 1)", (EPOCH_S + 0.85,))
        db.execute("INSERT INTO messages VALUES (1, 's1', 'user', 'hi', ?)", (EPOCH_S + 2.5,))
        db.execute("INSERT INTO compression_locks VALUES ('s1', 'h', ?, ?)", (EPOCH_S + 0.85, EPOCH_S + 0.85 + 199.309))
    store = HermesStore(path)
    try:
        lease = store.lease_row("s1")
        assert lease is not None and (lease.acquired_at, lease.expires_at) == (0.85, 200.159)
        assert store.get_session("s1").started_at == 0.85  # type: ignore[union-attr]  # the row inserted above
        assert [row.timestamp for row in store.all_messages("s1")] == [2.5]
    finally:
        store.close()


def test_a_rotation_renumbers_the_title_on_every_release_and_the_reference_carries_it(tmp_path):
    """R17: the user's title comes back "trip planning #2" on the child, and stays on the ended parent."""
    installed()
    scenario = ROOT / "scenarios" / "hermes" / "rotation_renumbers_title.toml"
    done = sim_cli("releases", str(scenario), "--targets", f"hermes==0.16.0,{RELEASE},reference", "--runs", "1", "--json",
                   "--out", str(tmp_path))
    cells = json.loads(done.stdout)["cells"]["rotation_renumbers_title"]
    assert cells["hermes==0.16.0"] == cells[RELEASE] == "FAIL title_follows_conversation (seed 0)", cells
    assert cells["reference"] == "pass", cells


def test_a_rotation_cut_between_its_two_transactions_orphans_the_parent(tmp_path):
    """R20: a crash between end_session and create_session orphans the parent on every release; a failed
    create_session does only before 0.18.2, which reopen the parent; an end_session that commits but reports a failure
    does for good only on 0.19.0, whose "already rotated" check keeps the next compaction from rotating the ended
    parent again; the reference publishes in one transaction."""
    versions = ("0.16.0", "0.17.0", "0.18.2", "0.19.0")
    for version in versions:
        installed(f"hermes=={version}")
    folder = ROOT / "scenarios" / "hermes"
    done = sim_cli("releases", str(folder / "crash_between_end_and_child_orphans_parent.toml"),
                   str(folder / "failed_child_creation_orphans_parent.toml"),
                   str(folder / "end_session_reported_failed_orphans_parent.toml"),
                   "--targets", ",".join([*(f"hermes=={version}" for version in versions), "reference"]), "--json",
                   "--out", str(tmp_path))
    cells = json.loads(done.stdout)["cells"]
    orphaned = "FAIL no_orphan_parent (seed 0)"
    crash, failure = cells["crash_between_end_and_child_orphans_parent"], cells["failed_child_creation_orphans_parent"]
    assert all(crash[f"hermes=={version}"] == orphaned for version in versions) and crash["reference"] == "pass", crash
    assert failure["hermes==0.16.0"] == failure["hermes==0.17.0"] == orphaned, failure
    assert failure["hermes==0.18.2"] == failure["hermes==0.19.0"] == failure["reference"] == "pass", failure
    reported = cells["end_session_reported_failed_orphans_parent"]
    assert reported["hermes==0.19.0"] == orphaned, reported
    assert all(reported[f"hermes=={version}"] == "pass" for version in versions[:3]) and reported["reference"] == "pass", reported


def test_a_row_another_process_appended_is_never_credited_as_summarized(tmp_path):
    """hermes summarizes the agent's messages in memory: a row a second process appended before the compaction is
    archived by the in-place commit without being summarized, so it is lost, not in the attempt's input."""
    installed()
    scenario = tmp_path / "other_writer_before_compaction.toml"
    scenario.write_text(scenario_text(
        '[[fault]]\nkind = "message_mid_compression"\nat = "1s"\ntext = "from the second process"\n'
        '[[drive]]\nat = "5s"\nturn = "a question that triggers compaction"\n[expect]\ninvariants = "all"\n',
        config="threshold_tokens = 1000, in_place = true").replace("messages = 4 ", "messages = 40 "))
    done = sim_cli("run", str(scenario), "--runs", "1", "--json", "--no-shrink", "--out", str(tmp_path))
    verdict = json.loads(done.stdout)["scenarios"][0]
    assert "acknowledged_appends_survive" in verdict["violated"], verdict
    assert "from the second process" in verdict["violation"]["explanation"], verdict
