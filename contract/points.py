"""The named points where faults act: every `await rt.checkpoint(point)` of the reference, and `db.<op>`.

Under the simulator the scheduler may switch tasks at a point, and a fault plan (the World's checkpoint
hook, called with the point before the switch) may stall it (sleep in the hook) or fail it (raise from the
hook: the exception surfaces at that line of the reference, before the step it guards). On trio a point is
an ordinary checkpoint. `reference/POINTS.md` is rendered from this module (`python -m contract.docs`).

`reference/db.py` checkpoints `db.<op>` before every store call, and each call is one transaction, so a fault
at `db.<op>` happens before that transaction starts (nothing written); failures after a COMMIT are injected
with the store's own fault hook. `STORE_POINTS` documents the operations the reference calls; a scenario may
name any store operation.
"""

from __future__ import annotations

STORE_PREFIX = "db."


class Point(str):
    """A named point: its name (what `checkpoint` records and scenarios write), where it is, and what a
    stall and an error there mean."""

    where: str
    stall: str
    error: str

    def __new__(cls, name: str, *, where: str, stall: str, error: str) -> Point:
        point = super().__new__(cls, name)
        point.where, point.stall, point.error = where, stall, error
        return point

    @property
    def summary(self) -> str:
        """One line: where the point is."""
        return self.where


def store_point(op: str) -> str:
    """The point a store operation's call passes first."""
    return STORE_PREFIX + op


def _store(op: str, where: str, stall: str, error: str) -> Point:
    return Point(store_point(op), where=where, stall=stall, error=error)


# ---- the reference's own points --------------------------------------------------------------------

PROVIDER_SUMMARY = Point(
    "provider.summary",
    where="`ScriptedProvider.summarize`, before the call (runs in the isolated summary task)",
    stall="a provider slow to start: no progress, the idle budget runs",
    error="the summary call raises: `summary_failed` and a cooldown, whatever it raised (a plain `InterruptedError` is no Ctrl+C)",
)
PROVIDER_PROGRESS = Point(
    "provider.progress",
    where="after each progress tick, before the callback",
    stall="a stream that stalls mid-summary",
    error="the summary call raises mid-stream (as above)",
)
LEASE_REFRESH = Point(
    "lease.refresh",
    where="refresher, before each refresh transaction",
    stall="a refresher that falls behind (the lease may lapse: the commit then fails with `LeaseLostError`)",
    error="one missed refresh (counts toward the give-up budget)",
)
HOST_WAIT = Point(
    "host.wait",
    where="top of each host wait slice",
    stall="the host itself is slow to notice completion or timeout",
    error="the host's wait unwinds: `host.unwind` and a revoke (R5)",
)
COMPACTOR_AFTER_SUMMARY = Point(
    "compactor.after_summary",
    where="worker, right after the summary returned",
    stall="a window for a timeout or Ctrl+C after the summary, before the cooldown clear (R2)",
    error="attempt fails after its summary",
)
COMPACTOR_STATIC_FALLBACK = Point(
    "compactor.static_fallback",
    where="worker, after the provider failed, before it builds the static fallback summary (`static_fallback_summary`)",
    stall="a window for a successor attempt to start its summary while this one builds its fallback (R21)",
    error="attempt fails after its provider failed, without a fallback",
)
COMPACTOR_BEFORE_BEGIN_COMMIT = Point(
    "compactor.before_begin_commit",
    where="worker, right before `begin_commit`",
    stall="the classic race window: a cancel or revoke lands just before admission (R5, R6)",
    error="attempt fails before admission",
)
COMPACTOR_BEFORE_PARENT_FLUSH = Point(
    "compactor.before_parent_flush",
    where="rotation, after the ceiling capture, before flushing the turn to the parent",
    stall="a window for foreign appends between ceiling and flush (R14)",
    error="rotation fails before any write (R11)",
)
ATTEMPT_RESTORE_BODY = Point(
    "attempt.restore_body",
    where="hard-cancel rollback, under the compressor's serial lock, after the ownership check and before the durable write",
    stall="a slow rollback: a newer claim that arrives meanwhile waits for it to be whole (R21)",
    error="the rollback fails before writing anything; the lease is still released",
)
TURN_MODEL = Point(
    "turn.model",
    where="turn loop, where the main model would answer",
    stall="a slow model turn",
    error="the turn fails before its flush; `context_length_exceeded` is a provider-proven overflow, recovered first (R23)",
)
TURN_FLUSH = Point(
    "turn.flush",
    where="start of every flush",
    stall="a delayed flush (concurrent compaction may rotate the session first: R15)",
    error="the flush fails; the messages stay unpersisted in memory",
)

REFERENCE_POINTS: tuple[Point, ...] = (
    PROVIDER_SUMMARY, PROVIDER_PROGRESS, LEASE_REFRESH, HOST_WAIT, COMPACTOR_AFTER_SUMMARY, COMPACTOR_STATIC_FALLBACK,
    COMPACTOR_BEFORE_BEGIN_COMMIT, COMPACTOR_BEFORE_PARENT_FLUSH, ATTEMPT_RESTORE_BODY, TURN_MODEL, TURN_FLUSH,
)

# ---- the store operations the reference calls ----------------------------------------------------

STORE_POINTS: tuple[Point, ...] = (
    _store("get_session", "agent turn start, attempt (R19 check, rotation guard)", "slow session read",
           "turn or attempt fails (attempt: outcome `error`, lease released)"),
    _store("create_session", "`Agent.open`; an overflow's auto-reset (the fresh session)", "slow load",
           "the open fails; a reset fails after ending the old session"),
    _store("end_session", "an overflow's auto-reset (R23)", "slow", "the reset fails; the session stays live"),
    _store("active_messages", "`Agent.open`, adoption, the re-read under the lease (#72631)", "slow load",
           "the open or adoption fails; under the lease, the attempt fails before any summary"),
    _store("append_messages", "turn flush, rotation pre-publish flush", "slow write (appends never wait on the lease)",
           "flush fails (`append.failed`); during rotation the commit fails and the snapshot is handed back"),
    _store("try_acquire_lease", "attempt lease setup (fence lock held)",
           "the host's timeout spins on the fence lock until setup ends", "the attempt sits out (`lease.acquire_failed`)"),
    _store("refresh_lease", "refresher", "a late refresh", "one missed refresh; the budget is `int(ttl/interval)`"),
    _store("release_lease", "lease release (worker, fence hook)", "the lease stays held meanwhile", "the row stays until its TTL"),
    _store("active_watermark", "right after acquire; rotation ceiling", "a longer window for concurrent appends",
           "after acquire: the attempt sits out (`watermark_unknown`, fail closed; fault `db_read_failure`); "
           "as ceiling: the commit fails"),
    _store("set_session_title", "a /title or the auto-titler (scenario `title` drives)", "a later title",
           "the title is not set (`frontend.title_failed` for a taken title)"),
    _store("compression_tip", "adoption (flush, turn start, R19)", "slow lineage walk", "turn or attempt fails"),
    _store("reopen_orphaned", "turn start", "slow", "the turn fails"),
    _store("reopen_if_explicitly_closed", "turn start, on a session carrying an explicit close (#106459)", "slow",
           "the turn fails; the close stays"),
    _store("cooldown_row", "automatic gate; capture under the lease", "slow", "attempt fails before any summary"),
    _store("record_cooldown", "timeout, summary failure, split failure", "slow",
           "`cooldown.persist_failed`; the local deadline still blocks"),
    _store("clear_cooldown", "success path, forced attempt", "slow", "attempt fails (a hard cancel still rolls back)"),
    _store("restore_cooldown_row", "hard-cancel rollback", "the lease is held longer by the rolling-back worker",
           "rollback fails; lease still released"),
    _store("bump_ineffective", "would-grow refusal", "slow (commit admitted, so a cancel waits)", "attempt fails; no strike counted"),
    _store("reset_ineffective", "after a commit that ended below threshold", "slow",
           "`compaction.strike_reset_failed`; the commit stands"),
    _store("archive_and_compact", "in-place commit (fence lock held)",
           "a hung commit: the host waits and reports `host.commit_overrun` (R7)",
           "`compaction.commit_failed`, snapshot handed back, 60 s split cooldown (R12)"),
    _store("publish_child", "rotation commit (fence lock held)", "as above",
           "as above; the parent keeps only this turn's rows (R11)"),
)
