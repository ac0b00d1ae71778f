"""The invariants, by name. Each lives in the module of the mechanism it guards."""

from sim.invariants.base import Invariant, SystemView, Violation
from sim.invariants.compressor import StaleAttemptWritesNoState, WouldGrowLatchesBreaker
from sim.invariants.fence import LeaseHeldAcrossCommit, NoCommitAfterCancel
from sim.invariants.host import HardCancelFreesLease, HungCommitReported, IdleTimeoutWithinBounds, NextTurnPersistsAfterCtrlC, StaleJobNeverRuns
from sim.invariants.lease import AppendsNeverRefusedByLease, DeadHolderReclaimable, LeaseMutualExclusion, LeaseReleasedWithinTtl
from sim.invariants.lineage import CallerSessionFollowsRotation, NoOrphanParent, OneContinuationPerParent, SingleLiveHead
from sim.invariants.transcript import (
    AbortedAttemptLeavesParentUnchanged,
    AcknowledgedAppendsSurvive,
    CallerTranscriptOnlyThroughCommit,
    NoDuplicatePersistedTurn,
)

INVARIANTS: dict[str, type[Invariant]] = {
    invariant.name: invariant
    for invariant in (
        NoCommitAfterCancel, LeaseHeldAcrossCommit, SingleLiveHead, OneContinuationPerParent, NoOrphanParent,
        CallerSessionFollowsRotation, NoDuplicatePersistedTurn, AcknowledgedAppendsSurvive,
        AbortedAttemptLeavesParentUnchanged, CallerTranscriptOnlyThroughCommit, LeaseMutualExclusion,
        AppendsNeverRefusedByLease, LeaseReleasedWithinTtl, DeadHolderReclaimable, StaleAttemptWritesNoState,
        WouldGrowLatchesBreaker, IdleTimeoutWithinBounds, HungCommitReported, StaleJobNeverRuns,
        NextTurnPersistsAfterCtrlC, HardCancelFreesLease,
    )
}

__all__ = ["INVARIANTS", "Invariant", "SystemView", "Violation"]
