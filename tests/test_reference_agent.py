"""The agent end to end: turns, both commit paths, Ctrl+C, the host's budgets, the pool and lineage recovery.

Every program runs on the simulator across seeds; the in-place and Ctrl+C programs also run on trio with
MockClock, to show the same code runs there.
"""

from __future__ import annotations

from collections import Counter

import pytest
from support import events, make_agent, records, run_sim

from contract.events import (
    AppendFailed,
    CompactionSummaryProgress,
    CompactionSummaryStarted,
    CooldownCleared,
    CooldownRestored,
    FenceBeginOk,
    FenceBeginRefused,
    FenceFinish,
    HardCancelRequested,
    HostCommitOverrun,
    HostLeaseRetained,
    HostReturned,
    HostTimeout,
    HostUnwind,
    LeaseReleased,
    PoolJobSkipped,
    PoolSaturated,
    SessionAdopted,
    SessionReopened,
    TurnPersisted,
)
from contract.trio_runtime import TrioRuntime
from reference.agent import Agent, PersistenceFailed
from reference.config import CompactionConfig
from reference.db import Database
from reference.lease import ProcessTable
from reference.pool import CompressionPool
from reference.provider import ProviderScript
from reference.store import SessionStore

SEEDS = range(5)
CONFIG = CompactionConfig(threshold_tokens=80, idle_timeout_s=20.0, ceiling_timeout_s=60.0, lease_ttl_s=30.0)
WORDS = " lorem ipsum" * 5
LONG = WORDS * 6  # one such message crosses the threshold on its own


def build(rt, store, *scripts, config=CONFIG, session="s", name="cli", table=None, pool=None) -> Agent:
    return make_agent(rt, Database(rt, store), *scripts, config=config, session=session, process=name, table=table, pool=pool)


def assert_no_active_duplicates(store: SessionStore, session: str) -> None:
    keys = Counter((m.role, m.content, m.timestamp) for m in store.active_messages(session))
    assert all(count == 1 for count in keys.values()), keys


# ---- in place ----------------------------------------------------------------------------------------------


async def in_place_program(rt, store):
    agent = build(rt, store, ProviderScript(latency_s=3.0, tick_s=1.0))
    await agent.open()
    results = [await agent.run_turn(f"turn {k}{WORDS}") for k in range(4)]
    return [r.compaction and r.compaction.status for r in results], store.lease_row("s")


def check_in_place(store, value, history):
    statuses, lease = value
    assert "committed" in statuses and lease is None
    rows = store.active_messages("s")
    assert rows[0].is_summary and rows[-1].content == "ack: turn 3" + WORDS
    assert_no_active_duplicates(store, "s")
    assert len(records(history, FenceBeginOk)) == len(records(history, FenceFinish)) == statuses.count("committed")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_turn_over_threshold_compacts_in_place(seed):
    store = SessionStore()
    result = run_sim(seed, in_place_program, store)
    check_in_place(store, result.value, result.history)


def test_the_in_place_program_runs_on_trio():
    store = SessionStore()
    value, rt = TrioRuntime.run(in_place_program, store, mock_clock=True)
    check_in_place(store, value, rt.events)


# ---- rotation ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_a_turn_over_threshold_rotates_without_duplicating_the_user_turn(seed):
    async def program(rt, store):
        agent = build(rt, store, config=CompactionConfig(threshold_tokens=80, in_place=False))
        await agent.open()
        for k in range(4):
            await agent.run_turn(f"turn {k}{WORDS}")
        return agent.session_id

    store = SessionStore()
    result = run_sim(seed, program, store)
    tip = result.value
    assert tip != "s" and store.compression_tip("s") == tip
    assert_no_active_duplicates(store, tip)
    assert [m.content for m in store.active_messages(tip)][-2:] == [f"turn 3{WORDS}", f"ack: turn 3{WORDS}"]
    for returned in events(result.history, HostReturned):
        assert returned.session == returned.caller_session
    for persisted in events(result.history, TurnPersisted):
        assert persisted.session == persisted.caller_session


# ---- Ctrl+C during a stalled summary ---------------------------------------------------------------------


async def ctrl_c_program(rt, store):
    """Turn 3 stalls in its summary; the frontend presses Ctrl+C at t=10; turn 4 must persist normally."""
    agent = build(rt, store, ProviderScript(latency_s=1.0, tick_s=1.0, stall_after_s=1000.0), ProviderScript())
    await agent.open()
    for k in range(2):
        await agent.run_turn(f"turn {k}{WORDS}")
    store.record_cooldown("s", rt.now() - 1.0, "an old, expired failure")
    before = store.cooldown_row("s")
    seen = {}

    async def frontend():
        await rt.sleep(10)
        seen["cancelled"] = await agent.hard_interrupt()
        seen["lease"] = store.lease_row("s")
        seen["row_restored"] = store.cooldown_row("s") == before

    async with rt.open_nursery() as nursery:
        nursery.start_soon(frontend)
        stalled = await agent.run_turn(f"stalled{WORDS * 4}")
    compressor_clean = agent.compressor.state.cooldown_until == 0.0
    after = await agent.run_turn("next turn")
    return seen, stalled, after, compressor_clean


def check_ctrl_c(store, value, history):
    seen, stalled, after, compressor_clean = value
    assert seen == {"cancelled": True, "lease": None, "row_restored": True}
    assert stalled.interrupted and stalled.compaction.reason == "hard_cancelled" and len(stalled.persisted) == 1
    assert not after.interrupted and len(after.persisted) >= 1 and compressor_clean
    assert [m.content for m in store.active_messages("s")][-1] == "ack: next turn"
    assert_no_active_duplicates(store, "s")
    assert records(history, CooldownRestored) and not records(history, AppendFailed)


@pytest.mark.parametrize("seed", SEEDS)
def test_ctrl_c_during_a_stalled_summary_frees_the_lease_and_the_next_turn_persists(seed):
    store = SessionStore()
    result = run_sim(seed, ctrl_c_program, store)
    check_ctrl_c(store, result.value, result.history)
    hard_at = records(result.history, HardCancelRequested)[0].time
    released = [r.time for r in records(result.history, LeaseReleased) if r.event.holder.attempt.endswith(".1")]
    assert released == [hard_at]  # freed at once, in virtual time


def test_the_ctrl_c_program_runs_on_trio():
    store = SessionStore()
    value, rt = TrioRuntime.run(ctrl_c_program, store, mock_clock=True)
    check_ctrl_c(store, value, rt.events)


@pytest.mark.parametrize("seed", SEEDS)
def test_ctrl_c_rolls_back_a_forced_clear_exactly(seed):
    async def program(rt, store):
        agent = build(rt, store, ProviderScript(stall_after_s=1000.0))
        await agent.open()
        for k in range(3):
            await agent.run_turn(f"turn {k}")
        store.record_cooldown("s", rt.now() + 500.0, "a live cooldown")
        before = store.cooldown_row("s")

        async def frontend():
            await rt.sleep(5)
            await agent.hard_interrupt()

        async with rt.open_nursery() as nursery:
            nursery.start_soon(frontend)
            outcome = await agent.compress(force=True)
        return outcome.reason, store.cooldown_row("s") == before, store.lease_row("s")

    result = run_sim(seed, program, SessionStore())
    assert result.value == ("hard_cancelled", True, None)
    cleared, restored, released = (records(result.history, cls)[0].seq for cls in (CooldownCleared, CooldownRestored, LeaseReleased))
    assert cleared < restored < released


# ---- appends during the summary ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_an_append_landing_mid_summary_survives_the_commit(seed):
    async def program(rt, store):
        agent = build(rt, store, ProviderScript(latency_s=8.0, tick_s=1.0))
        await agent.open()
        await agent.run_turn(f"first{WORDS}")

        async def gateway():
            await rt.sleep(3)
            await Database(rt, store).call(
                "append_messages", "s", [{"role": "user", "content": "sent from the phone", "timestamp": rt.now()}]
            )

        async with rt.open_nursery() as nursery:
            nursery.start_soon(gateway)
            turn = await agent.run_turn(f"second{LONG}")
        return turn.compaction.status

    store = SessionStore()
    result = run_sim(seed, program, store)
    assert result.value == "committed"
    contents = [m.content for m in store.active_messages("s")]
    summary_at = next(i for i, m in enumerate(store.active_messages("s")) if m.is_summary)
    assert contents.count("sent from the phone") == 1 and contents.index("sent from the phone") > summary_at
    assert not records(result.history, AppendFailed)


# ---- the host's budgets ---------------------------------------------------------------------------------


async def one_attempt(rt, store, *scripts, config=CONFIG, turns=3):
    agent = build(rt, store, *scripts, config=config)
    await agent.open()
    for k in range(turns):
        agent.messages += [{"role": "user", "content": f"q{k}{WORDS}", "timestamp": 0.0},
                           {"role": "assistant", "content": f"a{k}{WORDS}", "timestamp": 0.0}]
    await agent.flush()
    return agent, await agent.compress()


@pytest.mark.parametrize("seed", SEEDS)
def test_idle_timeout_fires_between_idle_and_one_and_a_half_idle_after_the_last_progress(seed):
    async def program(rt, store):
        _, outcome = await one_attempt(rt, store, ProviderScript(latency_s=1.0, tick_s=1.0, stall_after_s=500.0))
        return outcome.status

    result = run_sim(seed, program, SessionStore())
    assert result.value == "timeout"
    last_progress = max(r.time for r in records(result.history, CompactionSummaryProgress))
    fired = records(result.history, HostTimeout)[0]
    assert fired.event.budget == "idle"
    assert CONFIG.idle_timeout_s <= fired.time - last_progress < 1.5 * CONFIG.idle_timeout_s


@pytest.mark.parametrize("seed", SEEDS)
def test_a_timeout_fences_the_worker_off_and_records_the_ladder(seed):
    async def program(rt, store):
        agent, first = await one_attempt(rt, store, ProviderScript(stall_after_s=100.0))
        untils = [store.cooldown_row("s").until - rt.now()]
        for _ in range(2):
            await rt.sleep(1000)
            await agent.compress()
            untils.append(store.cooldown_row("s").until - rt.now())
        return first.status, untils

    result = run_sim(seed, program, SessionStore())
    assert result.value == ("timeout", [60.0, 300.0, 900.0])
    assert not records(result.history, FenceBeginOk)
    assert {refused.reason for refused in events(result.history, FenceBeginRefused)} == {"cancelled"}


@pytest.mark.parametrize("seed", SEEDS)
def test_at_the_ceiling_a_live_worker_keeps_its_lease(seed):
    config = CompactionConfig(threshold_tokens=80, idle_timeout_s=20.0, ceiling_timeout_s=30.0, lease_ttl_s=30.0)

    async def program(rt, store):
        _, outcome = await one_attempt(rt, store, ProviderScript(latency_s=100.0, tick_s=1.0), config=config)
        return outcome.reason, store.lease_holder("s", now=rt.now())

    result = run_sim(seed, program, SessionStore())
    reason, holder = result.value
    assert reason == "ceiling" and holder is not None
    assert records(result.history, HostLeaseRetained)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_hung_commit_is_waited_for_loudly_and_never_abandoned(seed):
    async def hang(rt):
        await rt.sleep(100)

    async def program(rt, store):
        _, outcome = await one_attempt(rt, store, ProviderScript())
        return outcome.status, rt.now()

    store = SessionStore()
    result = run_sim(seed, program, store, points={"db.archive_and_compact": hang})
    status, returned_at = result.value
    assert status == "committed" and returned_at >= 100.0
    overruns = records(result.history, HostCommitOverrun)
    assert len(overruns) == 1 and overruns[0].time < returned_at
    assert store.active_messages("s")[0].is_summary


@pytest.mark.parametrize("seed", SEEDS)
def test_an_unwinding_host_revokes_admission_and_frees_the_lease(seed):
    async def program(rt, store):
        agent = build(rt, store, ProviderScript(latency_s=50.0, tick_s=1.0))
        await agent.open()
        await agent.run_turn(f"first{WORDS}")
        with rt.move_on_after(5):  # KeyboardInterrupt unwinding the host
            await agent.run_turn(f"second{LONG}")
        lease = store.lease_row("s")
        await rt.sleep(100)
        return lease, len(agent.fences)

    result = run_sim(seed, program, SessionStore())
    assert result.value == (None, 0)
    unwind = records(result.history, HostUnwind)[0].seq
    assert not [r for r in records(result.history, FenceBeginOk) if r.seq > unwind]
    assert events(result.history, FenceBeginRefused)[0].reason == "revoked"


# ---- the bounded pool -------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_a_full_pool_fails_fast_and_the_conversation_continues(seed):
    async def program(rt, store):
        table, pool = ProcessTable(), CompressionPool(rt, cap=1)
        agents = [build(rt, store, ProviderScript(latency_s=5.0), session=f"s{k}", name=f"p{k}", table=table, pool=pool)
                  for k in range(2)]
        statuses = {}

        async def talk(agent):
            await agent.open()
            await agent.run_turn(f"hello{WORDS}")
            await rt.sleep(float(agent.session_id[-1]))
            statuses[agent.session_id] = (await agent.run_turn(f"again{LONG}")).compaction.status

        async with rt.open_nursery() as nursery:
            for agent in agents:
                nursery.start_soon(talk, agent)
        return statuses, pool.admitted

    store = SessionStore()
    result = run_sim(seed, program, store)
    assert result.value == ({"s0": "committed", "s1": "saturated"}, 0)
    assert events(result.history, PoolSaturated) == [PoolSaturated(admitted=1, cap=1)]
    assert [m.role for m in store.active_messages("s1")] == ["user", "assistant"] * 2


@pytest.mark.parametrize("seed", SEEDS)
def test_a_queued_job_whose_host_gave_up_never_runs(seed):
    async def program(rt, store):
        table, pool = ProcessTable(), CompressionPool(rt, cap=2, workers=1)
        stuck = ProviderScript(latency_s=200.0, tick_s=1.0)
        slow = build(rt, store, stuck, session="a", name="a", table=table, pool=pool)
        queued = build(rt, store, ProviderScript(), session="b", name="b", table=table, pool=pool)
        for agent in (slow, queued):
            await agent.open()
            agent.messages += [{"role": "user", "content": f"q{k}", "timestamp": 0.0} for k in range(4)]
        async with rt.open_nursery() as nursery:
            nursery.start_soon(slow.compress)
            await rt.sleep(1)
            outcome = await queued.compress()
        return outcome.status

    result = run_sim(seed, program, SessionStore())
    assert result.value == "timeout"
    assert events(result.history, PoolJobSkipped) == [PoolJobSkipped(attempt="b.1")]
    assert not [started for started in events(result.history, CompactionSummaryStarted) if started.attempt == "b.1"]


# ---- lineage recovery -------------------------------------------------------------------------------------


def rotated_chain(store: SessionStore) -> None:
    """root -> mid -> tip, both hops closed by compression; the tip is live."""
    store.create_session("root", now=0.0)
    store.append_message("root", {"role": "user", "content": "old", "timestamp": 0.0}, now=0.0)
    for parent, child in (("root", "mid"), ("mid", "tip")):
        store.try_acquire_lease(parent, "h", now=1.0, ttl_s=30.0)
        store.publish_child(parent, child, [{"role": "user", "content": f"summary for {child}", "timestamp": 1.0}],
                            holder="h", watermark=None, ceiling=None, now=1.0, ttl_s=30.0)
        store.release_lease(parent, "h")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_write_to_a_closed_root_adopts_the_live_tip_across_two_hops(seed):
    async def program(rt, store):
        rotated_chain(store)
        agent = build(rt, store, session="root")
        agent.messages.append({"role": "user", "content": "stale writer", "timestamp": 2.0})
        return await agent.flush(), agent.session_id, agent.caller_session_id

    store = SessionStore()
    result = run_sim(seed, program, store)
    assert result.value[1:] == ("tip", "tip")
    assert [m.content for m in store.active_messages("tip")] == ["summary for tip", "stale writer"]
    assert events(result.history, SessionAdopted) == [SessionAdopted(from_session="root", to_session="tip")]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_closed_write_without_a_live_tip_fails_closed_naming_compression(seed):
    async def program(rt, store):
        rotated_chain(store)
        store.end_session("tip", now=2.0, reason="session_reset")
        agent = build(rt, store, session="root")
        agent.messages.append({"role": "user", "content": "stale writer", "timestamp": 2.0})
        try:
            await agent.flush()
        except PersistenceFailed as failed:
            return failed.cause, str(failed)

    result = run_sim(seed, program, SessionStore())
    cause, text = result.value
    assert cause == "compression_closed" and "compression" in text and "disk" not in text


@pytest.mark.parametrize("seed", SEEDS)
def test_turn_start_adopts_the_tip_or_reopens_an_orphaned_parent(seed):
    async def program(rt, store):
        rotated_chain(store)
        stale = build(rt, store, session="mid", name="stale")
        await stale.run_turn("to the mid")
        store.create_session("orphan", now=0.0)
        store.end_session("orphan", now=1.0, reason="compression")  # the legacy non-atomic rotation
        healed = build(rt, store, session="orphan", name="healed")
        await healed.run_turn("to the orphan")
        return stale.session_id, healed.session_id

    store = SessionStore()
    result = run_sim(seed, program, store)
    assert result.value == ("tip", "orphan")
    assert store.get_session("orphan").live and events(result.history, SessionReopened) == [SessionReopened(session="orphan")]
    assert [m.content for m in store.active_messages("tip")][-2:] == ["to the mid", "ack: to the mid"]


def test_hard_interrupt_without_a_running_attempt_only_stops_the_turn():
    async def program(rt, store):
        agent = build(rt, store, config=CompactionConfig())
        await agent.open()
        return await agent.hard_interrupt()

    assert run_sim(0, program, SessionStore()).value is False
