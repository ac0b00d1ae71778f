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

The run's threads are also given the batch scheduling policy (`SCHED_BATCH`): a thread woken by a handoff then
waits for the one that woke it to sleep instead of preempting it at once, only to find the GIL still taken and
sleep again. Measured on the same machine, a round trip through two locks on one core: 13.2 us of CPU with the
default policy, 7.0 us with the batch policy (medians of five runs of 20,000 round trips each). The policy changes
nothing but the kernel's wakeup decisions (every thread keeps its nice value); only a thread with the default
policy is given it, the kernel thread gets its own back at the end of the run, and a carrier keeps the batch
policy, since it only ever runs simulated threads.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass


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


@dataclass(frozen=True)
class Pinned:
    """What `pin_run` changed on the kernel thread, for `unpin_run` to give back."""

    cores: set[int]
    policy: int | None  # the scheduling policy before the run's; None if it was left alone


def pin_run() -> Pinned | None:
    """Pin the calling (kernel) thread to the core it is on, make that the run's core and give the thread the batch
    policy; returns what to give back to `unpin_run`, or None when nothing was pinned."""
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
    return Pinned(saved, _batch_policy())


def unpin_run(pinned: Pinned | None) -> None:
    """The run is over: the kernel thread gets back the affinity and the policy it had before `pin_run`."""
    global run_core
    run_core = None
    if pinned is None:
        return
    _pin(pinned.cores)
    if pinned.policy is not None:
        _set_policy(pinned.policy)


def follow(core: int | None) -> int | None:
    """Move the calling (carrier) thread to the run's core unless it is already there (`core`: where it was last
    pinned; None the first time, when it also takes the batch policy); returns where it is pinned now."""
    target = run_core
    if target is None or target == core:
        return core
    if core is None:
        _batch_policy()
    return target if _pin({target}) else core


def _pin(cores: set[int]) -> bool:
    try:
        os.sched_setaffinity(0, cores)  # 0: the calling thread, on Linux
    except OSError:  # a core taken away by a cgroup since: the thread stays where the system put it
        return False
    return True


def _batch_policy() -> int | None:
    """Give the calling thread the batch policy if it has the default one; returns the default, to give back, or
    None if the thread's policy was left alone (another policy is the system's or the caller's choice)."""
    try:
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            return None
    except OSError:
        return None
    return os.SCHED_OTHER if _set_policy(os.SCHED_BATCH) else None


def _set_policy(policy: int) -> bool:
    try:
        os.sched_setscheduler(0, policy, os.sched_param(0))  # 0: the calling thread, on Linux
    except OSError:  # a policy the system refuses (a real-time one the thread had, say): it stays as it was
        return False
    return True
