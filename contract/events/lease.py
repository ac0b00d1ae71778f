"""Lease (`lease.py`, `compactor.py`)."""

from __future__ import annotations

from contract.events.base import Event, event, trace
from contract.ids import HolderId, SessionId


@event
class LeaseAcquired(Event):
    """The attempt won the lease."""

    kind = "lease.acquired"
    feeds = ("R3", "R19", "R24")
    session: SessionId
    holder: HolderId


@event
class LeaseContended(Event):
    """Another live holder has the lease; the attempt sits out."""

    kind = "lease.contended"
    feeds = ("R19",)
    session: SessionId
    holder: HolderId


@event
class LeaseAcquireFailed(Event):
    """The acquire transaction raised; the attempt sits out."""

    kind = "lease.acquire_failed"
    feeds = ("R25",)
    session: SessionId
    holder: HolderId
    error: str = trace(note="the exception's repr")


@event
class LeaseRefreshed(Event):
    """A refresh extended the holder's own row."""

    kind = "lease.refreshed"
    feeds = ("R25",)
    session: SessionId
    holder: HolderId


@event
class LeaseRefreshFailed(Event):
    """A refresh failed or found no row of ours."""

    kind = "lease.refresh_failed"
    feeds = ("R25",)
    session: SessionId
    holder: HolderId
    failures: int = trace(note="consecutive failures so far")


@event
class LeaseExpiredGiveup(Event):
    """The refresher stopped after its failure budget; the row self-expires within one TTL."""

    kind = "lease.expired_giveup"
    feeds = ("R25",)
    session: SessionId
    holder: HolderId


@event
class LeaseReleased(Event):
    """The holder-qualified release ran."""

    kind = "lease.released"
    feeds = ("R1", "R3", "R6")
    session: SessionId
    holder: HolderId
    held: bool = trace(note="a row of ours was deleted")


@event
class LeaseReleaseFailed(Event):
    """The release transaction raised; the next release call retries, the stopped refresher lets the row expire."""

    kind = "lease.release_failed"
    feeds = ("R25",)
    session: SessionId
    holder: HolderId
    error: str = trace(note="the exception's repr")
