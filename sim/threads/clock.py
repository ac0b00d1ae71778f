"""`time.time`, `time.monotonic`, `time.perf_counter`, `time.process_time`, `time.thread_time` (and their `_ns`
forms) and `time.sleep` in a run.

A simulated thread reads the run's virtual clock, and the read is a scheduling point (what a thread does
with the time it read races with what others do meanwhile); `sleep` parks it on the kernel's timer heap, so a
300 s lease TTL costs no wall time. The values agree with the frozen wall clock (`sim.core.timefreeze`) that any
other reference to the clock sees during a run: virtual time 0 is `timefreeze.EPOCH`, and the monotonic
clocks read the same number, as the frozen ones do. Any other thread gets the clock it had before.

The CPU clocks (`process_time`, `thread_time`) read the seconds since the run began: a run's code takes no
virtual time, so the real CPU time would be the one value in a run that differs from one run to the next.

`threading` and `queue` keep private references to `time.monotonic` for their timeouts; those read the
virtual clock without a scheduling point (the operation that reads them already is one).
"""

from __future__ import annotations

from collections.abc import Callable

from sim.core.timefreeze import EPOCH
from sim.threads.baton import current

EPOCH_S = EPOCH.timestamp()
EPOCH_NS = int(EPOCH_S) * 1_000_000_000


def virtual_seconds(previous: Callable[[], float], *, preempts: bool = True, epoch_s: float = EPOCH_S) -> Callable[[], float]:
    """A clock in seconds: the virtual one (from `epoch_s`) for simulated threads, `previous` for any other."""

    def clock() -> float:
        sim = current()
        if sim is None:
            return previous()
        run = sim.run
        if preempts:
            run.checkpoint(sim, "clock")
        return epoch_s + run.kernel.now_s

    return clock


def virtual_nanoseconds(previous: Callable[[], int], *, epoch_ns: int = EPOCH_NS) -> Callable[[], int]:
    """A clock in integer nanoseconds: the virtual one (from `epoch_ns`) for simulated threads, `previous` for any other."""

    def clock_ns() -> int:
        sim = current()
        if sim is None:
            return previous()
        run = sim.run
        run.checkpoint(sim, "clock")
        return epoch_ns + round(run.kernel.now_s * 1_000_000_000)

    return clock_ns


def virtual_sleep(previous: Callable[[float], None]) -> Callable[[float], None]:
    """`time.sleep`: a virtual-time wait for simulated threads, `previous` for any other."""

    def sleep(seconds: float) -> None:
        sim = current()
        if sim is None:
            previous(seconds)
            return
        seconds = float(seconds)
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        sim.run.sleep(sim, seconds)

    return sleep
