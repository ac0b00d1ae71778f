"""Small programs written against the Runtime API whose observable result must not depend on the runtime.

Each program returns a log of (virtual time, what happened). Times are chosen so that every logged fact is
ordered by the clock or by causality, never by scheduler whim: the simulator under any seed and trio
under MockClock must produce the same log.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Log = list[tuple[float, str]]
Program = Callable[[Any], Awaitable[Log]]


def _at(rt: Any, log: Log, what: str) -> None:
    log.append((round(rt.now(), 6), what))


async def timeouts(rt: Any) -> Log:
    log: Log = []
    with rt.move_on_after(2) as scope:
        await rt.sleep(5)
        _at(rt, log, "not reached")
    _at(rt, log, f"moved on caught={scope.cancelled_caught}")
    try:
        with rt.fail_after(1):
            await rt.sleep(3)
    except rt.TooSlowError:
        _at(rt, log, "fail_after raised TooSlowError")
    with rt.move_on_after(10) as scope:
        await rt.sleep(1)
    _at(rt, log, f"finished in time caught={scope.cancelled_caught}")
    with rt.cancel_scope(deadline=rt.now() - 1) as scope:
        await rt.checkpoint()
        _at(rt, log, "not reached")
    _at(rt, log, f"past deadline caught={scope.cancelled_caught}")
    await rt.sleep_until(rt.now() + 0.5)
    _at(rt, log, "slept until")
    return log


async def nested_cancel_scopes(rt: Any) -> Log:
    log: Log = []
    with rt.cancel_scope() as outer:
        with rt.cancel_scope() as inner:
            inner.cancel()
            await rt.sleep(1)
        _at(rt, log, f"inner only: inner={inner.cancelled_caught} outer_called={outer.cancel_called}")
    with rt.cancel_scope() as outer:
        with rt.cancel_scope() as inner:
            outer.cancel()
            inner.cancel()
            await rt.sleep(1)
        _at(rt, log, "not reached")
    _at(rt, log, f"both: inner={inner.cancelled_caught} outer={outer.cancelled_caught}")
    with rt.cancel_scope() as outer:
        with rt.move_on_after(1) as inner:
            await rt.sleep(5)
        _at(rt, log, f"deadline inner: inner={inner.cancelled_caught}")
        outer.cancel()
        try:
            await rt.sleep(1)
        finally:
            _at(rt, log, "outer cancel delivered at await")
    _at(rt, log, f"outer caught={outer.cancelled_caught}")
    return log


async def shielding(rt: Any) -> Log:
    log: Log = []
    with rt.move_on_after(1) as scope:
        try:
            await rt.sleep(10)
        finally:
            with rt.cancel_scope(shield=True):
                await rt.sleep(2)
                _at(rt, log, "shielded cleanup ran to completion")
    _at(rt, log, f"after shielded cleanup caught={scope.cancelled_caught}")
    with rt.cancel_scope() as scope:
        scope.cancel()
        with rt.cancel_scope(shield=True) as shield:
            await rt.sleep(1)
            _at(rt, log, "shield holds inside a cancelled scope")
            shield.shield = False
            try:
                await rt.checkpoint()
            finally:
                _at(rt, log, "unshielding exposes the cancel")
    _at(rt, log, f"caught={scope.cancelled_caught}")
    return log


async def _wait_then_log(rt: Any, log: Log, event: Any, delay: float, what: str) -> None:
    await rt.sleep(delay)
    await event.wait()
    _at(rt, log, what)


async def events(rt: Any) -> Log:
    log: Log = []
    ready = rt.event()

    async with rt.open_nursery() as nursery:
        nursery.start_soon(_wait_then_log, rt, log, ready, 0, "early woke")
        nursery.start_soon(_wait_then_log, rt, log, ready, 5, "late woke")
        await rt.sleep(2)
        _at(rt, log, f"setting, is_set={ready.is_set()}")
        ready.set()
    _at(rt, log, f"done, is_set={ready.is_set()}")
    return log


async def locks(rt: Any) -> Log:
    log: Log = []
    lock = rt.lock()
    inside = 0

    async def worker(name: str, start: float) -> None:
        nonlocal inside
        await rt.sleep(start)
        async with lock:
            inside += 1
            _at(rt, log, f"{name} holds, inside={inside}")
            await rt.sleep(1)
            inside -= 1

    async def stranger() -> None:
        try:
            lock.release()
        except RuntimeError:
            _at(rt, log, "stranger's release refused")

    async with rt.open_nursery() as nursery:
        nursery.start_soon(worker, "a", 0)
        nursery.start_soon(worker, "b", 0.5)
        nursery.start_soon(worker, "c", 0.7)
        await rt.sleep(0.2)
        _at(rt, log, f"locked={lock.locked()} try={lock.try_acquire()}")
        nursery.start_soon(stranger)
    _at(rt, log, f"all done, locked={lock.locked()}")
    return log


async def semaphore(rt: Any) -> Log:
    log: Log = []
    limiter = rt.semaphore(2)

    async def job(name: str, start: float) -> None:
        await rt.sleep(start)
        await limiter.acquire()
        try:
            _at(rt, log, f"{name} admitted, available={limiter.available}")
            await rt.sleep(2)
        finally:
            limiter.release()

    async with rt.open_nursery() as nursery:
        for index, name in enumerate("abc"):
            nursery.start_soon(job, name, index * 0.1)
    _at(rt, log, f"available={limiter.available}")
    return log


async def channels(rt: Any) -> Log:
    log: Log = []
    send, receive = rt.open_channel(1)

    async def producer() -> None:
        for value in range(3):
            await rt.sleep(1)
            await send.send(value)
        send.close()

    async with rt.open_nursery() as nursery:
        nursery.start_soon(producer)
        while True:
            try:
                value = await receive.receive()
            except rt.EndOfChannel:
                _at(rt, log, "end of channel")
                break
            _at(rt, log, f"received {value}")
    return log


async def abandoned_isolated_call(rt: Any) -> Log:
    log: Log = []
    finished = rt.event()

    async def slow_worker() -> str:
        try:
            await rt.sleep(5)
            _at(rt, log, "late worker finished")
            return "late result"
        finally:
            finished.set()

    with rt.move_on_after(1) as scope:
        _at(rt, log, "calling")
        await rt.run_isolated(slow_worker, name="slow_worker")
    _at(rt, log, f"owner unwound at once, caught={scope.cancelled_caught}")

    async def quick() -> int:
        await rt.sleep(0.5)
        return 7

    _at(rt, log, f"a call that is not abandoned returns {await rt.run_isolated(quick, name='quick')}")

    async def failing() -> None:
        await rt.sleep(0.1)
        raise KeyError("from worker")

    try:
        await rt.run_isolated(failing, name="failing")
    except KeyError as error:
        _at(rt, log, f"worker error reaches the owner: {error}")
    await finished.wait()
    _at(rt, log, "owner saw the late worker end")
    return log


async def errors_in_task_groups(rt: Any) -> Log:
    log: Log = []

    async def failing() -> None:
        await rt.sleep(1)
        raise ValueError("child failed")

    async def sibling() -> None:
        try:
            await rt.sleep(10)
        finally:
            _at(rt, log, "sibling cancelled and cleaned up")

    try:
        async with rt.open_nursery() as nursery:
            nursery.start_soon(failing)
            nursery.start_soon(sibling)
            await rt.sleep(20)
    except* ValueError as group:
        _at(rt, log, f"parent got {[str(e) for e in group.exceptions]}")
    with rt.cancel_scope() as outer:
        try:
            async with rt.open_nursery() as nursery:
                nursery.start_soon(sibling)
                await rt.sleep(1)
                outer.cancel()
                await rt.sleep(1)
        except BaseException as error:
            _at(rt, log, f"cancelled nursery raises a group: {isinstance(error, BaseExceptionGroup)}")
            raise
    _at(rt, log, f"outer scope swallowed it: {outer.cancelled_caught}")
    return log


async def resettable_events(rt: Any) -> Log:
    log: Log = []
    gate = rt.resettable_event("gate")

    async with rt.open_nursery() as nursery:
        nursery.start_soon(_wait_then_log, rt, log, gate, 0, "first passed")
        await rt.sleep(1)
        gate.set()
        await rt.sleep(1)
        gate.clear()
        _at(rt, log, f"cleared, is_set={gate.is_set()}")
        nursery.start_soon(_wait_then_log, rt, log, gate, 0.5, "second passed")
        await rt.sleep(2)
        gate.set()
        nursery.start_soon(_wait_then_log, rt, log, gate, 1, "third passed")
    return log


async def conditions(rt: Any) -> Log:
    log: Log = []
    items = rt.condition(name="items")
    queue: list[int] = []

    async def consumer(name: str, start: float) -> None:
        await rt.sleep(start)
        async with items:
            while not queue:
                await items.wait()
            _at(rt, log, f"{name} took {queue.pop(0)}")

    async def impatient() -> None:
        with rt.move_on_after(1) as scope:
            async with items:
                await items.wait()
        _at(rt, log, f"impatient gave up caught={scope.cancelled_caught}, locked={items.locked()}")

    async with rt.open_nursery() as nursery:
        nursery.start_soon(consumer, "a", 0)
        nursery.start_soon(consumer, "b", 0.5)
        nursery.start_soon(impatient)
        await rt.sleep(2)
        async with items:
            queue.append(1)
            items.notify()
            _at(rt, log, "notified one, still holding the lock")
        await rt.sleep(1)
        async with items:
            queue.append(2)
            items.notify_all()
    try:
        items.notify()
    except RuntimeError:
        _at(rt, log, "notify without the lock refused")
    return log


async def barriers(rt: Any) -> Log:
    log: Log = []
    barrier = rt.barrier(3, "round")
    passed: list[tuple[float, int, str]] = []

    async def party(name: str, delay: float) -> None:
        for turn in range(2):
            await rt.sleep(delay)
            await barrier.wait()
            passed.append((round(rt.now(), 6), turn, name))

    async def quitter() -> None:
        with rt.move_on_after(0.5) as scope:
            await barrier.wait()
        _at(rt, log, f"quitter withdrew caught={scope.cancelled_caught}")

    async with rt.open_nursery() as nursery:
        nursery.start_soon(quitter)
        for name, delay in (("a", 1), ("b", 2), ("c", 3)):
            nursery.start_soon(party, name, delay)
    return log + [(time, f"{name} passed round {turn}") for time, turn, name in sorted(passed)]


PROGRAMS: dict[str, Program] = {
    "timeouts": timeouts,
    "nested_cancel_scopes": nested_cancel_scopes,
    "shielding": shielding,
    "events": events,
    "locks": locks,
    "semaphore": semaphore,
    "channels": channels,
    "abandoned_isolated_call": abandoned_isolated_call,
    "errors_in_task_groups": errors_in_task_groups,
    "resettable_events": resettable_events,
    "conditions": conditions,
    "barriers": barriers,
}
