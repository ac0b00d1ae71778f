"""The invariants, by name. Each lives in the module of the mechanism it guards."""

from sim.invariants.base import Invariant, InvariantSet, SystemView, Violation
from sim.invariants.compressor import (
    BreakerBlocksOnlyWhenLatched,
    CooldownBlocksOnlyWhileInForce,
    CooldownNeverShortened,
    CurrentAttemptOwnsCompressor,
    HardCancelRestoresCooldown,
    NoSummaryInsideCooldown,
    OldMessagesGetSummarized,
    StaleAttemptWritesNoState,
    WouldGrowLatchesBreaker,
    CommitBelowThresholdClearsStrikes,
)
from sim.invariants.fence import (
    CancelNeverBeatsAdmittedCommit,
    CtrlCStopsTheTurnsLaterCompactions,
    HardCancelAbandonsSummary,
    LeaseHeldAcrossCommit,
    NoAdmissionAfterCtrlC,
    NoCommitAfterCancel,
    SummarizedAttemptRefusedOnlyForACause,
)
from sim.invariants.host import (
    AbandonedTurnStaysSilent,
    AdmittedJobRuns,
    CaughtErrorsAreNotBugs,
    CtrlCAbandonsOnlyThePressedTurn,
    CtrlCGraceCountedFromPress,
    CtrlCSeesIdlePrompt,
    NoRelabelAfterTerminal,
    FailedCommitBacksOff,
    FailedSummaryBacksOff,
    FailedSummaryNeverCommits,
    HardCancelFreesLease,
    HungCommitReported,
    IdleTimeoutFiresWhenDue,
    IdleTimeoutWithinBounds,
    NextTurnPersistsAfterCtrlC,
    NoProgressAfterGiveUp,
    PoolAdmissionBounded,
    PoolRefusesOnlyWhenFull,
    RunningSummaryLabelled,
    StaleJobNeverRuns,
    TimedOutHostReturnsPromptly,
    TimeoutBacksOff,
    TurnFailsOnlyExpectedly,
    WorkerRaisesOnlyAfterFault,
)
from sim.invariants.lease import (
    AbandonedAttemptFreesLease,
    AppendsNeverRefusedByLease,
    CancelledAttemptNeverAcquires,
    CommitHoldsLease,
    DeadHolderReclaimable,
    FailedReleaseRetried,
    LeaseMutualExclusion,
    LeaseReleasedWithinTtl,
    RefresherToleratesBlips,
    RefreshExtendsOwnRow,
    RetryNeverOverlapsLiveWorker,
    SummaryStartsUnderLease,
)
from sim.invariants.lineage import (
    AutomaticEndNeverRefusesRotation,
    CallerSessionFollowsRotation,
    ClosedWriteAdoptsLiveTip,
    DeliberateEndIsFinal,
    ExplicitCloseClearedAtTurnStart,
    LateContenderAdopts,
    NoOrphanParent,
    OneContinuationPerParent,
    SingleLiveHead,
)
from sim.invariants.liveness import TurnAfterQuietPersists
from sim.invariants.overflow import NoFalseAutoReset, OverflowRecoveryIgnoresCooldown, ReplyFitsContext
from sim.invariants.titles import TitleFollowsConversation, TitleNamesOneConversation
from sim.invariants.transcript import (
    AbortedAttemptLeavesParentUnchanged,
    AdoptedTipReachesAgent,
    AcknowledgedAppendsSurvive,
    ArchivedRowsWereInInput,
    CallerTranscriptOnlyThroughCommit,
    CommitChangesTranscript,
    CommitKeepsAUserTurn,
    CommitReachesCaller,
    DurableMessagesMatchRows,
    NoDuplicatePersistedTurn,
    RewindSlotsStayUnderWatermark,
    ToldMessagesKeptOnceInOrder,
    TurnAppendAllOrNothing,
    MessageCountMatchesActiveRows,
    CompletedTurnPersistsUserMessage,
    ReceivedMessageSurvivesGatewayCrash,
    ReceivedMessageWrittenOnce,
)

INVARIANTS: dict[str, type[Invariant]] = {
    invariant.name: invariant
    for invariant in (
        NoCommitAfterCancel, NoAdmissionAfterCtrlC, LeaseHeldAcrossCommit, SingleLiveHead, OneContinuationPerParent,
        NoOrphanParent,
        CallerSessionFollowsRotation, NoDuplicatePersistedTurn, AcknowledgedAppendsSurvive,
        AbortedAttemptLeavesParentUnchanged, CallerTranscriptOnlyThroughCommit, LeaseMutualExclusion,
        AppendsNeverRefusedByLease, LeaseReleasedWithinTtl, DeadHolderReclaimable, StaleAttemptWritesNoState,
        WouldGrowLatchesBreaker, IdleTimeoutWithinBounds, HungCommitReported, StaleJobNeverRuns,
        NextTurnPersistsAfterCtrlC, HardCancelFreesLease,
        HardCancelRestoresCooldown, CooldownNeverShortened, CancelledAttemptNeverAcquires, PoolAdmissionBounded,
        DeliberateEndIsFinal, ClosedWriteAdoptsLiveTip, RewindSlotsStayUnderWatermark,
        DurableMessagesMatchRows,
        NoProgressAfterGiveUp, LateContenderAdopts, CurrentAttemptOwnsCompressor, RefresherToleratesBlips,
        RefreshExtendsOwnRow, CommitHoldsLease, RetryNeverOverlapsLiveWorker,
        TurnFailsOnlyExpectedly, WorkerRaisesOnlyAfterFault,
        CancelNeverBeatsAdmittedCommit, SummaryStartsUnderLease, MessageCountMatchesActiveRows,
        CompletedTurnPersistsUserMessage, CommitBelowThresholdClearsStrikes, NoSummaryInsideCooldown,
        AbandonedAttemptFreesLease, TimeoutBacksOff, ArchivedRowsWereInInput,
        TitleFollowsConversation, TitleNamesOneConversation, NoFalseAutoReset, OverflowRecoveryIgnoresCooldown, CommitReachesCaller,
        AutomaticEndNeverRefusesRotation, ToldMessagesKeptOnceInOrder,
        FailedSummaryBacksOff, ExplicitCloseClearedAtTurnStart, NoRelabelAfterTerminal, TurnAfterQuietPersists,
        ReceivedMessageSurvivesGatewayCrash,
        RunningSummaryLabelled, CommitChangesTranscript, CtrlCSeesIdlePrompt, CooldownBlocksOnlyWhileInForce,
        AbandonedTurnStaysSilent,
        PoolRefusesOnlyWhenFull, AdmittedJobRuns, CaughtErrorsAreNotBugs, OldMessagesGetSummarized,
        CommitKeepsAUserTurn, ReplyFitsContext, TimedOutHostReturnsPromptly,
        SummarizedAttemptRefusedOnlyForACause, AdoptedTipReachesAgent,
        BreakerBlocksOnlyWhenLatched, FailedSummaryNeverCommits, FailedCommitBacksOff, HardCancelAbandonsSummary,
        ReceivedMessageWrittenOnce, CtrlCAbandonsOnlyThePressedTurn, CtrlCGraceCountedFromPress,
        CtrlCStopsTheTurnsLaterCompactions, IdleTimeoutFiresWhenDue,
        FailedReleaseRetried, TurnAppendAllOrNothing,
    )
}

__all__ = ["INVARIANTS", "Invariant", "InvariantSet", "SystemView", "Violation"]
