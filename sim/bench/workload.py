"""The fixed kernel workload: tasks that sleep on timers, contend for a lock and hand off through events.

Written against the Runtime API so the very same code runs on the simulator, on trio and on the bare
coroutine loop; only the runtime underneath changes between measurements.
"""

from __future__ import annotations

from typing import Any

PAIRS = 4
ROUNDS = 1500


async def _ping(rt: Any, index: int, lock: Any, handoffs: list[Any], rounds: int) -> None:
    for n in range(rounds):
        if n % 8 == 0:
            await rt.sleep(0.001 * (index + 1))
        async with lock:
            await rt.checkpoint()
        handoffs[n].set()
        await rt.checkpoint()


async def _pong(rt: Any, lock: Any, handoffs: list[Any], rounds: int) -> None:
    for n in range(rounds):
        await handoffs[n].wait()
        async with lock:
            await rt.checkpoint()


async def workload(rt: Any, pairs: int = PAIRS, rounds: int = ROUNDS) -> None:
    """`pairs` ping/pong task pairs sharing one lock, each pair handing off `rounds` times."""
    lock = rt.lock()
    async with rt.open_nursery() as nursery:
        for index in range(pairs):
            handoffs = [rt.event() for _ in range(rounds)]
            nursery.start_soon(_ping, rt, index, lock, handoffs, rounds, name=f"ping{index}")
            nursery.start_soon(_pong, rt, lock, handoffs, rounds, name=f"pong{index}")
