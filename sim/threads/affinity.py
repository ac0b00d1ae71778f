"""One core for a run's threads: a baton handoff that stays on one core costs less than half of one across two.

Only one simulated thread runs at a time, so a run loses nothing by keeping its threads on a single core, and a
handoff (a lock release that wakes the next thread, which then takes the GIL from the one going to sleep) stays
in that core's run queue instead of waking another core. Measured on a 2-core Linux machine, idle: a round trip
between two Python threads through two locks costs 38 us of CPU across cores and 17 us on one, and a two-thread
program switched at every line 33.5 us of CPU a line against 9.9 us.

The core is the one the run's kernel thread is on when the run starts, taken afresh for every run, so the system
still spreads parallel workers over its cores between runs; the kernel thread's own affinity is given back when
the run ends. Carrier threads follow the run they are handed (`follow`). Where threads have no affinity to set
(outside Linux) or the core cannot be read, nothing is pinned, and runs are the same but for their cost.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable


def _getcpu() -> Callable[[], int] | None:
    """The C library's `sched_getcpu` (which core the calling thread is on), where threads have affinity."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        return getattr(ctypes.CDLL(None), "sched_getcpu", None)
    except OSError:  # no C library to load by that name
        return None


_sched_getcpu = _getcpu()

# The core of the run in progress (None: no run, or no pinning on this platform).
run_core: int | None = None


def pin_run() -> set[int] | None:
    """Pin the calling (kernel) thread to the core it is on and make that the run's core; returns the affinity to
    give back to `unpin_run`, or None when nothing was pinned."""
    global run_core
    if _sched_getcpu is None:
        return None
    core = _sched_getcpu()
    if core < 0:
        return None
    saved = os.sched_getaffinity(0)
    if not _pin({core}):
        return None
    run_core = core
    return saved


def unpin_run(saved: set[int] | None) -> None:
    """The run is over: the kernel thread gets back the affinity it had before `pin_run`."""
    global run_core
    run_core = None
    if saved is not None:
        _pin(saved)


def follow(core: int | None) -> int | None:
    """Move the calling thread to the run's core unless it is already there (`core`: where it was last pinned);
    returns where it is pinned now."""
    target = run_core
    if target is None or target == core:
        return core
    return target if _pin({target}) else core


def _pin(cores: set[int]) -> bool:
    try:
        os.sched_setaffinity(0, cores)  # 0: the calling thread, on Linux
    except OSError:  # a core taken away by a cgroup since: the thread stays where the system put it
        return False
    return True
