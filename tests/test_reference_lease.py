"""The compression lease as an attempt holds it: holder ids, the dead-holder probe, release, the refresher."""

from __future__ import annotations

import pytest
from support import events, records, run_sim

from contract.events import LeaseExpiredGiveup, LeaseRefreshed, LeaseRefreshFailed, LeaseReleased
from reference.config import CompactionConfig
from reference.db import Database
from reference.lease import Lease, ProcessTable
from reference.store import SessionStore

SEEDS = range(5)


def times(result, cls) -> list[float]:
    return [record.time for record in records(result.history, cls)]


def run(seed: int, body, *, failing: set[float] | None = None):
    """Run `body(rt, store, db)` on a fresh store; refreshes at the virtual times in `failing` raise."""
    store = SessionStore()
    store.create_session("s", now=0.0)

    async def refresh(rt) -> None:
        if rt.now() in (failing or ()):
            raise RuntimeError("database is locked")

    async def main(rt):
        return await body(rt, store, Database(rt, store))

    return run_sim(seed, main, points={"db.refresh_lease": refresh}), store


def test_holder_names_process_and_attempt_and_is_unique_per_attempt():
    table = ProcessTable()
    gateway, cli = table.spawn("gateway"), table.spawn("cli")
    first, second = gateway.next_attempt(), gateway.next_attempt()
    assert gateway.holder(first) == f"proc=gateway:pid={gateway.pid}:start=1:attempt=1"
    assert len({gateway.holder(first), gateway.holder(second), cli.holder(cli.next_attempt())}) == 3


def test_dead_probe_answers_dead_only_for_a_known_dead_pid():
    table = ProcessTable()
    alive, dead = table.spawn("a"), table.spawn("b")
    table.kill(dead)
    assert table.holder_is_dead(dead.holder(1))
    assert not table.holder_is_dead(alive.holder(1))
    assert not table.holder_is_dead("proc=x:pid=999:attempt=1")
    assert not table.holder_is_dead("garbage")


def test_a_recycled_pid_tells_the_dead_holder_from_the_process_now_on_it():
    table = ProcessTable()
    dead = table.spawn("gateway")
    table.kill(dead)
    reborn = table.spawn("gatewayr1", dead.pid)
    assert reborn.pid == dead.pid and reborn.start_ticks != dead.start_ticks
    assert table.holder_is_dead(dead.holder(1))
    assert not table.holder_is_dead(reborn.holder(1))
    table.kill(dead)  # a second kill of the dead process must not touch the one on its recycled pid
    assert not table.holder_is_dead(reborn.holder(1))
    assert not table.holder_is_dead(f"proc=old:pid={dead.pid}:attempt=1")  # no start recorded: any doubt is alive
    with pytest.raises(ValueError, match="not a dead process's pid"):
        table.spawn("intruder", reborn.pid)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_dead_holders_lease_is_reclaimed_at_once_and_a_live_one_never(seed):
    table = ProcessTable()
    crashed, survivor, newcomer = table.spawn("crashed"), table.spawn("survivor"), table.spawn("new")
    config = CompactionConfig()

    async def body(rt, store, db):
        store.create_session("t", now=0.0)
        assert await Lease(rt, db, "s", crashed.holder(1), config).acquire(table)
        assert await Lease(rt, db, "t", survivor.holder(1), config).acquire(table)
        table.kill(crashed)
        return (
            await Lease(rt, db, "s", newcomer.holder(1), config).acquire(table),
            await Lease(rt, db, "t", newcomer.holder(2), config).acquire(table),
        )

    result, store = run(seed, body)
    assert result.value == (True, False)
    assert store.lease_row("s").holder == newcomer.holder(1)


@pytest.mark.parametrize("seed", SEEDS)
def test_release_is_holder_only_and_idempotent(seed):
    config = CompactionConfig()

    async def body(rt, store, db):
        old = Lease(rt, db, "s", "proc=a:pid=1:attempt=1", config)
        assert await old.acquire()
        store.release_lease("s", old.holder)  # e.g. the host freed it through the fence hook
        new = Lease(rt, db, "s", "proc=a:pid=1:attempt=2", config)
        assert await new.acquire()
        await old.release()
        await old.release()
        return store.lease_holder("s", now=rt.now())

    result, _ = run(seed, body)
    assert result.value == "proc=a:pid=1:attempt=2"
    assert [released.held for released in events(result.history, LeaseReleased)] == [False]


@pytest.mark.parametrize("ttl, interval, budget", [(300.0, 60.0, 5), (10.0, 5.0, 2), (1.0, 1.0, 1), (400.0, 60.0, 6)])
def test_refresh_interval_and_failure_budget_follow_the_ttl(ttl, interval, budget):
    config = CompactionConfig(lease_ttl_s=ttl)
    assert (config.refresh_interval_s, config.refresh_failure_budget) == (interval, budget)


@pytest.mark.parametrize("seed", SEEDS)
def test_refresher_refreshes_at_once_then_every_interval_until_released(seed):
    config = CompactionConfig(lease_ttl_s=300.0)

    async def body(rt, store, db):
        lease = Lease(rt, db, "s", "h", config)
        assert await lease.acquire()
        async with rt.open_nursery() as nursery:
            nursery.start_soon(lease.run_refresher)
            await rt.sleep(150)
            await lease.release()
        return store.lease_row("s")

    result, _ = run(seed, body)
    assert result.value is None
    assert times(result, LeaseRefreshed) == [0.0, 60.0, 120.0]


@pytest.mark.parametrize("seed", SEEDS)
def test_refresher_rides_out_fewer_failures_than_its_budget(seed):
    config = CompactionConfig(lease_ttl_s=300.0)

    async def body(rt, store, db):
        lease = Lease(rt, db, "s", "h", config)
        assert await lease.acquire()
        async with rt.open_nursery() as nursery:
            nursery.start_soon(lease.run_refresher)
            await rt.sleep(400)
            await lease.release()

    result, _ = run(seed, body, failing={60.0, 120.0, 180.0, 240.0})
    assert [failed.failures for failed in events(result.history, LeaseRefreshFailed)] == [1, 2, 3, 4]
    assert not times(result, LeaseExpiredGiveup)
    assert times(result, LeaseRefreshed) == [0.0, 300.0, 360.0]


@pytest.mark.parametrize("seed", SEEDS)
def test_refresher_gives_up_after_its_budget_and_the_lease_expires_within_one_ttl(seed):
    config = CompactionConfig(lease_ttl_s=300.0)

    async def body(rt, store, db):
        lease = Lease(rt, db, "s", "h", config)
        assert await lease.acquire()
        async with rt.open_nursery() as nursery:
            nursery.start_soon(lease.run_refresher)
        return rt.now(), store.lease_row("s").expires_at

    result, _ = run(seed, body, failing={60.0 * k for k in range(1, 10)})
    gave_up_at, expires_at = result.value
    assert gave_up_at == 300.0 and times(result, LeaseExpiredGiveup) == [300.0]
    last_success = max(times(result, LeaseRefreshed))
    assert expires_at <= last_success + config.lease_ttl_s


@pytest.mark.parametrize("seed", SEEDS)
def test_no_refresher_starts_on_a_released_lease(seed):
    config = CompactionConfig()

    async def body(rt, store, db):
        lease = Lease(rt, db, "s", "h", config)
        assert await lease.acquire()
        async with rt.open_nursery() as nursery:
            nursery.start_soon(lease.run_refresher)
            await lease.release()  # may run before the refresher's first step

    result, store = run(seed, body)
    released_at = records(result.history, LeaseReleased)[0].seq
    assert all(refreshed.seq < released_at for refreshed in records(result.history, LeaseRefreshed))
    assert store.lease_row("s") is None
