"""Ten classic concurrency bugs, written against the Runtime API as any user of `sim.explore` would.

Each program fails (an assertion, or a deadlock) only under some schedules. Each passes under the
kernel's FIFO schedule (every choice 0) and under run-until-blocked (the preemption-bounded search's
first run), so finding one takes a search, not luck: where FIFO's round robin would hit a bug at once,
one task starts a few awaits later, as real code does when it validates or logs before its critical step.
The docstrings say which interleaving breaks each one; `bench classic` measures how fast each strategy
finds it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Program = Callable[[Any], Awaitable[None]]


async def _awaits(rt: Any, count: int, label: str = "") -> None:
    for _ in range(count):
        await rt.checkpoint(label)


async def lost_update(rt: Any) -> None:
    """Two deposits read the balance, await, and write it back: one preemption between a read and its
    write loses the other deposit."""
    account = {"balance": 100}

    async def deposit(amount: int, checks: int) -> None:
        await _awaits(rt, checks, "check account")
        balance = account["balance"]
        await rt.checkpoint("write balance")
        account["balance"] = balance + amount

    async with rt.open_nursery() as nursery:
        nursery.start_soon(deposit, 10, 0, name="deposit-10")
        nursery.start_soon(deposit, 20, 2, name="deposit-20")
    assert account["balance"] == 130, f"a deposit was lost: the balance is {account['balance']}, not 130"


async def check_then_act(rt: Any) -> None:
    """Lazy initialisation: `if not connected: await connect()`. A caller preempted between its check and
    its connect lets a second caller pass the same check: two connections."""
    pool: dict[str, str] = {}
    opened: list[str] = []

    async def connection(caller: str, warmup: int) -> str:
        await _awaits(rt, warmup, "warm up")
        if "conn" not in pool:
            await rt.checkpoint("connect")
            opened.append(caller)
            pool["conn"] = caller
        return pool["conn"]

    async with rt.open_nursery() as nursery:
        for index, caller in enumerate(("a", "b", "c")):
            nursery.start_soon(connection, caller, 2 * index, name=caller)
    assert len(opened) == 1, f"the connection was opened {len(opened)} times, by {opened}"


async def order_violation(rt: Any) -> None:
    """A parent starts a worker, then publishes the state the worker reads (the shape of Mozilla's
    mThread bug): preempted between the two, the worker reads before the state exists."""
    shared: dict[str, str] = {}

    async def worker() -> None:
        await rt.checkpoint("worker starts")
        await rt.checkpoint("worker prepares")
        assert "state" in shared, "the worker read the state before its parent published it"

    async with rt.open_nursery() as nursery:
        nursery.start_soon(worker, name="worker")
        await rt.checkpoint("parent registers the worker")
        shared["state"] = "ready"


async def atomicity_depth3(rt: Any) -> None:
    """A hand-rolled mutual exclusion: wait until the other's flag is down, then raise your own. Both get
    in when each passes its check before the other raises its flag and one is inside while the other
    enters: three ordering constraints (depth 3), two preemptions."""
    flags = {"a": False, "b": False}
    inside: list[str] = []

    async def enter(me: str, other: str, delay: int) -> None:
        await _awaits(rt, delay, "start")
        while flags[other]:
            await rt.sleep(0.001)  # back off; a busy loop on checkpoint() would starve the flag's owner
        await rt.checkpoint("raise flag")
        flags[me] = True
        inside.append(me)
        assert len(inside) == 1, f"both {inside} are in the critical section"
        await rt.checkpoint("critical work")
        inside.remove(me)
        flags[me] = False

    async with rt.open_nursery() as nursery:
        nursery.start_soon(enter, "a", "b", 0, name="a")
        nursery.start_soon(enter, "b", "a", 3, name="b")


async def aba_free_list(rt: Any) -> None:
    """A lock-free free list pops by reading the top and its next, then compare-and-swapping the top. If,
    in between, another task pops A, pops B and pushes A back, the swap still sees A on top and installs
    the stale next, B, which that task owns: B is allocated and free at once."""
    node_c: dict[str, Any] = {"name": "C", "next": None}
    node_b: dict[str, Any] = {"name": "B", "next": node_c}
    node_a: dict[str, Any] = {"name": "A", "next": node_b}
    free = {"top": node_a}
    allocated: list[str] = []

    async def pop() -> dict[str, Any]:
        while True:
            top = free["top"]
            following = top["next"]
            await rt.checkpoint("compare and swap")
            if free["top"] is top:
                free["top"] = following
                return top

    async def push(node: dict[str, Any]) -> None:
        while True:
            top = free["top"]
            node["next"] = top
            await rt.checkpoint("compare and swap")
            if free["top"] is top:
                free["top"] = node
                return

    async def allocate_one() -> None:
        allocated.append((await pop())["name"])

    async def allocate_two_free_one() -> None:
        await rt.checkpoint("start")
        first, second = await pop(), await pop()
        await push(first)
        allocated.append(second["name"])

    async with rt.open_nursery() as nursery:
        nursery.start_soon(allocate_one, name="allocator")
        nursery.start_soon(allocate_two_free_one, name="recycler")
    listed, node = [], free["top"]
    while node is not None:
        listed.append(node["name"])
        node = node["next"]
    assert not set(listed) & set(allocated), f"nodes {sorted(set(listed) & set(allocated))} are allocated and on the free list"


async def three_lock_deadlock(rt: Any) -> None:
    """Three tasks each take two of three locks, in a cycle: each holding its first lock while the next
    takes its own is a circular wait."""
    locks = [rt.lock(name) for name in ("accounts", "ledger", "audit")]

    async def transfer(first: Any, second: Any, delay: int) -> None:
        await _awaits(rt, delay, "prepare")
        async with first:
            await rt.checkpoint("work under one lock")
            async with second:
                await rt.checkpoint("work under both")

    async with rt.open_nursery() as nursery:
        for index in range(3):
            nursery.start_soon(transfer, locks[index], locks[(index + 1) % 3], 4 * index, name=f"transfer-{index}")


async def lost_wakeup(rt: Any) -> None:
    """A consumer checks for work without holding the condition's lock, then waits on it: a notify that
    lands between the check and the wait is lost, and the consumer sleeps forever (a deadlock)."""
    ready = rt.condition(name="work ready")
    work: list[str] = []

    async def consumer() -> None:
        if not work:
            await rt.checkpoint("log: going to sleep")
            async with ready:
                await ready.wait()
        assert work

    async def producer() -> None:
        await _awaits(rt, 2, "produce")
        async with ready:
            work.append("job")
            ready.notify_all()

    async with rt.open_nursery() as nursery:
        nursery.start_soon(consumer, name="consumer")
        nursery.start_soon(producer, name="producer")


async def bounded_buffer(rt: Any) -> None:
    """A one-slot buffer whose producers wait for room with `if` instead of `while`: when a take wakes two
    waiting producers, the second appends to a buffer the first has filled again."""
    changed = rt.condition(name="buffer changed")
    buffer: list[int] = []

    async def produce(item: int, delay: int) -> None:
        await _awaits(rt, delay, "make item")
        async with changed:
            if buffer:
                await changed.wait()
            buffer.append(item)
            assert len(buffer) <= 1, f"buffer overflow: {buffer}"
            changed.notify_all()

    async def consume(count: int) -> None:
        for _ in range(count):
            await rt.checkpoint("ready to take")
            async with changed:
                while not buffer:
                    await changed.wait()
                buffer.pop()
                changed.notify_all()

    async with rt.open_nursery() as nursery:
        nursery.start_soon(consume, 3, name="consumer")
        for item in range(3):
            nursery.start_soon(produce, item, 3 * item, name=f"producer-{item}")


async def must_run_last(rt: Any) -> None:
    """A watcher registers for the next job completion and waits for it. Four jobs announce when they
    finish; if all four finish before the watcher registers (it runs last of five), no announcement
    is left and it waits forever."""
    listeners: list[Any] = []

    async def job() -> None:
        await _awaits(rt, 4, "work")
        for listener in listeners:
            listener.set()

    async def watcher() -> None:
        finished = rt.event("a job finished")
        listeners.append(finished)
        await finished.wait()

    async with rt.open_nursery() as nursery:
        nursery.start_soon(watcher, name="watcher")
        for index in range(4):
            nursery.start_soon(job, name=f"job-{index}")


async def rare_among_ten(rt: Any) -> None:
    """Ten replicas each read the old configuration, then apply a twelve-step push. The last-started one,
    when it finishes, retires the old configuration, sure that every replica started before it has read
    it. A replica that has not run at all by then finds nothing: under a uniform walk, one task of ten
    almost never runs twelve steps before another has run one; one priority order, or one free choice of
    who runs first, does it at once."""
    config = {"old": "v1"}
    read: list[int] = []

    async def replica(index: int) -> None:
        assert "old" in config, f"replica {index} found the old configuration retired before it read it"
        read.append(index)
        await _awaits(rt, 12, "apply")
        if index == 9:
            del config["old"]

    async with rt.open_nursery() as nursery:
        for index in range(10):
            nursery.start_soon(replica, index, name=f"replica-{index}")


async def stale_copy_depth3(rt: Any) -> None:
    """A saver copies a record, works on its copy, and writes the copy back, undoing an update made in
    between; an auditor that read the updated version sees it go back. Three orderings (copy before the
    update, the auditor's read after it, the write-back between the auditor's read and its check) inside a
    long run: the saver must be held for the tens of steps the other two take."""
    record = {"version": 0}

    async def saver() -> None:
        copy = dict(record)
        await _awaits(rt, 3, "work on the copy")
        record.update(copy)

    async def updater() -> None:
        await _awaits(rt, 40, "compute")
        record["version"] = 1
        await _awaits(rt, 5, "publish")

    async def auditor() -> None:
        await _awaits(rt, 50, "wait for the update")
        seen = record["version"]
        await _awaits(rt, 25, "audit")
        assert record["version"] >= seen, f"the version went back from {seen} to {record['version']}"

    async with rt.open_nursery() as nursery:
        nursery.start_soon(saver, name="saver")
        nursery.start_soon(updater, name="updater")
        nursery.start_soon(auditor, name="auditor")


BUGS: dict[str, Program] = {
    "lost_update": lost_update,
    "check_then_act": check_then_act,
    "order_violation": order_violation,
    "atomicity_depth3": atomicity_depth3,
    "aba_free_list": aba_free_list,
    "three_lock_deadlock": three_lock_deadlock,
    "lost_wakeup": lost_wakeup,
    "bounded_buffer": bounded_buffer,
    "must_run_last": must_run_last,
    "rare_among_ten": rare_among_ten,
    "stale_copy_depth3": stale_copy_depth3,
}
