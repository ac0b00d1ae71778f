"""One compression attempt: commits, refusals, rollbacks and the generation rules (R2, R4, R11-R14, R19, R21)."""

from __future__ import annotations

import pytest
from support import events, make_agent, records, run_sim

from contract.events import (
    AttemptRestored,
    AttemptRestoreSkippedStale,
    CompactionRefused,
    CompactionSummaryProgress,
    CompactionSummaryStarted,
    CompactionWatermark,
    CooldownCleared,
)
from contract.ids import AttemptId
from reference import compactor
from reference.agent import Agent
from reference.attempt import Compressor
from reference.config import CompactionConfig
from reference.db import Database
from reference.lease import ProcessTable
from reference.provider import ProviderScript
from reference.store import LeaseLostError, SessionStore
from reference.transcript import PERSISTED, ROW_ID, without_markers
from sim import World

SEEDS = range(4)
CONFIG = CompactionConfig(threshold_tokens=10**6, idle_timeout_s=30.0, ceiling_timeout_s=120.0)


def scenario(seed, body, *, config=CONFIG, scripts=(ProviderScript(),), faults=None, agents=1):
    """Run `body(rt, agents..., store)` with agents on session "s"; `faults[point]` runs at that point."""
    store = SessionStore()

    async def main(rt):
        table, db = ProcessTable(), Database(rt, store)
        built: list[Agent] = []
        for index in range(agents):
            built.append(make_agent(rt, db, *scripts, config=config, process=f"p{index}", table=table))
            await built[-1].open()
        return await body(rt, *built, store)

    return run_sim(seed, main, points=faults), store


async def talk(agent: Agent, turns: int, *, flush: bool = True, first: int = 0) -> None:
    """Add `turns` user/assistant pairs, numbered from `first`, to the live list (persisted unless `flush` is False)."""
    for k in range(first, first + turns):
        agent.messages.append({"role": "user", "content": f"question {k} " + "q" * 40, "timestamp": float(k)})
        agent.messages.append({"role": "assistant", "content": f"answer {k} " + "a" * 40, "timestamp": float(k)})
    if flush:
        await agent.flush()


async def lease_lost(rt) -> None:
    raise LeaseLostError("compression lease on 's' lost before commit")


ARCHIVE_LOSES_LEASE = {"db.archive_and_compact": lease_lost}  # an in-place commit that fails, nothing written


def active(store, sid="s") -> list[str]:
    return [m.content for m in store.active_messages(sid)]


@pytest.mark.parametrize("seed", SEEDS)
def test_in_place_commit_replaces_the_active_set_and_stamps_every_dict(seed):
    async def body(rt, agent, store):
        await talk(agent, 3)
        outcome = await agent.compress()
        return outcome.status, await agent.flush()

    result, store = scenario(seed, body)
    assert result.value == ("committed", [])
    rows = store.active_messages("s")
    assert rows[0].is_summary and [r.content for r in rows[1:]] == [f"question 2 {'q' * 40}", f"answer 2 {'a' * 40}"]
    assert events(result.history, CompactionWatermark)[0].watermark == 6


@pytest.mark.parametrize("seed", SEEDS)
def test_the_live_transcript_matches_the_durable_rows_after_a_commit(seed):
    async def body(rt, agent, store):
        await talk(agent, 3)
        await agent.compress()
        return [(m[ROW_ID], m["content"]) for m in agent.messages if m.get(PERSISTED)]

    result, store = scenario(seed, body)
    assert result.value == [(r.id, r.content) for r in store.active_messages("s")]


@pytest.mark.parametrize("sabotage", [False, True])
def test_the_worker_never_touches_the_callers_list(sabotage, monkeypatch):
    if sabotage:  # hand the caller's list to the worker instead of a copy (the pre-fix snapshot)
        monkeypatch.setattr(compactor, "copied", lambda value: value)
    script = ProviderScript(mutates_input=True, output_ratio=3.0)

    async def body(rt, agent, store):
        await talk(agent, 3)
        live = agent.messages
        before = [dict(m) for m in live]
        outcome = await agent.compress()
        return outcome.reason, agent.messages is live, live == before

    result, _ = scenario(0, body, scripts=(script,))
    assert result.value == ("would_grow", True, not sabotage)


@pytest.mark.parametrize("seed", SEEDS)
def test_an_append_during_the_summary_stays_live_after_the_compacted_rows(seed):
    async def body(rt, agent, store):
        await talk(agent, 3)

        async def gateway():
            await rt.sleep(1)
            message = {"role": "user", "content": "platform message", "timestamp": rt.now()}
            store.append_message("s", message, now=rt.now())

        async with rt.open_nursery() as nursery:
            nursery.start_soon(gateway)
            return (await agent.compress()).status

    result, store = scenario(seed, body, scripts=(ProviderScript(latency_s=5.0),))
    assert result.value == "committed"
    assert active(store)[-1] == "platform message" and active(store).count("platform message") == 1
    original = next(m for m in store.all_messages("s") if m.content == "platform message")
    assert not original.active and not original.compacted


def test_without_the_watermark_the_concurrent_append_is_swept_into_the_archive(monkeypatch):
    async def no_watermark(self):
        self.watermark = None
        return True  # "captured", as the historical code carried on with no watermark

    monkeypatch.setattr(compactor.Attempt, "_capture_watermark", no_watermark)

    async def body(rt, agent, store):
        await talk(agent, 3)

        async def gateway():
            await rt.sleep(1)
            store.append_message("s", {"role": "user", "content": "platform message", "timestamp": 1.0}, now=rt.now())

        async with rt.open_nursery() as nursery:
            nursery.start_soon(gateway)
            await agent.compress()

    _, store = scenario(0, body, scripts=(ProviderScript(latency_s=5.0),))
    assert "platform message" not in active(store)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_growing_summary_is_refused_and_counted_until_the_breaker_latches(seed):
    async def body(rt, agent, store):
        await talk(agent, 3)
        reasons = [(await agent.compress()).reason for _ in range(3)]
        forced = await agent.compress(force=True)
        return reasons, forced.reason

    result, store = scenario(seed, body, scripts=(ProviderScript(output_ratio=3.0),))
    assert result.value == (["would_grow", "would_grow", "ineffective"], "would_grow")
    assert store.cooldown_row("s").ineffective_count == 3
    assert active(store)[0].startswith("question 0")


@pytest.mark.parametrize("seed", SEEDS)
def test_nothing_to_summarize_is_a_structural_no_op_that_backs_off(seed):
    async def body(rt, agent, store):
        await talk(agent, 1)
        return [(await agent.compress()).reason for _ in range(2)]

    result, _ = scenario(seed, body)
    assert result.value == ["no_progress", "structural_backoff"]
    assert not records(result.history, CompactionSummaryStarted)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_provider_error_records_a_cooldown_that_only_force_bypasses(seed):
    scripts = (ProviderScript(error="401 unauthorized"), ProviderScript())

    async def body(rt, agent, store):
        await talk(agent, 3)
        first = await agent.compress()
        row = store.cooldown_row("s")
        blocked = await agent.compress()
        forced = await agent.compress(force=True)
        return first.reason, row.until - rt.now() + 2.0, row.error, blocked.reason, forced.status

    result, store = scenario(seed, body, scripts=scripts)
    assert result.value == ("summary_failed", 60.0, "summary_failed: 401 unauthorized", "cooldown", "committed")
    assert store.cooldown_row("s").until is None


@pytest.mark.parametrize("seed", SEEDS)
def test_a_failed_in_place_commit_hands_back_the_durable_transcript(seed):
    async def body(rt, agent, store):
        await talk(agent, 3)
        await talk(agent, 1, flush=False, first=3)  # a new message: one with an earlier one's payload is the same message
        outcome = await agent.compress()
        await agent.flush()
        return outcome.status, [without_markers(m)["content"] for m in agent.messages]

    result, store = scenario(seed, body, faults=ARCHIVE_LOSES_LEASE)
    status, contents = result.value
    assert status == "failed" and contents == active(store) and len(active(store)) == 8
    assert store.cooldown_row("s").error.startswith("session_split_failed")
    assert store.lease_row("s") is None


@pytest.mark.parametrize("seed", SEEDS)
def test_a_failed_commit_hands_back_the_callers_own_dicts_of_its_unsaved_messages(seed):
    """Another attempt of the agent (a /compress beside the turn) pairs its copies with these very dicts."""
    async def body(rt, agent, store):
        await talk(agent, 3)
        await talk(agent, 1, flush=False, first=3)
        unsaved = [m for m in agent.messages if not m.get(PERSISTED)]
        outcome = await agent.compress()
        handed = [m for m in agent.messages if not m.get(PERSISTED)]
        return outcome.status, len(unsaved), [a is b for a, b in zip(unsaved, handed, strict=True)]

    result, _ = scenario(seed, body, faults=ARCHIVE_LOSES_LEASE)
    assert result.value == ("failed", 2, [True, True])


@pytest.mark.parametrize("seed", SEEDS)
def test_rotation_moves_the_turn_to_a_child_without_duplicating_it(seed):
    async def body(rt, agent, store):
        await talk(agent, 3)
        agent.messages.append({"role": "user", "content": "the current turn", "timestamp": 9.0})

        async def gateway():
            await rt.sleep(1)
            store.append_message("s", {"role": "user", "content": "foreign", "timestamp": 1.0}, now=rt.now())

        async with rt.open_nursery() as nursery:
            nursery.start_soon(gateway)
            outcome = await agent.compress()
        await agent.flush()
        return outcome.session_id, agent.session_id, agent.caller_session_id

    result, store = scenario(seed, body, config=CompactionConfig(in_place=False, threshold_tokens=10**6),
                             scripts=(ProviderScript(latency_s=5.0),))
    child, bound, caller = result.value
    assert child == bound == caller and child.startswith("s/") and store.continuation_children("s") == [child]
    assert active(store, child).count("the current turn") == 1 and active(store, child)[-1] == "foreign"
    assert store.get_session("s").rotated and active(store, "s") == []
    assert [m.content for m in store.all_messages("s")].count("the current turn") == 1


@pytest.mark.parametrize("reason, status", [("session_reset", "failed"), ("tui_shutdown", "rotated")])
def test_rotation_respects_a_deliberate_end_and_heals_an_automatic_one(reason, status):
    async def body(rt, agent, store):
        await talk(agent, 3)
        agent.messages.append({"role": "user", "content": "the current turn", "timestamp": 9.0})
        store.end_session("s", now=rt.now(), reason=reason)
        return (await agent.compress()).status

    result, store = scenario(0, body, config=CompactionConfig(in_place=False, threshold_tokens=10**6))
    assert result.value == status
    flushed_to_parent = "the current turn" in [m.content for m in store.all_messages("s")]
    assert flushed_to_parent == (status == "rotated")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_late_contender_adopts_the_rotated_parent_and_sits_out(seed):
    async def body(rt, rotator, late, store):
        await talk(rotator, 3)
        late.messages = [dict(m) for m in rotator.messages]
        await rotator.compress()
        late.messages.append({"role": "user", "content": "late turn", "timestamp": 9.0})
        outcome = await late.compress()
        await late.flush()
        return outcome.status, late.session_id

    result, store = scenario(seed, body, config=CompactionConfig(in_place=False, threshold_tokens=10**6), agents=2)
    [child] = store.continuation_children("s")
    assert result.value == ("adopted", child)
    assert active(store, child)[-1] == "late turn"


@pytest.mark.parametrize("sabotage", [False, True])
def test_a_late_worker_cannot_clear_the_hosts_timeout_cooldown(sabotage, monkeypatch):
    if sabotage:  # the consult the clear makes, answering "not cancelled" as the pre-fix code did
        monkeypatch.setattr(Compressor, "attempt_is_cancelled", lambda self, generation: False)
    config = CompactionConfig(
        threshold_tokens=10**6, idle_timeout_s=20.0, ceiling_timeout_s=600.0, cooldown_ladder_s=(900.0,)
    )

    async def body(rt, agent, store):
        await talk(agent, 3)
        outcome = await agent.compress()
        await rt.sleep(300)  # the late worker finishes its summary meanwhile
        return outcome.status, store.get_cooldown("s", now=rt.now()) is not None

    result, _ = scenario(0, body, config=config, scripts=(ProviderScript(latency_s=1.0, stall_after_s=200.0),))
    assert result.value == ("timeout", not sabotage)
    assert bool(records(result.history, CooldownCleared)) == sabotage


def test_a_stale_restore_is_a_no_op_and_only_the_owner_clears_its_cancelled_check():
    async def main(rt):
        compressor = Compressor(rt)
        old = await compressor.claim(AttemptId("a.1"))
        snapshot = compressor.snapshot()
        new = await compressor.claim(AttemptId("a.2"))
        compressor.state.previous_summary = "written by a2"
        restored = await compressor.restore(AttemptId("a.1"), old, snapshot)
        compressor.install_cancelled_check(new, lambda: False)
        compressor.clear_cancelled_check_if_owner(old)  # the older attempt's late `finally`
        checks = compressor.attempt_is_cancelled(new), compressor.attempt_is_cancelled(old)
        compressor.clear_cancelled_check_if_owner(new)
        return restored, compressor.state.previous_summary, checks, compressor.attempt_is_cancelled(old)

    result = World(0).run(main)
    assert result.value == (False, "written by a2", (False, True), True)
    assert [type(r.event) for r in records(result.history, AttemptRestored, AttemptRestoreSkippedStale)] == [AttemptRestoreSkippedStale]


def test_retired_claims_never_demote_the_owner_and_never_promote_a_stale_primary():
    """#198 F1 ownership algebra: the newest claim not retired owns the rollback; the counter never goes back."""
    async def main(rt):
        compressor = Compressor(rt)
        owner = await compressor.claim("owner")
        first, second = await compressor.claim("loser1"), await compressor.claim("loser2")
        await compressor.retire("loser2", second)
        await compressor.retire("loser1", first)  # out of claim order: both collapse onto the owner
        collapsed = compressor.current_claim(), compressor.generation
        successor = await compressor.claim("successor")
        loser = await compressor.claim("loser3")
        await compressor.retire("loser3", loser)  # retiring a loser above the successor leaves it in charge
        stale = await compressor.restore("owner", owner, compressor.snapshot())
        return collapsed, compressor.current_claim() == successor, stale, compressor.generation == loser

    assert World(0).run(main).value == ((1, 3), True, False, True)


TIMEOUT_CONFIG = CompactionConfig(threshold_tokens=10**6, idle_timeout_s=20.0, ceiling_timeout_s=600.0)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_timed_out_attempts_late_progress_is_dropped(seed):
    async def body(rt, agent, store):
        await talk(agent, 3)
        outcome = await agent.compress()
        await rt.sleep(100)
        return outcome.status

    script = ProviderScript(stall_before_s=30.0, latency_s=10.0, tick_s=1.0)
    result, _ = scenario(seed, body, config=TIMEOUT_CONFIG, scripts=(script,))
    assert result.value == "timeout"
    assert not records(result.history, CompactionSummaryProgress)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_cancelled_attempt_overtaken_by_a_newer_summary_is_discarded_as_superseded(seed):
    scripts = (ProviderScript(latency_s=1.0, stall_after_s=40.0), ProviderScript(latency_s=30.0, tick_s=1.0))

    async def body(rt, agent, store):
        await talk(agent, 3)
        first = await agent.compress()  # times out at t=21; its summary returns at t=41
        second = await agent.compress(force=True)  # summarizes from t=21 to t=51
        return first.status, second.status

    result, _ = scenario(seed, body, config=TIMEOUT_CONFIG, scripts=scripts)
    assert result.value == ("timeout", "committed")
    refusals = {refused.attempt: refused.reason for refused in events(result.history, CompactionRefused)}
    assert refusals == {"p0.1": "superseded"}
