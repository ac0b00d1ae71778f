"""Every event the reference, the faults and the harness record: one frozen dataclass per kind.

The modules follow the mechanisms (turns, host, fence, lease, compaction, cooldown, frontends, harness,
faults, real runs, runtime); `reference/EVENTS.md` is rendered from them (`python -m contract.docs`). `BY_KIND` maps each
kind string to its class; `fault.fired` has one class per shape of firing, all subclasses of `FaultFired`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from contract.events import compaction, cooldown, faults, fence, frontends, harness, host, lease, real, runtime, turns
from contract.events.base import Event
from contract.events.compaction import (
    AttemptClaimed,
    AttemptRestored,
    AttemptRestoreSkippedStale,
    AttemptRetired,
    CommitArchived,
    CommitPublished,
    CompactionBlocked,
    CompactionCarriedUnread,
    CompactionCommitFailed,
    CompactionCommitted,
    CompactionError,
    CompactionFinished,
    CompactionInput,
    CompactionInputReread,
    CompactionRefused,
    CompactionStaticFallback,
    CompactionStrike,
    CompactionStrikeResetFailed,
    CompactionSummaryDone,
    CompactionSummaryProgress,
    CompactionSummaryStarted,
    CompactionWatermark,
    CompactionWatermarkFailed,
)
from contract.events.cooldown import CooldownCleared, CooldownClearSkipped, CooldownPersistFailed, CooldownRestored, CooldownSet
from contract.events.faults import (
    CrashFired,
    CtrlCFired,
    FaultFired,
    LateWorkerFired,
    LeaseExpiryFired,
    PointFaultFired,
    SecondProcessFired,
    StallFired,
    StoreFaultFired,
)
from contract.events.fence import FenceBeginOk, FenceBeginRefused, FenceCancelWon, FenceFinish, FenceRevoked, FenceSetupRefused
from contract.events.frontends import (
    FrontendCtrlC,
    FrontendCtrlCGraceExpired,
    FrontendTitleFailed,
    FrontendTurnAbandoned,
    FrontendTurnFailed,
    FrontendTurnSubmitted,
    GatewayDelivered,
    GatewayTurnStarted,
    SessionTitled,
    SessionTitleIndeterminate,
)
from contract.events.harness import (
    ExternalRotated,
    ExternalRotationSkipped,
    FrontendCommandFailed,
    FrontendSessionEnded,
    ProcessCrashed,
    ProcessRestarted,
    ProcessStarted,
)
from contract.events.host import ActivityLabeled, HostCommitOverrun, HostLeaseRetained, HostTimeout, HostUnwind, PoolJobSkipped, PoolSaturated
from contract.events.lease import (
    LeaseAcquired,
    LeaseAcquireFailed,
    LeaseContended,
    LeaseExpiredGiveup,
    LeaseRefreshed,
    LeaseRefreshFailed,
    LeaseReleased,
    LeaseReleaseFailed,
)
from contract.events.real import ProcessExited, ProcessStopping, RealStoreBusyFired, StressLeasePlanted, StressSignal
from contract.events.runtime import IsolatedAbandoned, IsolatedDiscarded, RunStopped, TaskExit, TaskSpawn
from contract.events.turns import (
    EXTERNAL,
    AppendFailed,
    AppendOk,
    HardCancelFinished,
    HardCancelRequested,
    HostReturned,
    HostStarted,
    SessionAdopted,
    SessionAutoReset,
    SessionCloseCleared,
    SessionReopened,
    TurnContextOverflow,
    TurnOverflowDeferred,
    TurnPersisted,
)

# The package is the one place emit sites and invariants import event classes from.
__all__ = [
    "EXTERNAL", "ActivityLabeled", "AppendFailed", "AppendOk", "AttemptClaimed", "AttemptRestoreSkippedStale",
    "AttemptRestored", "AttemptRetired", "CommitArchived", "CommitPublished", "CompactionBlocked",
    "CompactionCarriedUnread", "CompactionCommitFailed", "CompactionCommitted", "CompactionError", "CompactionFinished",
    "CompactionInput", "CompactionInputReread", "CompactionRefused", "CompactionStaticFallback", "CompactionStrike",
    "CompactionStrikeResetFailed", "CompactionSummaryDone", "CompactionSummaryProgress", "CompactionSummaryStarted",
    "CompactionWatermark", "CompactionWatermarkFailed", "CooldownClearSkipped", "CooldownCleared",
    "CooldownPersistFailed", "CooldownRestored", "CooldownSet", "CrashFired", "CtrlCFired", "Event", "ExternalRotated",
    "ExternalRotationSkipped", "FaultFired", "FenceBeginOk", "FenceBeginRefused", "FenceCancelWon", "FenceFinish",
    "FenceRevoked", "FenceSetupRefused", "FrontendCommandFailed", "FrontendCtrlC", "FrontendCtrlCGraceExpired",
    "FrontendSessionEnded", "FrontendTitleFailed", "FrontendTurnAbandoned", "FrontendTurnFailed",
    "FrontendTurnSubmitted", "GatewayDelivered", "GatewayTurnStarted", "HardCancelFinished", "HardCancelRequested",
    "HostCommitOverrun", "HostLeaseRetained", "HostReturned", "HostStarted", "HostTimeout", "HostUnwind",
    "IsolatedAbandoned", "IsolatedDiscarded", "LateWorkerFired", "LeaseAcquireFailed", "LeaseAcquired",
    "LeaseContended", "LeaseExpiredGiveup", "LeaseExpiryFired", "LeaseRefreshFailed", "LeaseRefreshed",
    "LeaseReleaseFailed", "LeaseReleased", "PointFaultFired", "PoolJobSkipped", "PoolSaturated", "ProcessCrashed",
    "ProcessExited", "ProcessRestarted", "ProcessStarted", "ProcessStopping", "RealStoreBusyFired", "RunStopped",
    "SecondProcessFired", "SessionAdopted", "SessionAutoReset", "SessionCloseCleared", "SessionReopened",
    "SessionTitleIndeterminate", "SessionTitled", "StallFired", "StoreFaultFired", "StressLeasePlanted", "StressSignal",
    "TaskExit", "TaskSpawn", "TurnContextOverflow", "TurnOverflowDeferred", "TurnPersisted",
    "ALL", "BY_KIND", "MODULES", "classes_of", "from_trace",
]

# The event modules in the order the docs present them.
MODULES: tuple[ModuleType, ...] = (
    turns, host, fence, lease, compaction, cooldown, frontends, harness, faults, real, runtime,
)


def classes_of(module: ModuleType) -> list[type[Event]]:
    """The event classes a module declares, in declaration order."""
    return [value for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, Event) and value.__module__ == module.__name__]


ALL: tuple[type[Event], ...] = tuple(cls for module in MODULES for cls in classes_of(module))
BY_KIND: dict[str, type[Event]] = {}
for _cls in ALL:
    BY_KIND.setdefault(_cls.kind, _cls)  # a shape of `fault.fired` comes after the class that declares the kind


def from_trace(kind: str, fields: Mapping[str, Any]) -> Event:
    """An event read back from its trace form (a real run's JSONL log): the class of `kind` whose trace keys fit
    `fields` (for `fault.fired`, the shape of the firing). KeyError for an unknown kind, ValueError for fields
    that fit none of its classes."""
    if kind not in BY_KIND:
        raise KeyError(kind)
    keys = set(fields)
    for cls in ALL:
        if cls.kind == kind and cls.fits(keys):
            return cls.from_trace_fields(fields)
    raise ValueError(f"{kind} with fields {sorted(keys)} fits no event class")
