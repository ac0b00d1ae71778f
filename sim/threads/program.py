"""A plain (non-async) program that uses threads, run once on a World: `run_threads(world, program, *args)`.

The program runs as the run's main thread; the root task ("program") waits until the main thread has
returned and joined the non-daemon threads, or until any thread ended by an exception, then abandons what is
left and returns the program's value or raises that exception. A batch of runs shares one wall-clock freeze
and one patched standard library (`sim.explore` opens both around its runs); a lone run opens its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sim.core.timefreeze import frozen_time
from sim.threads import affinity
from sim.threads.patching import adopt_reachable, begin_run, end_run, threads_patched
from sim.threads.run import ThreadRun
from sim.threads.tracing import Preemption

if TYPE_CHECKING:
    from sim.core.world import RunResult, World
    from sim.runtime.simulated import SimRuntime

ROOT_TASK = "program"
# Real seconds a thread may keep the baton before it is taken to be blocked outside the simulator.
DEFAULT_STALL_S = 10.0


def run_threads(world: World, program: Callable[..., Any], *args: Any, preemption: Preemption | None = None,
                stall_s: float = DEFAULT_STALL_S) -> RunResult:
    """Run `program(*args)` and the threads it starts on `world`, to completion, deadlock or budget."""
    preemption = preemption or Preemption()
    observer = world.kernel.strategy.observe_threads() if preemption.granularity == "lines" else None
    run = ThreadRun(world, preemption=preemption, stall_s=stall_s, observer=observer)

    async def root(rt: SimRuntime) -> Any:
        run.start_main(lambda: program(*args))
        await run.ended.wait()
        if run.failure is not None:
            raise run.failure[1]
        return run.main_value

    with frozen_time(), threads_patched():
        adopt_reachable(program, args)
        begin_run()
        pinned = affinity.pin_run()
        try:
            return world.run(root, name=ROOT_TASK)
        finally:
            affinity.unpin_run(pinned)
            end_run()
