"""Attempt and compressor state (`attempt.py`, `compactor.py`)."""

from __future__ import annotations

from contract.events.base import Event, event, trace
from contract.ids import AttemptId, SessionId


@event
class AttemptClaimed(Event):
    """The attempt claimed its compressor generation."""

    kind = "attempt.claimed"
    feeds = ("R21",)
    attempt: AttemptId
    generation: int


@event
class AttemptRestored(Event):
    """A rollback put the pre-attempt snapshot back (the durable row first)."""

    kind = "attempt.restored"
    feeds = ("R1", "R21")
    attempt: AttemptId
    generation: int


@event
class AttemptRestoreSkippedStale(Event):
    """A rollback was skipped because a newer attempt has claimed (and not retired)."""

    kind = "attempt.restore_skipped_stale"
    feeds = ("R21",)
    attempt: AttemptId
    generation: int
    current: int = trace(note="the newest claimed generation not retired")


@event
class AttemptRetired(Event):
    """An attempt that sat out without working under the lease gave its claim back (#198 F1).

    A loser's newer claim must not make the lease owner's hard-cancel rollback look stale; invariants of the
    compressor's ownership read it with the claims.
    """

    kind = "attempt.retired"
    feeds = ("R21",)
    attempt: AttemptId
    generation: int


@event
class CompactionBlocked(Event):
    """The automatic gate refused the attempt."""

    kind = "compaction.blocked"
    feeds = ("R13", "R23")
    session: SessionId
    attempt: AttemptId
    reason: str = trace(note="`cooldown`, `structural_backoff` or `ineffective`")


@event
class CompactionWatermark(Event):
    """The watermark was captured, right after the lease was won."""

    kind = "compaction.watermark"
    feeds = ("R14",)
    session: SessionId
    attempt: AttemptId
    watermark: int | None = trace(note="null: the capture failed")


@event
class CompactionWatermarkFailed(Event):
    """The watermark read failed: the attempt sits out (`watermark_unknown`), failing closed.

    Without a watermark a commit cannot tell concurrent appends from its snapshot; the invariants that judge
    what a commit retired take the store's watermark at this moment as the bound the attempt knew of.
    """

    kind = "compaction.watermark_failed"
    feeds = ("R14",)
    session: SessionId
    attempt: AttemptId
    error: str = trace(note="the exception's repr")


@event
class CompactionInputReread(Event):
    """Under the lease the session held rows at or below the watermark that the snapshot lacked: the attempt
    works from the durable rows instead (#72631)."""

    kind = "compaction.input_reread"
    feeds = ("R14",)
    session: SessionId
    attempt: AttemptId
    rows: int = trace(note="how many durable rows it now works from")


@event
class CompactionInput(Event):
    """The durable rows the attempt works from (summarized or carried), just before its summary phase.

    A commit may retire only these (`archived_rows_were_in_input`).
    """

    kind = "compaction.input"
    feeds = ("R14",)
    session: SessionId
    attempt: AttemptId
    rows: list[int] = trace(note="the row ids, ascending; its own unflushed messages have none yet")


@event
class CompactionSummaryStarted(Event):
    """The provider call is dispatched (the attempt is now the working generation)."""

    kind = "compaction.summary_started"
    feeds = ("R8", "R21")
    attempt: AttemptId
    generation: int


@event
class CompactionSummaryProgress(Event):
    """A provider progress tick reached a live (uncancelled) attempt."""

    kind = "compaction.summary_progress"
    feeds = ("R9", "R26")
    attempt: AttemptId


@event
class CompactionSummaryDone(Event):
    """The provider returned a summary."""

    kind = "compaction.summary_done"
    feeds = ("R2",)
    attempt: AttemptId
    chars: int


@event
class CompactionStaticFallback(Event):
    """The provider failed and the attempt summarizes with a deterministic static summary instead (config
    `static_fallback_summary`); the candidate it builds is screened like any other."""

    kind = "compaction.static_fallback"
    feeds = ("R21",)
    attempt: AttemptId
    error: str


@event
class CompactionRefused(Event):
    """The attempt ends without a commit."""

    kind = "compaction.refused"
    feeds = ("R13", "R21")
    session: SessionId
    attempt: AttemptId
    reason: str = trace(note=(
        "`no_progress`, `would_grow`, `superseded`, `summary_failed`, `lock_contended`, `fence_cancelled`, "
        "`hard_cancelled`, `commit_fence_cancelled`, `ineffective`, `cooldown` (rechecked under the lease), "
        "`watermark_unknown` or `parent_rotated`"
    ))


@event
class CompactionStrike(Event):
    """A would-grow refusal bumped the persisted ineffective count."""

    kind = "compaction.strike"
    feeds = ("R13",)
    session: SessionId
    attempt: AttemptId
    strikes: int


@event
class CommitArchived(Event):
    """The in-place commit transaction succeeded."""

    kind = "commit.archived"
    feeds = ("R12", "R14")
    session: SessionId
    attempt: AttemptId
    rows: int


@event
class CommitPublished(Event):
    """The rotation transaction succeeded."""

    kind = "commit.published"
    feeds = ("R10", "R19", "R20")
    parent: SessionId
    child: SessionId
    attempt: AttemptId


@event
class CompactionCommitFailed(Event):
    """The admitted commit raised; the transcript snapshot is handed back."""

    kind = "compaction.commit_failed"
    feeds = ("R11", "R12")
    session: SessionId
    attempt: AttemptId
    error: str = trace(note="the exception's repr")


@event
class CompactionCommitted(Event):
    """The post-commit bookkeeping is done."""

    kind = "compaction.committed"
    feeds = ("R13",)
    session: SessionId
    attempt: AttemptId
    tokens: int
    tokens_before: int


@event
class CompactionCarriedUnread(Event):
    """Reading back the rows a commit carried after the summary (another writer's appends) failed: the commit
    stands, and the caller's transcript lacks those rows until the next attempt re-reads the session."""

    kind = "compaction.carried_unread"
    feeds = ("R14",)
    session: SessionId
    attempt: AttemptId
    error: str = trace(note="the exception's repr")


@event
class CompactionStrikeResetFailed(Event):
    """Clearing the breaker after a commit failed (the commit stands)."""

    kind = "compaction.strike_reset_failed"
    feeds = ("R13",)
    session: SessionId
    attempt: AttemptId
    error: str = trace(note="the exception's repr")


@event
class CompactionError(Event):
    """The worker raised something unexpected."""

    kind = "compaction.error"
    feeds = ("R21",)
    attempt: AttemptId
    error: str = trace(note="the exception's repr")


@event
class CompactionFinished(Event):
    """The worker's last act: its outcome."""

    kind = "compaction.finished"
    feeds = ("R1", "R3", "R6", "R8", "R11", "R19", "R25")
    session: SessionId
    attempt: AttemptId
    status: str = trace(note="`committed`, `rotated`, `adopted`, `unchanged`, `failed` or `error`")
    reason: str
