"""Pool, host wait and the activity label (`pool.py`, `host.py`, `activity.py`)."""

from __future__ import annotations

from contract.events.base import Event, event, trace
from contract.ids import AttemptId, SessionId


@event
class PoolSaturated(Event):
    """Admission was refused because the pool is full."""

    kind = "pool.saturated"
    feeds = ("R8",)
    admitted: int
    cap: int


@event
class PoolJobSkipped(Event):
    """A job started after its fence was cancelled or its deadline passed, and did nothing."""

    kind = "pool.job_skipped"
    feeds = ("R8",)
    attempt: AttemptId


@event
class HostTimeout(Event):
    """The host's wait ran out."""

    kind = "host.timeout"
    feeds = ("R9", "R2")
    attempt: AttemptId
    budget: str = trace(note="`idle` or `ceiling`")
    since_progress_s: float = trace(key="since_progress", note="seconds since the last progress")


@event
class HostCommitOverrun(Event):
    """Once, while an admitted commit is still running one overrun slice after the timeout."""

    kind = "host.commit_overrun"
    feeds = ("R7",)
    attempt: AttemptId
    waited_s: float = trace(key="waited", note="seconds the host has waited on the commit")


@event
class HostLeaseRetained(Event):
    """Ceiling path: the cancelled worker did not exit within the grace, so it keeps its lease."""

    kind = "host.lease_retained"
    feeds = ("R25",)
    attempt: AttemptId


@event
class HostUnwind(Event):
    """The host's wait is left by cancellation or an error (not a settled result); the revoke follows."""

    kind = "host.unwind"
    feeds = ("R5",)
    attempt: AttemptId


@event
class ActivityLabeled(Event):
    """The agent's activity label (what its status line shows) was written: by an attempt's heartbeat
    (`started`, `in_progress`, `completed`) or by its host (`timed_out`, terminal)."""

    kind = "activity.labeled"
    feeds = ("R26",)
    session: SessionId
    attempt: AttemptId
    label: str = trace(note="`started`, `in_progress`, `completed` (the heartbeat) or `timed_out` (the host)")
    terminal: bool = trace(note="the attempt's final state: nothing of that attempt may relabel it afterwards")
