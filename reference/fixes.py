"""The fix registry: every race fix in the reference, by stable name, with the race it closes and its home.

In the code each fix is marked by one comment line directly above its guarding code:

    # FIX <fix-name> (<race>): <why, one line>

so a curated mutant can revert exactly that fix by editing the few lines under its marker. `scan_markers`
reads the markers back; the registry test keeps the two in step (one marker per fix, no unregistered one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"#\s*FIX\s+(?P<name>[a-z0-9]+(?:-[a-z0-9]+)*)\s+\((?P<race>[^)]+)\):\s*(?P<why>\S.*)$")


@dataclass(frozen=True)
class Fix:
    name: str
    race: str  # as written in the marker: "R14", or several ("R16/R20")
    module: str
    summary: str


@dataclass(frozen=True)
class Marker:
    name: str
    race: str
    module: str
    line: int
    why: str


def _fixes(module: str, *entries: tuple[str, str, str]) -> tuple[Fix, ...]:
    return tuple(Fix(name, race, module, summary) for name, race, summary in entries)


FIXES: tuple[Fix, ...] = (
    *_fixes(
        "reference.agent",
        (
            "hard-cancel-through-fence", "R1",
            "Ctrl+C cancels the active attempt through its fence, waiting out an admitted commit",
        ),
        (
            "command-starts-unstopped", "R1",
            "a /compress typed at the prompt starts unstopped, as a turn does: a stop latched earlier does not reach it",
        ),
        (
            "compress-beside-turn-starts-unstopped", "R1",
            "a /compress typed while a turn runs holds a stop of its own: a Ctrl+C pressed on the turn before it does not reach it",
        ),
        (
            "adopt-loads-live-rows", "R15",
            "an adopted tip's transcript is its live rows: the rows a compaction there summarized stay out of the agent's context",
        ),
        (
            "adopt-tip-on-closed-write", "R15",
            "a write to a rotated session adopts the live tip once per flush, else fails closed naming compression",
        ),
        (
            "closed-write-follows-own-rotation", "R15/R18",
            "a write that failed on a session the agent's own attempt rotated meanwhile is retried in the tip it moved to",
        ),
        (
            "reopen-orphan-at-turn-start", "R20",
            "turn start reopens a compression-ended parent that has no continuation and no lease",
        ),
        ("rebind-caller-session", "R18", "after every attempt the host's own session binding follows the agent's"),
        (
            "late-commit-keeps-newer-transcript", "R21",
            "a commit that returns after a newer commit of the agent's compressor reached it leaves the agent's transcript alone",
        ),
        (
            "keep-appends-made-during-attempt", "R4",
            "a list an attempt hands back keeps, after it, the unsaved messages a turn appended after the attempt copied",
        ),
        (
            "routing-host-clears-explicit-close", "R11",
            "turn start clears a stale explicit close (tui_close, ...) on the session the agent still routes (#106459)",
        ),
        (
            "overflow-bypasses-cooldown", "R23",
            "the recovery of a provider-proven overflow compresses past the failure cooldown",
        ),
        (
            "transient-block-is-not-exhaustion", "R23",
            "an overflow whose recovery was blocked transiently (cooldown, backoff, busy lease) defers; only exhaustion resets",
        ),
    ),
    *_fixes(
        "reference.host",
        ("revoke-on-host-unwind", "R5", "any unwind of the host's wait revokes commit admission"),
        (
            "idle-charged-from-progress", "R9",
            "the wait slice is idle minus the silence so far, so the timeout fires at idle after the last progress",
        ),
        (
            "ceiling-keeps-lease-for-live-worker", "R25",
            "at the total ceiling the lease is freed only once the cancelled worker has exited",
        ),
        (
            "timeout-reaches-lease-setup", "R8",
            "a host timeout marks the fence given up lock-free, so a worker stalled in lease setup never summarizes after it",
        ),
        (
            "timeout-recorded-before-release", "R2",
            "a timed-out attempt's lease is freed only after the host recorded the timeout backoff",
        ),
        (
            "owed-timeout-recorded-on-unwind", "R2",
            "a host cancelled from outside after its timeout and before its record writes the record before its unwind frees the lease",
        ),
        (
            "timeout-record-survives-unwind", "R2",
            "once the host claimed its timeout record, the record and the lease's release finish even if the host is cancelled from outside",
        ),
        (
            "stop-ordered-at-timeout", "R2",
            "the host orders the user's stop and its own timeout when the timeout fires, not by who wins the fence lock",
        ),
        (
            "user-stop-at-ceiling-frees-lease", "R1",
            "a host whose attempt the user stopped frees its lease as a timed-out one does, at the ceiling too",
        ),
        (
            "user-stop-is-not-a-timeout", "R1",
            "a host whose attempt the user already stopped records no timeout cooldown when its wait runs out",
        ),
        (
            "timeout-arms-backoff", "R2",
            "a host timeout records a durable cooldown on the ladder (60/300/900 s by consecutive timeouts)",
        ),
        (
            "commit-overrun-visible", "R7",
            "a timed-out host waits for an admitted commit in slices and reports the overrun once",
        ),
    ),
    *_fixes(
        "reference.transcript",
        (
            "loaded-rows-stamped", "R10",
            "messages loaded from the store carry their row's persisted marker, so no flush writes them again",
        ),
        (
            "caller-takes-attempt-writes", "R10",
            "after an attempt wrote its copies of the caller's unsaved messages, each original (and unstamped copy) is marked maybe-written",
        ),
        (
            "failed-commit-hands-back-caller-dicts", "R10",
            "a failed commit hands the caller back its own dicts of its unsaved messages (stamped where the attempt wrote "
            "them), so every attempt paired with them sees the turn's flush",
        ),
        (
            "keep-turns-saved-after-commit", "R4",
            "a list an attempt hands back keeps, after it, the messages a turn saved above every row of that list (after the commit)",
        ),
        (
            "turn-append-atomic", "R10/R12",
            "a flush appends all its messages in one transaction: a failure leaves all of them durable or none",
        ),
        (
            "adopted-tip-skips-own-indeterminate-rows", "R10",
            "an adopted tip's loaded rows leave out the row an unsaved message may own (by platform id, or a maybe-written "
            "one's payload); the message stands for it",
        ),
    ),
    *_fixes(
        "reference.frontends",
        (
            "ctrl-c-abandons-pressed-turn", "R1",
            "a Ctrl+C's grace period waits on, and abandons, only the turn running at the press, never the next one",
        ),
        (
            "ctrl-c-grace-from-press", "R1",
            "a Ctrl+C's grace period runs from the press, beside the hard cancel, never after it",
        ),
    ),
    *_fixes(
        "reference.pool",
        ("pool-fail-fast", "R8", "admission is capped; a full pool refuses instead of queueing"),
    ),
    *_fixes(
        "reference.compactor",
        (
            "late-worker-leaves-lease-to-host", "R2",
            "a worker that outlives its host's timeout leaves its lease to the host, freed once the backoff is recorded",
        ),
        ("stale-job-skipped", "R8", "a job whose fence is cancelled or past its deadline when it starts does nothing"),
        ("snapshot-on-worker", "R4", "the worker deep-copies the caller's list and never touches the original"),
        (
            "watermark-after-acquire", "R14",
            "the watermark is captured right after the lease is won, so concurrent appends survive the commit",
        ),
        (
            "watermark-fail-closed", "R14",
            "an attempt whose watermark read failed sits out (lease released, nothing archived) instead of archiving everything",
        ),
        (
            "hard-cancel-full-rollback", "R1",
            "a hard-cancelled attempt restores the exact durable cooldown row and compressor state before releasing",
        ),
        (
            "cancel-frees-lease-by-hook", "R3",
            "the lease winner publishes a holder-scoped release hook, so a host that gives up frees exactly its lease",
        ),
        (
            "forced-clear-vetoed-when-cancelled", "R2",
            "a forced attempt's clear of the cooldown is vetoed, in the clear's own step, once its fence is cancelled",
        ),
        (
            "cooldown-rechecked-under-lease", "R2",
            "an automatic attempt re-reads the durable cooldown under the lease and sits out while it is live",
        ),
        (
            "reread-transcript-under-lease", "R14",
            "under the lease the attempt works from the durable rows up to its watermark when its snapshot lacks some",
        ),
        (
            "reread-skips-own-indeterminate-rows", "R10",
            "a re-read under the lease leaves out the row a maybe-written unsaved message may own; the message stands for it",
        ),
        (
            "take-in-carried-rows", "R14",
            "a commit's carried rows (another writer's appends during the summary) join the caller's transcript",
        ),
        (
            "adopt-rotated-parent-after-acquire", "R19",
            "an attempt whose session was rotated meanwhile adopts the tip and sits out",
        ),
        (
            "failed-commit-returns-caller-list", "R4",
            "a commit that raises hands the caller back its own transcript (stamped where the attempt flushed it), "
            "never the attempt's re-read input",
        ),
        (
            "restore-snapshot-on-failed-commit", "R12",
            "a commit that raises hands back the pre-attempt transcript, never the unstamped candidate",
        ),
        ("zombie-progress-suppressed", "R26", "a cancelled attempt's late progress ticks are dropped"),
        (
            "lock-loser-retires-claim", "R21",
            "an attempt that sits out without the lease retires its claim, so the lease owner's rollback still runs",
        ),
        (
            "superseded-candidate-discarded", "R21",
            "commit admission refuses a candidate whose generation is no longer the working one, judged in that step",
        ),
        (
            "would-grow-counts-strike", "R13",
            "a would-grow refusal adds a persisted ineffective strike; two latch the breaker",
        ),
        ("stamp-compacted-markers", "R12", "after an in-place commit every compacted dict is stamped with its row"),
        (
            "deliberate-end-preflush-guard", "R11",
            "a rotation's pre-publish flush refuses, in its own transaction, a parent publication refuses (a boundary, an explicit close)",
        ),
        (
            "rotation-ceiling-before-flush", "R14",
            "the clone ceiling is the parent's watermark before our own pre-publish flush",
        ),
        ("stamp-handoff-markers", "R10", "after publication every handoff dict is stamped with its child row"),
        (
            "commit-takes-caller-writes", "R10",
            "in the step of a commit's first write, a copy whose original the caller's turn wrote meanwhile leaves the candidate and the pre-publish flush",
        ),
        (
            "host-timeout-record-kept", "R2",
            "a hard stop after the host recorded the attempt's timeout rolls back all but that timeout cooldown",
        ),
        (
            "provider-exception-is-a-failure", "R1",
            "any exception the provider call raises (a generic InterruptedError too) is a summary failure with a cooldown",
        ),
    ),
    *_fixes(
        "reference.activity",
        (
            "heartbeat-silent-after-give-up", "R26",
            "an attempt's heartbeat writes no label once its fence is cancelled: the host's timeout label stays",
        ),
        (
            "heartbeat-is-no-progress", "R9",
            "a heartbeat tick relabels the status line only; the idle timeout is charged from the summary's own progress",
        ),
    ),
    *_fixes(
        "reference.attempt",
        (
            "claim-waits-for-rollback", "R21",
            "a claim takes the compressor's serial lock, so it cannot land between a rollback's check and its writes",
        ),
        ("stale-restore-noop", "R21", "a rollback by an attempt that is no longer the current claim writes nothing"),
        (
            "timeout-record-reclaims-retired-claim", "R21/R2",
            "the host's timeout record makes the timed-out attempt's given-back claim current again",
        ),
        ("owner-stamped-cancel-check", "R21", "only the attempt that installed the cancelled-check may clear it"),
    ),
    *_fixes(
        "reference.cooldown",
        (
            "cancelled-attempt-keeps-cooldown", "R2",
            "a success-path cooldown clear is a no-op for a cancelled or superseded attempt",
        ),
    ),
    *_fixes(
        "reference.fence",
        (
            "ctrl-c-presses-active-attempt", "R1",
            "a Ctrl+C presses only the active attempt it cancels: an older /compress still running beside it stays unstopped",
        ),
        (
            "lock-setup-spans-acquire", "R3",
            "lease acquire and hook publication happen under the fence lock; a dead attempt never acquires",
        ),
        (
            "cancel-loses-to-finished-commit", "R1",
            "a cancel that takes the fence lock after an admitted commit finished reports False and changes nothing",
        ),
        (
            "revoke-defers-during-commit", "R6",
            "a revoke releases the lease only if no commit holds the fence lock; otherwise finish_commit does",
        ),
        (
            "hard-refusal-rolls-back", "R1",
            "a commit refused because of a Ctrl+C whose cancel has not landed yet marks the attempt hard-stopped, so it rolls back",
        ),
        (
            "pressed-stop-refuses-commit", "R1",
            "commit admission refuses an attempt whose shared stop a Ctrl+C set, also one pressed before its fence existed",
        ),
        (
            "fence-stack-own-entry", "R22",
            "each attempt removes only its own fence registration; the active fence is the top",
        ),
    ),
    *_fixes(
        "reference.lease",
        ("refresher-tolerates-blips", "R25", "the refresher gives up only after ttl/interval consecutive failures"),
        (
            "failed-acquire-releases-own-row", "R3",
            "an acquire that raised may still have written its row; the sitting-out attempt releases it by holder",
        ),
        (
            "failed-release-retried", "R3/R25",
            "a release whose transaction failed leaves the lease marked held, so the attempt's own exit retries it",
        ),
    ),
    *_fixes(
        "reference.lease",
        (
            "reused-pid-is-not-the-holder", "R24",
            "a holder whose pid now runs a process started at another time is dead: the pid was recycled",
        ),
    ),
    *_fixes(
        "reference.store.messages",
        ("appends-ignore-lease", "R14/R1", "transcript appends never check the compression lease"),
    ),
    *_fixes(
        "reference.store.messages",
        (
            "platform-message-written-once", "R10",
            "an append skips a user message whose platform message id already has a live row in the session",
        ),
        (
            "indeterminate-append-written-once", "R10",
            "an append of a message whose earlier append raised skips it when its exact payload is live in the session",
        ),
        (
            "carried-rows-keep-their-order", "R14",
            "the rows a commit carries after its candidate (another writer's appends) are read, and cloned, oldest first",
        ),
        (
            "summarized-platform-message-written-once", "R10",
            "with no live row of its platform message id, an append finds the row its conversation summarized since",
        ),
    ),
    *_fixes(
        "reference.store.session_store",
        ("publish-atomic", "R20", "a rotation's child row, handoff and parent close are one transaction"),
    ),
    *_fixes(
        "reference.store.cooldown",
        ("cooldown-merge-max", "R2", "concurrent cooldown records keep the later deadline"),
        ("cooldown-exact-restore", "R1", "a rollback writes the raw row back and verifies it by reading it back"),
        ("rollback-keeps-later-timeout", "R2", "a rollback keeps a host's timeout deadline recorded since it read the row"),
    ),
    *_fixes(
        "reference.store.lineage",
        ("fork-marker-names-parent", "R16", "a fork marker counts only when it names the direct parent"),
        ("transitive-tip", "R15", "the compression tip walks every rotated hop, not just one"),
        (
            "adopt-automatically-ended-tip", "R11/R15",
            "a tip ended only by an automatic stamp (tui_shutdown, ...) is adopted like a live one",
        ),
        (
            "reopen-requires-no-continuation-and-no-lease", "R16/R20",
            "an orphan reopen needs no continuation child and no unexpired lease, in one transaction",
        ),
    ),
    *_fixes(
        "reference.store.commits",
        (
            "archive-verifies-lease", "R25",
            "the in-place commit verifies the holder owns an unexpired lease in its transaction",
        ),
        ("clone-concurrent-tail", "R14", "rows above the watermark are cloned live after the compacted set"),
        (
            "tail-rewind-bounded-at-watermark", "R14/#99545",
            "the tail_count rewind rows are chosen at or below the watermark",
        ),
        (
            "tail-rewind-only-carried-rows", "R14/R12",
            "the rewind retires as copies only the slot rows the candidate keeps verbatim; a summarized one stays searchable",
        ),
        (
            "publish-verifies-and-refreshes-lease", "R25",
            "publication refreshes and verifies the lease in its transaction",
        ),
        ("clone-foreign-tail-bounded", "R14", "only rows in (watermark, ceiling] are cloned into the child"),
        (
            "clone-appends-above-ceiling", "R14",
            "an append that lands after the ceiling read is cloned too; only the agent's own flushed rows are not",
        ),
        ("publish-refuses-deliberate-end", "R11", "publication refuses a parent ended by a deliberate boundary"),
        ("publish-heals-automatic-end", "R11", "publication heals an automatic end stamp instead of wedging"),
        ("close-parent-only-if-open", "R19", "the parent closes as compression only if still open (rowcount 1)"),
    ),
    *_fixes(
        "reference.store.lease",
        (
            "expired-or-dead-reclaim", "R24",
            "an expired lease or one held by a provably dead pid is reclaimable at once",
        ),
        ("refresh-never-inserts", "R3/R25", "a refresh only extends the holder's own row; it never re-creates one"),
        ("holder-qualified-release", "R3", "a release deletes only the caller's own holder row"),
        (
            "acquire-never-overwrites", "R3/R19",
            "the acquire inserts only into a free row and confirms it owns it; a live row makes the racer lose",
        ),
    ),
    *_fixes(
        "reference.store.titles",
        (
            "title-carried-with-source", "R17",
            "a rotation carries the parent's title to the child unchanged, with its source (never stamped 'user')",
        ),
        (
            "title-leaves-rotated-parent", "R17",
            "a rotation clears its parent's title itself, whatever other ancestor an older writer left the same title on",
        ),
        (
            "title-follows-tip", "R17",
            "a title given to a session closed by compression is given to the live tip its conversation continues in",
        ),
        (
            "title-reaches-ended-conversation", "R17",
            "a title given to a session closed by compression whose conversation was ended on purpose goes to its last session",
        ),
    ),
)

FIX_BY_NAME: dict[str, Fix] = {fix.name: fix for fix in FIXES}


def scan_markers(root: Path) -> list[Marker]:
    """Every `# FIX` marker under `root` (a package directory), with its dotted module name."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join((root.name, *path.relative_to(root).with_suffix("").parts))
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            match = MARKER.search(text)
            if match:
                found.append(Marker(match["name"], match["race"], module, number, match["why"]))
    return found
