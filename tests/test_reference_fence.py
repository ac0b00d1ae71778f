"""The commit fence: who may commit, when a cancel wins, and when the lease is released (R1, R3, R5-R7, R22)."""

from __future__ import annotations

import pytest
from support import events, records, run_sim

from contract.events import FenceBeginOk, FenceBeginRefused, FenceCancelWon, FenceFinish
from reference.fence import CommitFence, FenceStack

SEEDS = range(6)


def run(seed: int, body):
    """Run `body(rt, fence, releases)`; `releases` lists the virtual times the release hook ran."""

    async def main(rt):
        fence = CommitFence(rt, "a1", ceiling_s=100.0, hard_event=rt.event())
        releases: list[float] = []

        async def hook() -> None:
            await rt.checkpoint("hook")
            releases.append(rt.now())

        assert await fence.begin_lock_setup()
        fence.publish_release_hook(hook)
        await fence.finish_lock_setup()
        return await body(rt, fence, releases), releases

    return run_sim(seed, main)


def order(result, *classes) -> list[type]:
    return [type(record.event) for record in records(result.history, *classes)]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_cancel_before_the_commit_wins_and_refuses_admission(seed):
    async def body(rt, fence, releases):
        won = await fence.cancel_before_commit()
        return won, await fence.begin_commit(), fence.is_cancelled

    result = run(seed, body)
    (won, admitted, cancelled), releases = result.value
    assert (won, admitted, cancelled) == (True, False, True)
    assert releases == [0.0]
    assert order(result, FenceCancelWon, FenceBeginRefused) == [FenceCancelWon, FenceBeginRefused]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_cancel_waits_out_an_admitted_commit_and_loses(seed):
    async def body(rt, fence, releases):
        assert await fence.begin_commit()
        outcome = {}

        async def canceller():
            outcome["won"] = await fence.cancel_before_commit(hard=True)
            outcome["at"] = rt.now()

        async with rt.open_nursery() as nursery:
            nursery.start_soon(canceller)
            await rt.sleep(5)  # the commit's transactions
            assert fence.commit_in_flight and await fence.try_cancel_before_commit() is None
            await fence.finish_commit()
        return outcome, fence.hard_requested

    result = run(seed, body)
    (outcome, hard), releases = result.value
    assert outcome == {"won": False, "at": 5.0} and not hard and releases == []
    assert order(result, FenceBeginOk, FenceFinish, FenceCancelWon) == [FenceBeginOk, FenceFinish]


@pytest.mark.parametrize("seed", SEEDS)
def test_revoke_without_a_commit_releases_at_once(seed):
    async def body(rt, fence, releases):
        await fence.revoke_commit_admission()
        return await fence.begin_commit()

    result = run(seed, body)
    admitted, releases = result.value
    assert not admitted and releases == [0.0]


@pytest.mark.parametrize("seed", SEEDS)
def test_revoke_during_a_commit_defers_the_release_to_finish(seed):
    async def body(rt, fence, releases):
        assert await fence.begin_commit()
        await fence.revoke_commit_admission()
        released_mid_commit = list(releases)
        await rt.sleep(3)
        await fence.finish_commit()
        return released_mid_commit

    result = run(seed, body)
    released_mid_commit, releases = result.value
    assert released_mid_commit == [] and releases == [3.0]


@pytest.mark.parametrize("seed", SEEDS)
def test_admission_is_refused_past_the_deadline_and_under_a_hard_stop(seed):
    async def body(rt, fence, releases):
        late = CommitFence(rt, "late", ceiling_s=10.0, hard_event=rt.event())
        stopped_event = rt.event()
        stopped = CommitFence(rt, "stopped", ceiling_s=10.0, hard_event=stopped_event)
        stopped_event.set()
        await rt.sleep(10)
        return await late.begin_commit(), await stopped.begin_commit()

    result = run(seed, body)
    assert result.value[0] == (False, False)
    reasons = {refused.attempt: refused.reason for refused in events(result.history, FenceBeginRefused)}
    assert reasons == {"late": "deadline", "stopped": "hard_cancel"}


@pytest.mark.parametrize("seed", SEEDS)
def test_a_cancelled_fence_refuses_lease_setup(seed):
    async def body(rt, fence, releases):
        fresh = CommitFence(rt, "fresh", ceiling_s=10.0, hard_event=rt.event())
        await fresh.cancel_before_commit()
        return await fresh.begin_lock_setup()

    result = run(seed, body)
    assert result.value[0] is False


@pytest.mark.parametrize("seed", SEEDS)
def test_a_cancel_during_lease_setup_waits_then_releases_through_the_published_hook(seed):
    async def main(rt):
        fence = CommitFence(rt, "a1", ceiling_s=100.0, hard_event=rt.event())
        released: list[float] = []

        async def hook() -> None:
            released.append(rt.now())

        async def canceller():
            await rt.sleep(1)
            assert await fence.cancel_before_commit()

        async with rt.open_nursery() as nursery:
            nursery.start_soon(canceller)
            assert await fence.begin_lock_setup()
            await rt.sleep(2)  # the acquire transaction
            fence.publish_release_hook(hook)
            await fence.finish_lock_setup()
        return released

    assert run_sim(seed, main).value == [2.0]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_hard_cancel_cancels_the_running_summary_scope(seed):
    async def body(rt, fence, releases):
        with rt.cancel_scope() as scope:
            fence.set_interrupt_scope(scope)
            async with rt.open_nursery() as nursery:
                nursery.start_soon(lambda: fence.cancel_before_commit(hard=True, release=False))
                await rt.sleep(1000)
        fence.clear_interrupt_scope()
        return scope.cancelled_caught, rt.now(), fence.hard_requested

    result = run(seed, body)
    assert result.value[0] == (True, 0.0, True)


def test_a_soft_cancel_leaves_the_summary_running():
    async def body(rt, fence, releases):
        with rt.cancel_scope() as scope:
            fence.set_interrupt_scope(scope)
            assert await fence.cancel_before_commit()
            await rt.sleep(5)
        return scope.cancelled_caught

    assert run(0, body).value[0] is False


@pytest.mark.parametrize("seed", SEEDS)
def test_progress_touch_resets_the_silence_clock(seed):
    async def body(rt, fence, releases):
        await rt.sleep(7)
        before = fence.seconds_since_progress()
        fence.touch_progress()
        await rt.sleep(2)
        return before, fence.seconds_since_progress()

    assert run(seed, body).value[0] == (7.0, 2.0)


class PoppingStack(FenceStack):
    """The pre-fix registration: the finishing attempt pops whatever is on top."""

    def remove(self, fence):
        self._entries.pop()


@pytest.mark.parametrize("stack_type, survivor", [(FenceStack, "b"), (PoppingStack, "a")])
def test_out_of_order_completion_keeps_the_newest_live_fence_on_top(stack_type, survivor):
    async def main(rt):
        fa = CommitFence(rt, "a", ceiling_s=10.0, hard_event=rt.event())
        fb = CommitFence(rt, "b", ceiling_s=10.0, hard_event=rt.event())
        stack = stack_type()
        stack.push(fa)
        stack.push(fb)
        stack.remove(fa)  # A finishes first
        return stack.top.attempt

    assert run_sim(0, main).value == survivor


@pytest.mark.parametrize("seed", SEEDS)
def test_a_timed_out_host_gives_up_without_the_lock_and_leaves_the_won_lease_to_its_hook(seed):
    """R8: the worker holds the lock through its lease setup; the host's give-up still reaches it, refuses the
    commit, and leaves the release to the host (which frees the lease after recording its timeout)."""

    async def body(rt, fence, releases):
        assert await fence.begin_lock_setup()
        fence.give_up()
        seen = fence.is_cancelled, fence.lease_left_to_host
        await fence.finish_lock_setup()
        return seen, await fence.begin_commit(), releases[:]

    result = run(seed, body)
    (seen, admitted, released_by_worker), releases = result.value
    assert seen == (True, True) and not admitted and released_by_worker == []


@pytest.mark.parametrize("seed", SEEDS)
def test_a_give_up_after_the_commit_was_admitted_changes_nothing(seed):
    async def body(rt, fence, releases):
        assert await fence.begin_commit()
        fence.give_up()
        cancelled = fence.is_cancelled
        await fence.finish_commit()
        return cancelled, fence.is_cancelled

    result = run(seed, body)
    assert result.value[0] == (False, False)


@pytest.mark.parametrize("seed", SEEDS)
def test_admission_refuses_a_candidate_no_longer_current_in_the_step_it_asks(seed):
    async def body(rt, fence, releases):
        return await fence.begin_commit(current=lambda: False), fence.commit_in_flight

    result = run(seed, body)
    assert result.value[0] == (False, False)
    assert [record.event.reason for record in records(result.history, FenceBeginRefused)] == ["superseded"]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_commit_refused_by_a_pending_ctrl_c_is_hard_stopped(seed):
    """R1: the Ctrl+C set the hard event but its cancel has not taken the lock: the refusal itself marks the
    attempt hard-stopped, so the worker's rollback runs."""

    async def main(rt):
        pressed = rt.event()
        fence = CommitFence(rt, "a1", ceiling_s=100.0, hard_event=pressed)
        pressed.set()
        return await fence.begin_commit(), fence.hard_requested

    assert run_sim(seed, main).value == (False, True)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_given_up_lease_stays_the_hosts_until_its_hook_ran(seed):
    """R2: a worker outliving its host's timeout leaves the lease to the host until the host freed it (a failed
    release is then retried by the worker's exit); at the ceiling an orphan is handed its lease back."""

    async def body(rt, fence, releases):
        fence.give_up()
        seen = [fence.lease_left_to_host]
        assert await fence.cancel_before_commit(release=False)
        seen.append(fence.lease_left_to_host)
        await fence.release_cancelled()
        seen.append(fence.lease_left_to_host)
        return seen

    result = run(seed, body)
    seen, releases = result.value
    assert seen == [True, True, False] and len(releases) == 1


@pytest.mark.parametrize("seed", SEEDS)
def test_an_orphan_past_the_grace_is_handed_its_lease_back(seed):
    async def body(rt, fence, releases):
        fence.give_up()
        fence.hand_lease_back()
        return fence.lease_left_to_host

    result = run(seed, body)
    assert result.value == (False, [])
