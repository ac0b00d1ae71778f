"""Invariants of the durable transcript: nothing persisted twice, nothing acknowledged lost, no drift."""

from __future__ import annotations

import bisect
import sys
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from contract.events import (
    AppendFailed,
    AppendOk,
    AttemptClaimed,
    CommitArchived,
    CommitPublished,
    CompactionCarriedUnread,
    CompactionCommitFailed,
    CompactionCommitted,
    CompactionFinished,
    CompactionInput,
    CompactionWatermark,
    Event,
    ExternalRotated,
    FrontendTurnFailed,
    FrontendTurnSubmitted,
    GatewayTurnStarted,
    HostReturned,
    HostStarted,
    ProcessCrashed,
    ProcessRestarted,
    SessionAdopted,
    TurnPersisted,
)
from contract.events.turns import transcript_fingerprint
from contract.history import HistoryEvent
from contract.ids import AttemptId, SessionId
from contract.store import MessageRow
from contract.vocabulary import COMPRESSION_END, DELIBERATE_END_REASONS, EXPLICIT_CLOSE_REASONS
from sim.invariants.facts import COMMITS, CRASHES, AttemptTable
from sim.invariants.invariant import Invariant, SystemView, Violation, handles, per_run
from sim.invariants.lineage_reads import lineage_roots, live_sessions_by_root

NOT_COMMITTED = ("failed", "error", "unchanged")

# Ends after which the agent's own turn no longer writes to the session: a boundary the user chose, an explicit
# close, or a rotation's. An automatic stamp (tui_shutdown, ...) is none of them: the agent works on past it.
ENDED_FOR_GOOD = DELIBERATE_END_REASONS | EXPLICIT_CLOSE_REASONS | {COMPRESSION_END}


K = TypeVar("K", bound=Hashable)
Payload = tuple[str | None, str | None, float | None]  # (role, content, timestamp); an agent's message may lack one


def payload(row: MessageRow) -> Payload:
    """What makes two rows the same logical message."""
    return (row.role, row.content, row.timestamp)


def message_payload(message: Mapping[str, Any]) -> Payload:
    """The same for a message an agent holds (a dict of the live transcript)."""
    return (message.get("role"), message.get("content"), message.get("timestamp"))


def excerpt(content: str | None) -> str:
    """A message's text as a violation quotes it: its start, or None for a message with no text."""
    return repr(content if content is None else content[:40])


class _ReadsEachCommit(Invariant):
    """Reads each commit as it says it committed, right after it: in place (the session it compacted is the one it
    wrote) or by rotation (it wrote the child)."""

    @handles(CommitArchived)
    def archived(self, event: CommitArchived, record: HistoryEvent[CommitArchived]) -> Violation | None:
        return self._committed(event.attempt, event.session, event.session, record)

    @handles(CommitPublished)
    def published(self, event: CommitPublished, record: HistoryEvent[CommitPublished]) -> Violation | None:
        return self._committed(event.attempt, event.parent, event.child, record)

    def _committed(self, attempt: AttemptId, session: SessionId, written: SessionId,
                   commit: HistoryEvent[Event]) -> Violation | None:
        raise NotImplementedError


class _CreditsEachCommit(_ReadsEachCommit):
    """Credits each commit that took effect, once: those that said so, and those that never did (the call raised
    after it took effect, or its process died right after it), as the facts tell (sim/invariants/facts.py)."""

    learns = COMMITS

    def _committed(self, attempt: AttemptId, session: SessionId, written: SessionId,
                   commit: HistoryEvent[Event]) -> None:
        self._credit(attempt, session, written, commit)

    @handles(CompactionCommitFailed)
    def commit_failed(self, event: CompactionCommitFailed, record: HistoryEvent[CompactionCommitFailed]) -> None:
        if self.facts.commits.took_effect(event.session, event.attempt, record):
            self._credit(event.attempt, event.session, None, record)

    @handles(ProcessCrashed)
    def crashed(self, event: ProcessCrashed, record: HistoryEvent[ProcessCrashed]) -> None:
        for session, attempt in self.facts.commits.died_after_commit:
            self._credit(attempt, session, None, record)

    def _credit(self, attempt: AttemptId, session: SessionId, written: SessionId | None,
                commit: HistoryEvent[Event]) -> None:
        """`attempt`'s commit on `session` took effect by `commit`, writing `written` (None: it never said)."""
        raise NotImplementedError


class NoDuplicatePersistedTurn(Invariant):
    """No logical message (role, content, timestamp) is active twice in a live session, and no platform message (its
    platform message id) has two active user rows."""

    name = "no_duplicate_persisted_turn"
    races = ("R10", "R12")

    _clean: dict[str, CleanRows] = per_run(dict)  # session -> its active rows as last found without a duplicate

    @handles(AppendOk, CommitArchived, CommitPublished)
    def written(self, event: AppendOk | CommitArchived | CommitPublished,
            record: HistoryEvent[AppendOk | CommitArchived | CommitPublished]) -> Violation | None:
        return self._check(record)

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        return self._check(history[-1] if history else None)

    def _check(self, record: HistoryEvent[Event] | None) -> Violation | None:
        for row in self.system.store.live_sessions():
            violation = self._check_session(row.id, record)
            if violation is not None:
                return violation
        return None

    def _check_session(self, sid: str, record: HistoryEvent[Event] | None) -> Violation | None:
        """Only the rows above those last found clean are read while none of them repeats a key met before:
        a row's payload never changes and ids only grow, so the rows at or below are the clean ones less those
        retired since, and retiring a row makes no duplicate. A key met before (a retired row's, perhaps)
        sends the check back to the whole active set, which is what it judges and reports."""
        store = self.system.store
        known = self._clean.pop(sid, None)
        if known is None or not known.extend(store.active_messages(sid, above=known.above)):
            known = CleanRows()
            active = store.active_messages(sid)
            if not known.extend(active):
                return self._duplicated(sid, active, record)
        self._clean[sid] = known
        return None

    def _duplicated(self, sid: str, active: list[MessageRow], record: HistoryEvent[Event] | None) -> Violation:
        duplicated = first_repeated([payload(m) for m in active])
        if duplicated is not None:
            (role, content, _), copies = duplicated
            return self.violation(
                f"session {sid} holds {copies} active copies of the {role} message {excerpt(content)}", record,
            )
        twice = first_repeated(platform_user_ids(active))
        assert twice is not None, f"session {sid}: a duplicate key was found, then not"
        return self.violation(f"session {sid} holds {twice[1]} active user rows of platform message {twice[0]}", record)


def platform_user_ids(rows: Iterable[MessageRow]) -> list[str]:
    """The platform message ids of the user rows among `rows` (a gateway's received messages), in order."""
    return [row.platform_message_id for row in rows if row.role == "user" and row.platform_message_id]


@dataclass
class CleanRows:
    """A session's active rows up to id `above` as last found without a duplicate: their payloads and the
    platform message ids of their user rows (a superset of the keys still active there)."""

    above: int = 0
    payloads: set[Payload] = field(default_factory=set)
    platform_ids: set[str] = field(default_factory=set)

    def extend(self, rows: list[MessageRow]) -> bool:
        """Take in the rows above `above` (oldest first) if none repeats a key; False, unchanged, if one does."""
        payloads = [payload(row) for row in rows]
        platform_ids = platform_user_ids(rows)
        fresh_payloads, fresh_platform_ids = set(payloads), set(platform_ids)
        if (len(fresh_payloads) < len(payloads) or len(fresh_platform_ids) < len(platform_ids)
                or not fresh_payloads.isdisjoint(self.payloads) or not fresh_platform_ids.isdisjoint(self.platform_ids)):
            return False
        if rows:
            self.above = rows[-1].id
            self.payloads |= fresh_payloads
            self.platform_ids |= fresh_platform_ids
        return True


def first_repeated(keys: list[K]) -> tuple[K, int] | None:
    """The first key (in order of first appearance) that occurs more than once, and how often; the common
    case, all distinct, is told by a set's size without counting."""
    if len(set(keys)) == len(keys):
        return None
    counts = Counter(keys)
    return next((key, count) for key, count in counts.items() if count > 1)


class AcknowledgedAppendsSurvive(_CreditsEachCommit):
    """Every acknowledged append is, at the end, active in its lineage's head (its live session, or its last one if
    ended on purpose), or the first commit on its session after it summarized it under a watermark that covers it or
    from an input that held it (a copy that commit cloned onward is followed the same way)."""

    name = "acknowledged_appends_survive"
    needs = frozenset({'append.ok', 'turn.persisted', 'commit.archived', 'commit.published', 'compaction.commit_failed'})  # the rest only refines
    races = ("R14", "R12")

    def __init__(self, system: SystemView) -> None:
        super().__init__(system)
        self._acknowledged: list[tuple[TurnPersisted, HistoryEvent[Event]]] = []
        self._appended_at: dict[int, int] = {}  # row id -> the seq of the append that wrote it
        # session -> (seq, watermark, what its caller held when the attempt started, its input rows, by rotation) of
        # each commit on it
        self._commits: dict[str, list[tuple[int, int, frozenset[Payload], frozenset[int], bool]]] = {}
        self._highest: list[tuple[int, int]] = [(0, -1)]  # (a new highest row id an append reported, its seq)
        self._held_at_start: dict[AttemptId, frozenset[Payload]] = {}  # attempt -> its caller's messages then
        self._inputs: AttemptTable[AttemptId, frozenset[int]] = AttemptTable()  # attempt -> the rows it took as input

    @handles(HostStarted)
    def started(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        """What the caller held when its attempt started: the attempt works from that transcript, unsaved
        messages included, which its pre-publish flush writes above its watermark (the agent of a task the view
        does not know, a second process's, gives nothing, so nothing of its is excused)."""
        slot = self.slot_of_task(record.task)
        if slot is not None:
            self._held_at_start[event.attempt] = frozenset(map(message_payload, slot.agent.messages))

    @handles(CompactionInput)
    def took_input(self, event: CompactionInput, record: HistoryEvent[CompactionInput]) -> None:
        """The rows an attempt took as input are what its commit summarizes (as `told_messages_kept_once_in_order`
        credits them): on a target without a watermark (a hermes release) the only bound of it; the reference's
        input is below its watermark already."""
        self._inputs[event.attempt] = frozenset(event.rows)

    @handles(TurnPersisted)
    def persisted(self, event: TurnPersisted, record: HistoryEvent[TurnPersisted]) -> None:
        self._acknowledged.append((event, record))

    @handles(AppendOk)
    def appended(self, event: AppendOk, record: HistoryEvent[AppendOk]) -> None:
        """An id an append reports may be a row written before (its own earlier write, found again): a row is
        timed from its first write. Ids only grow, so a row is also older than the first id above it reported:
        a commit writes rows no append reports (its kept tail, the caller's unsaved messages it carried), and a
        turn whose stalled write is acknowledged later with one of them is judged from no later than that."""
        for row_id in event.ids:
            self._appended_at.setdefault(row_id, record.seq)
        if event.ids and max(event.ids) > self._highest[-1][0]:
            self._highest.append((max(event.ids), record.seq))

    @handles(ExternalRotated)
    def rotated_externally(self, event: ExternalRotated, record: HistoryEvent[ExternalRotated]) -> None:
        """A writer without the lease copied the head's active rows into a child: it summarized nothing, and a row it
        carried is judged by its copy there, as a commit's clone is. The copies are timed from now, so a commit that
        summarized one before a stalled write was acknowledged with it counts (a harness-only fault: the store read
        here is the one at this event)."""
        self._commits.setdefault(event.parent, []).append((record.seq, 0, frozenset(), frozenset(), False))
        for row in self.system.store.all_messages(event.child):
            self._appended_at.setdefault(row.id, record.seq)

    def _credit(self, attempt: AttemptId, session: SessionId, written: SessionId | None,
                commit: HistoryEvent[Event]) -> None:
        held, took = self._held_at_start.get(attempt, frozenset()), self._inputs.get(attempt, frozenset())
        watermark = self.facts.commits.watermark(attempt, session)
        self._commits.setdefault(session, []).append((commit.seq, watermark, held, took, written not in (None, session)))

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        store = self.system.store
        roots = lineage_roots(store)
        heads = live_sessions_by_root(store)
        copies: dict[tuple[str, Payload], list[MessageRow]] = {}
        for sid in roots:
            for message in store.all_messages(sid):
                copies.setdefault((roots[sid], payload(message)), []).append(message)
        rows = {row.id: row for same in copies.values() for row in same}
        live_payloads = {root: {payload(m) for sid in sids for m in store.active_messages(sid)} for root, sids in heads.items()}
        for event, record in self._acknowledged:
            row = rows.get(event.row)
            if row is None or payload(row) in live_payloads.get(roots[row.session_id], set()):
                continue
            since = min(self._appended_at.get(row.id, record.seq), record.seq, self._written_by(row.id))
            if not self._summarized(row, since, sorted(copies[(roots[row.session_id], payload(row))], key=lambda r: r.id)):
                return self.violation(
                    f"acknowledged {row.role} row {row.id} ({excerpt(row.content)}) is not active in the live head of its lineage "
                    "and no commit that found it live summarized it", record,
                )
        return None

    def _written_by(self, row_id: int) -> int:
        """The seq by which row `row_id` had been written: the first append that reported a higher id (or never)."""
        found = bisect.bisect_right(self._highest, (row_id, float("inf")))
        return self._highest[found][1] if found < len(self._highest) else sys.maxsize

    def _summarized(self, row: MessageRow, since: int, same_payload: list[MessageRow]) -> bool:
        """Whether the first commit on the row's session after `since` summarized it under a covering watermark,
        or took it as input; a row that commit carried onward is judged by its next copy.

        A carried row is superseded (a clone of the foreign tail) or archived above the watermark: a rotation's own
        pre-publish flush is archived in the parent while its handoff carries the row into the child, and it is
        acknowledged there when its turn fails (a host interrupt while the commit stalls) and the next turn finds it
        persisted. Such a flush row is summarized, though, when its message was one the caller already held unsaved
        when the attempt started (a turn whose write failed): it is in the summary's input. A rotation that took the
        row as input summarized it though the row stays active in the closed parent (hermes marks nothing there, and
        writes the tail it carries into the child with new timestamps)."""
        while True:
            commit = next((found for found in self._commits.get(row.session_id, []) if found[0] > since), None)
            if commit is None:
                return False
            _, watermark, held, took, rotation = commit
            if row.compacted and (row.id <= watermark or row.id in took or payload(row) in held) or rotation and row.id in took:
                return True
            later = [copy for copy in same_payload if copy.id > row.id]
            if not later:
                return False
            row, since = later[0], commit[0]


class AbortedAttemptLeavesParentUnchanged(Invariant):
    """An attempt that does not commit appends nothing to the session it tried to compact once that session has ended
    for good (a deliberate boundary, an explicit close, a rotation; not an automatic stamp).

    A rotation flushes the caller's unsaved turn into the parent before it publishes. While the parent is live, or
    carries only an automatic stamp the agent works past, that flush is the turn's own write, made once, so a later
    publish failure leaves the parent as the turn alone would have. An append to a parent that had ended for good is
    what grew sessions without bound (R11): no live head shows it, and every retry adds another copy.
    """

    name = "aborted_attempt_leaves_parent_unchanged"
    races = ("R11",)

    _worker_of: dict[str, AttemptId] = per_run(dict)  # the worker task -> its attempt
    _appends: dict[AttemptId, list[tuple[AppendOk, HistoryEvent[Event]]]] = per_run(dict)

    @handles(AttemptClaimed)
    def claimed(self, event: AttemptClaimed, record: HistoryEvent[AttemptClaimed]) -> None:
        self._worker_of[record.task] = event.attempt

    @handles(AppendOk)
    def appended(self, event: AppendOk, record: HistoryEvent[AppendOk]) -> None:
        if record.task not in self._worker_of:  # a turn's append, not an attempt's: no read needed
            return
        session = self.system.store.get_session(event.session)
        if session is None or (not session.live and session.end_reason in ENDED_FOR_GOOD):
            self._appends.setdefault(self._worker_of[record.task], []).append((event, record))

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> Violation | None:
        appends = self._appends.get(event.attempt) if event.status in NOT_COMMITTED else None
        if not appends:
            return None
        return self.violation(
            f"attempt {event.attempt} ended {event.status} but had appended "
            f"{sum(len(append.ids) for append, _ in appends)} rows to {appends[0][0].session}",
            *(appended for _, appended in appends), record,
        )


class CallerTranscriptOnlyThroughCommit(Invariant):
    """When a compression returns without committing, the caller's transcript is exactly what it was before, unless
    another attempt of the same process committed on the same session meanwhile (a /compress beside a turn's compaction:
    their agent's transcript is the one both work on).

    The caller's transcript is what the caller held when it called, as `host.returned` reports it: a turn of the
    same agent that ran meanwhile (a message typed while /compress ran) appends its own messages after it, which the
    attempt neither made nor could prevent. An edit, reorder or truncation of the caller's messages still shows.
    """

    name = "caller_transcript_only_through_commit"
    races = ("R4", "R12")

    _running: dict[AttemptId, SessionId] = per_run(dict)  # attempt -> its session, while its host waits
    _overtaken: set[AttemptId] = per_run(set)  # running attempts another attempt of their process committed over

    @handles(HostStarted)
    def started(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        self._running[event.attempt] = event.session

    @handles(CompactionCommitted)
    def committed(self, event: CompactionCommitted, record: HistoryEvent[CompactionCommitted]) -> None:
        for attempt, session in self._running.items():
            if attempt != event.attempt and attempt.process == event.attempt.process and session == event.session:
                self._overtaken.add(attempt)

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> Violation | None:
        self._running.pop(event.attempt, None)
        if event.attempt in self._overtaken:
            self._overtaken.discard(event.attempt)
            return None
        if event.status not in ("committed", "rotated", "adopted") and event.transcript_before != event.transcript_after:
            return self.violation(f"attempt {event.attempt} returned {event.status} but the caller's transcript changed", record)
        return None


class RewindSlotsStayUnderWatermark(Invariant):
    """An in-place commit keeps the verbatim rows among its tail_count rewind slots (the newest at or below its
    watermark) as hidden copies, never summarized; an append made meanwhile never takes their slot.

    Only a slot row the commit carried verbatim (its payload is live after the commit) must be kept as a hidden
    copy: the newest row under the watermark may have been summarized (a turn's unsaved message took its
    verbatim place), and a summarized row rightly stays marked summarized, searchable."""

    name = "rewind_slots_stay_under_watermark"
    settings = frozenset({'tail_count'})
    races = ("R14",)

    _watermarks: dict[AttemptId, tuple[int, HistoryEvent[Event]]] = per_run(dict)
    _retired_up_to: dict[str, int] = per_run(dict)  # per session: the newest row an earlier commit retired

    @handles(CompactionWatermark)
    def watermark(self, event: CompactionWatermark, record: HistoryEvent[CompactionWatermark]) -> None:
        if event.watermark is not None:
            self._watermarks[event.attempt] = (event.watermark, record)

    @handles(CommitArchived)
    def archived(self, event: CommitArchived, record: HistoryEvent[CommitArchived]) -> Violation | None:
        session, captured = event.session, self._watermarks.pop(event.attempt, None)
        rows = self.system.store.all_messages(session)
        floor = self._retired_up_to.get(session, 0)
        self._retired_up_to[session] = max((row.id for row in rows if not row.active), default=floor)
        count = self.system.config.tail_count
        if captured is None or count <= 0:
            return None
        watermark, captured_at = captured
        # the rows this commit found active at or below its watermark; the newest `count` are its rewind slots
        under = [row for row in rows if floor < row.id <= watermark]
        live = {payload(row) for row in rows if row.active}
        summarized = [row for row in under[-count:] if row.compacted and payload(row) in live]
        if summarized:
            row = summarized[0]
            return self.violation(
                f"attempt {event.attempt} marked its carried tail row {row.id} ({excerpt(row.content)}) summarized: "
                "a row appended above its watermark took the rewind slot", captured_at, record,
            )
        return None


class DurableMessagesMatchRows(Invariant):
    """Every message an agent holds as already durable says exactly what its row says: nothing edits the live transcript
    in place.

    A stored row is never edited or deleted (the store only inserts rows and clears their `active` and
    `compacted` flags), so a row read once is that row for the rest of the run: it is kept, and a check reads
    sessions only for rows it has not met, the live ones first."""

    name = "durable_messages_match_rows"
    races = ("R4",)

    _rows: dict[int, MessageRow] = per_run(dict)  # row id -> the row, as every later read would return it
    _read_above: dict[str, int] = per_run(dict)  # session -> the highest id read of it: ids only grow, so read on from there

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> Violation | None:
        return self._check(record)

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        return self._check(history[-1] if history else None)

    def _check(self, record: HistoryEvent[Event] | None) -> Violation | None:
        unread: Iterator[str] | None = None  # the sessions this check has not read yet, in reading order
        for name, slot in sorted(self.system.agents.items()):
            for message in slot.agent.messages:
                row_id = message.get("_row_id")
                if row_id is None:
                    continue
                row = self._rows.get(row_id)
                if row is None:
                    if unread is None:  # the last in id order first: a continuation's id ends in its minting time
                        unread = reversed(self.system.store.session_ids())
                    row = self._read_until(row_id, unread)
                held = message_payload(message)
                if row is None or held != payload(row):
                    found = "no such row exists" if row is None else (
                        f"the row is a {row.role} message of {len(row.content or '')} chars at t={row.timestamp}")
                    return self.violation(
                        f"agent {name} holds a {held[0]} message of {len(str(held[1]))} chars at t={held[2]} as durable "
                        f"row {row_id}, but {found}: the live transcript was edited in place", record,
                    )
        return None

    def _read_until(self, row_id: int, unread: Iterator[str]) -> MessageRow | None:
        """Row `row_id`, reading unread sessions until it is met (None once every session is read)."""
        store = self.system.store
        while row_id not in self._rows:
            sid = next(unread, None)
            if sid is None:
                return None
            rows = store.all_messages(sid, above=self._read_above.get(sid, 0))
            if rows:
                self._read_above[sid] = rows[-1].id
            self._rows.update((row.id, row) for row in rows)
        return self._rows[row_id]


class MessageCountMatchesActiveRows(Invariant):
    """At the end, every session's stored message_count equals its number of active rows."""

    name = "message_count_matches_active_rows"
    races = ("R10", "R14")

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        store = self.system.store
        for sid in store.session_ids():
            row = store.get_session(sid)
            active = len(store.active_messages(sid))
            if row is not None and row.message_count != active:
                return self.violation(f"session {sid} says message_count={row.message_count} but has {active} active rows")
        return None


class CompletedTurnPersistsUserMessage(Invariant):
    """A frontend turn that persisted its reply also made its user message durable (a user row with that text, or the
    row of an unanswered user message it was merged into)."""

    name = "completed_turn_persists_user_message"
    races = ("R10", "R12")

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        submitted: dict[str, tuple[str, HistoryEvent[Event]]] = {}  # task -> the text of its open turn, and the turn
        answered: list[tuple[str, HistoryEvent[Event], HistoryEvent[Event]]] = []
        for record in history:
            event = record.event
            if isinstance(event, FrontendTurnSubmitted):
                submitted[record.task] = (event.text, record)
            elif isinstance(event, TurnPersisted) and event.role == "assistant" and record.task in submitted:
                answered.append((*submitted.pop(record.task), record))
        if not answered:
            return None
        store = self.system.store
        durable = {k for sid in store.session_ids() for row in store.all_messages(sid) for k in keys(row)}
        for text, turn, reply in answered:
            if ("user", text) not in durable:
                return self.violation(f"the turn {text!r} persisted its reply but no user row holds its text", turn, reply)
        return None


class _JudgesWhatEachCommitWrote(_ReadsEachCommit):
    """Judges the session each commit wrote, once it is whole: in place the session itself, right after the commit;
    a rotation's child when its attempt ends, or before, when a newer attempt takes the child as its input (a stalled
    worker may end after its child was compacted again). A target may make the child before it writes the child's
    rows (hermes: `create_session`, then `replace_messages` in 0.19.0); one that writes them only after the attempt
    (hermes 0.16.0-0.18.2: the next flush) leaves a child with no row when the attempt ends, judged once it holds
    rows, at a newer attempt's input or at the end of the run: a child still without rows then lost its handoff
    (the process died before the flush)."""

    _rotated: dict[AttemptId, tuple[SessionId, SessionId, HistoryEvent[Event]]] = per_run(dict)  # attempt -> its parent, child, commit
    # children empty when their attempt ended: the attempt, its parent, the child, its commit
    _unwritten: list[tuple[AttemptId, SessionId, SessionId, HistoryEvent[Event]]] = per_run(list)

    @handles(CommitPublished)
    def published(self, event: CommitPublished, record: HistoryEvent[CommitPublished]) -> None:
        self._rotated[event.attempt] = (event.parent, event.child, record)

    @handles(CompactionInput)
    def input(self, event: CompactionInput, record: HistoryEvent[CompactionInput]) -> Violation | None:
        """A newer attempt takes a session as its input: the rotations into it that wrote rows are judged before it
        changes them."""
        store = self.system.store
        due = [(attempt, *rotated) for attempt, rotated in self._rotated.items()
               if rotated[1] == event.session and attempt != event.attempt and store.all_messages(event.session)]
        due += [pending for pending in self._unwritten if pending[2] == event.session and store.all_messages(pending[2])]
        for pending in due:
            self._rotated.pop(pending[0], None)
            if pending in self._unwritten:
                self._unwritten.remove(pending)
        self._took(event)
        return next(filter(None, (self._committed(*pending) for pending in due)), None)

    def _took(self, event: CompactionInput) -> None:
        """What the invariant notes of an attempt's input (before any commit of it)."""

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> Violation | None:
        rotated = self._rotated.pop(event.attempt, None)
        if rotated is None:
            return None
        if not self.system.store.all_messages(rotated[1]):
            self._unwritten.append((event.attempt, *rotated))
            return None
        return self._committed(event.attempt, *rotated)

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        """The rotations not judged yet: children empty when their attempt ended, and attempts that never ended. An
        empty child the agent rotated again before writing it (two compactions in one turn) carried its handoff on
        in memory: the next child is judged for it."""
        store = self.system.store
        unwritten = [pending for pending in self._unwritten if not getattr(store.get_session(pending[2]), "rotated", False)]
        pending = [*unwritten, *((attempt, *rotated) for attempt, rotated in self._rotated.items())]
        return next(filter(None, (self._committed(*found) for found in pending)), None)


class CommitChangesTranscript(_JudgesWhatEachCommitWrote):
    """A commit never writes its input back unchanged: a candidate that reads as the rows it summarized is refused (no
    progress) before it is written, so no commit's transcript begins with its input rows verbatim.

    Such a candidate changes nothing (§2 step 12): archiving the rows only to write them again grows the table by a
    copy of the transcript each time (R12) and tells the user the conversation was compressed. The screen compares
    marker-free messages: a row loaded without its summary flag made an unchanged summary-of-a-summary look new."""

    name = "commit_changes_transcript"
    races = ("R12",)

    _input: dict[AttemptId, tuple[SessionId, list[int]]] = per_run(dict)

    def _took(self, event: CompactionInput) -> None:
        self._input[event.attempt] = (event.session, event.rows)

    def _committed(self, attempt: AttemptId, session: SessionId, written: SessionId,
                   commit: HistoryEvent[Event]) -> Violation | None:
        taken, rows = self._input.pop(attempt, (None, []))
        if taken is None or not rows:
            return None
        store = self.system.store
        payloads = {row.id: row.payload for row in store.all_messages(taken)}
        before = [payloads[row_id] for row_id in rows if row_id in payloads]
        after = [row.payload for row in store.active_messages(written)]
        if after[:len(before)] == before:
            return self.violation(f"attempt {attempt} committed its input rows {rows} back unchanged into {written}", commit)
        return None


class CommitKeepsAUserTurn(_JudgesWhatEachCommitWrote):
    """A commit whose input held a message the user wrote (not a summary) leaves at least one such message live in the
    session it wrote: the user's turn is never compacted away entirely.

    The summary is filed under the user role but is not the user's words; a transcript of a summary and replies
    alone leaves the model nothing to answer, so the candidate anchors the last user message in front of a kept tail
    that has none (hermes-compaction §2 step 12). The input's rows are read as they were when the attempt took them.
    """

    name = "commit_keeps_a_user_turn"
    races = ("R13",)

    _had_user_turn: set[AttemptId] = per_run(set)

    def _took(self, event: CompactionInput) -> None:
        rows = set(event.rows)
        if any(row.id in rows and is_user_turn(row) for row in self.system.store.active_messages(event.session)):
            self._had_user_turn.add(event.attempt)

    def _committed(self, attempt: AttemptId, session: SessionId, written: SessionId,
                   commit: HistoryEvent[Event]) -> Violation | None:
        if attempt not in self._had_user_turn:
            return None
        self._had_user_turn.discard(attempt)
        if any(is_user_turn(row) for row in self.system.store.active_messages(written)):
            return None
        return self.violation(f"attempt {attempt}'s commit left no message of the user's live in {written}", commit)


def is_user_turn(row: MessageRow) -> bool:
    """A row the user wrote: the user role, and not a compaction's summary (filed under that role)."""
    return row.role == "user" and not row.is_summary


class ArchivedRowsWereInInput(_ReadsEachCommit):
    """A commit retires only rows its attempt worked from: in place, every row it marks summarized was in the attempt's
    input, whatever its watermark; by rotation, no row at or below the watermark that was not in the input is left
    behind in the closed parent."""

    name = "archived_rows_were_in_input"
    needs = frozenset({'commit.archived', 'commit.published', 'compaction.input'})  # the rest only refines
    races = ("R14",)

    # attempt -> (its rows, rows retired before, the event)
    _input: dict[AttemptId, tuple[set[int], set[int], HistoryEvent[Event]]] = per_run(dict)
    _watermark: dict[AttemptId, int] = per_run(dict)

    @handles(CompactionWatermark)
    def watermark(self, event: CompactionWatermark, record: HistoryEvent[CompactionWatermark]) -> None:
        watermark = event.watermark
        self._watermark[event.attempt] = self.system.store.active_watermark(event.session) if watermark is None else watermark

    @handles(CompactionInput)
    def input(self, event: CompactionInput, record: HistoryEvent[CompactionInput]) -> None:
        retired = {row.id for row in self.system.store.all_messages(event.session) if not row.active}
        self._input[event.attempt] = (set(event.rows), retired, record)

    def _committed(self, attempt: AttemptId, session: SessionId, written: SessionId,
                   commit: HistoryEvent[Event]) -> Violation | None:
        if attempt not in self._input or attempt not in self._watermark:
            return None
        rows, retired_before, seen = self._input[attempt]
        store, watermark = self.system.store, self._watermark[attempt]
        if written == session:
            # every row this commit marked summarized, whatever the watermark says: the summary must have seen it
            lost = [row for row in store.all_messages(session) if row.compacted and row.id not in retired_before]
        else:
            # rows left behind in the closed parent; those above the watermark are the rotator's own flush
            lost = [row for row in store.active_messages(session) if row.id <= watermark]
        unseen = [row for row in lost if row.id not in rows]
        if unseen:
            row = unseen[0]
            return self.violation(
                f"attempt {attempt}'s commit dropped {row.role} row {row.id} ({excerpt(row.content)}) of {session} (its "
                f"watermark {watermark}): the row was not in the attempt's input", seen, commit,
            )
        return None


class CommitReachesCaller(_ReadsEachCommit):
    """A committed compaction hands its caller exactly the live transcript its commit left in the session: a message
    another writer appended during the summary, which the commit carried after it, is in the agent's context from the
    next reply on (unless reading the carried rows back failed: then the next attempt's re-read takes them in), the
    agent keeps no row that is not live in its session and every live row its own turns saved after the commit. A commit
    a newer one superseded before it returned leaves the agent's transcript alone.

    A worker that stalls past its commit while the agent's next turn compacts again returns after that newer commit
    reached the agent, and the rows it left are no longer anyone's live transcript: such a late return is judged by
    what the agent then holds, only rows live in its session (until the newer commit's own return, the agent may hold
    the transcript from before it, as it does while any host waits). A turn typed while the host waited writes into
    the session the commit left, so a return drops none of the rows the agent's own turns saved after the commit.
    """

    name = "commit_reaches_caller"
    races = ("R14", "R4")
    learns = CRASHES

    # attempt -> what its commit left: the fingerprint of the session's live rows, the session, the commit
    _left: AttemptTable[AttemptId, tuple[str, SessionId, HistoryEvent[Event]]] = per_run(AttemptTable)
    # attempt -> the newer commit that rewrote its session: its attempt and its event
    _superseded: AttemptTable[AttemptId, tuple[AttemptId, HistoryEvent[Event]]] = per_run(AttemptTable)
    _newest_row: AttemptTable[AttemptId, int] = per_run(AttemptTable)  # attempt -> the highest row id its commit left live
    _saved: dict[str, list[int]] = per_run(dict)  # agent -> the rows its turns saved, in order

    def _committed(self, attempt: AttemptId, session: SessionId, written: SessionId,
                   commit: HistoryEvent[Event]) -> None:
        """The earlier commits on `session` that have not returned yet are superseded; this one left the written
        session's live rows as its transaction left them (read in the commit's own step)."""
        for earlier, left in self._left.items():
            if left[1] == session:
                self._superseded[earlier] = (attempt, commit)
        rows = self.system.store.active_messages(written)
        self._left[attempt] = (transcript_fingerprint(payload(row) for row in rows), written, commit)
        self._newest_row[attempt] = max((row.id for row in rows), default=0)
        self._superseded.pop(attempt, None)

    @handles(TurnPersisted)
    def persisted(self, event: TurnPersisted, record: HistoryEvent[TurnPersisted]) -> None:
        name = self.system.agent_of_task(record.task)
        if event.writer is None and name is not None:
            self._saved.setdefault(name, []).append(event.row)

    @handles(CompactionCarriedUnread)
    def carried_unread(self, event: CompactionCarriedUnread, record: HistoryEvent[CompactionCarriedUnread]) -> None:
        # a failed store read (an injected fault) leaves the carried rows to the next attempt's re-read
        self._left.pop(event.attempt, None)
        self._superseded.pop(event.attempt, None)

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> Violation | None:
        left = self._left.pop(event.attempt, None)
        newer = self._superseded.pop(event.attempt, None)
        newest_row = self._newest_row.pop(event.attempt, 0)
        if left is None or event.status not in ("committed", "rotated"):
            return None
        if newer is not None and newer[0] in self._left:
            return None  # the newer commit's host still waits: the agent holds what it held before it, judged then
        if newer is None and left[0] != event.transcript_after:
            return self.violation(
                f"attempt {event.attempt} committed to {left[1]} but handed its caller a transcript that differs from "
                "the session's live rows after the commit (a row the commit carried is missing from the agent's context)",
                left[2], record,
            )
        name = self.system.agent_of_task(record.task) or ""
        slot = self.system.agents.get(name)
        if slot is None:
            return None
        agent = slot.agent
        live = {row.id for row in self.system.store.active_messages(agent.session_id)}
        held = [message.get("_row_id") for message in agent.messages]
        stale = [row for row in held if row is not None and row not in live]
        if stale and newer is not None:
            return self.violation(
                f"attempt {event.attempt} committed to {left[1]}, which a newer commit rewrote before it returned, and "
                f"its return left the agent on {agent.session_id} holding rows that are not live there ({stale[:5]})",
                left[2], newer[1], record,
            )
        if stale:
            # the list handed back is right, but the agent keeps more: a turn's dicts appended again after the rows
            # the commit carried for them (the commit retired the turn's rows as it cloned them)
            return self.violation(
                f"attempt {event.attempt} committed to {left[1]} and its return left the agent on {agent.session_id} "
                f"holding rows that are not live there ({stale[:5]})", left[2], record,
            )
        missing = [row for row in self._saved.get(name, []) if row > newest_row and row in live and row not in held]
        if not missing or newer is not None:
            return None
        return self.violation(
            f"attempt {event.attempt} committed to {left[1]} and its return left the agent on {agent.session_id} "
            f"without rows its own turns saved there after the commit ({missing[:5]}): its next replies are made "
            "without them", left[2], record,
        )


Key = tuple[str, str | None]  # a message as the user knows it: its role and its text


@dataclass(frozen=True)
class Told:
    """A message the user was told was saved: a completed turn's user message or reply, or another writer's
    acknowledged append; `writer` is the terminal it was typed in, or the other writer that appended it."""

    writer: str
    key: Key | None  # None: the message is the row's own
    row: int  # the acknowledged row that places it in a lineage (a user message goes with its reply's row)
    record: HistoryEvent[Event]


class ToldMessagesKeptOnceInOrder(_CreditsEachCommit):
    """The user's model of the conversation holds: every message the user was told was saved (a completed turn's user
    message and reply, another writer's acknowledged append) is at the end live exactly once in its lineage's head, or
    was in the input of a committed compaction; and the live ones of each writer (a terminal, another writer such as a
    second device) keep the order they were sent in."""

    name = "told_messages_kept_once_in_order"
    needs = frozenset({'turn.persisted', 'frontend.turn_submitted', 'compaction.input', 'commit.archived', 'commit.published',
                       'compaction.commit_failed'})  # the rest only refines
    races = ("R10", "R12", "R14")

    _open: dict[str, tuple[str, str]] = per_run(dict)  # task -> the agent and text of its running turn
    _replied: dict[str, int] = per_run(dict)  # task -> where its running turn's told pair sits in `_told`
    _told: list[Told | None] = per_run(list)  # None: a pairing retracted
    _inputs: AttemptTable[AttemptId, set[Key]] = per_run(AttemptTable)
    _summarized: set[Key] = per_run(set)  # what committed compactions had in their input
    _sent: Counter[str | None] = per_run(Counter)  # each text the user typed, by how often they typed it

    @handles(FrontendTurnSubmitted)
    def submitted(self, event: FrontendTurnSubmitted, record: HistoryEvent[FrontendTurnSubmitted]) -> None:
        self._open[record.task] = (event.agent, event.text)
        self._replied.pop(record.task, None)
        self._sent[event.text] += 1

    @handles(TurnPersisted)
    def persisted(self, event: TurnPersisted, record: HistoryEvent[TurnPersisted]) -> None:
        """A turn's flush writes every message not yet durable, so an earlier turn that failed to save (the user
        was told it failed) has its question and reply written first, by this turn: its reply is the LAST
        assistant row the turn persists, each earlier one taking its place only until a later one comes."""
        if event.writer is not None:
            self._told.append(Told(f"{event.writer} writer", None, event.row, record))
        elif event.role == "user" and record.task in self._replied:
            # a question after a tentative reply: that reply was an earlier failed turn's, carried first (a turn
            # cut short by Ctrl+C writes its own question with no reply after it)
            at = self._replied.pop(record.task)
            self._told[at:at + 2] = [None, None]  # kept as gaps: other turns' pairs keep their places
        elif event.role == "assistant" and record.task in self._open:
            # the turn's own reply is the last one its flush writes: earlier ones are an unsaved failed turn's,
            # which the flush carries first (that turn was never told saved)
            agent, text = self._open[record.task]
            told = [Told(agent, ("user", text), event.row, record), Told(agent, None, event.row, record)]
            at = self._replied.setdefault(record.task, len(self._told))
            self._told[at:at + 2] = told

    @handles(CompactionInput)
    def input(self, event: CompactionInput, record: HistoryEvent[CompactionInput]) -> None:
        rows = set(event.rows)
        self._inputs[event.attempt] = {k for row in self.system.store.all_messages(event.session) if row.id in rows for k in keys(row)}

    def _credit(self, attempt: AttemptId, session: SessionId, written: SessionId | None,
                commit: HistoryEvent[Event]) -> None:
        self._summarized |= self._inputs.pop(attempt, set())

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        store = self.system.store
        roots = lineage_roots(store)
        rows = {row.id: row for sid in roots for row in store.all_messages(sid)}
        live = {root: [k for sid in sids for m in store.active_messages(sid) for k in keys(m)]
                for root, sids in live_sessions_by_root(store).items()}
        placed = [(told, told.key or key(rows[told.row]), roots[rows[told.row].session_id]) for told in self._told if told is not None and told.row in rows]
        ambiguous = self._sent_twice(placed)
        last_position: dict[tuple[str, str], tuple[int, Told, Key]] = {}  # (writer, lineage) -> its last live message's place
        for told, k, root in placed:
            if k in ambiguous:
                continue
            head = live.get(root, [])
            copies = head.count(k)
            if copies > 1 or (copies == 0 and k not in self._summarized):
                found = f"live {copies} times" if copies else "neither live nor in any committed compaction's input"
                return self.violation(f"the user was told the {k[0]} message {excerpt(k[1])} was saved, but it is {found}", told.record)
            if copies == 0:
                continue
            position = head.index(k)
            before = last_position.get((told.writer, root))
            if before is not None and before[0] > position:
                return self.violation(
                    f"{told.writer}'s {k[0]} message {excerpt(k[1])} now sits before {excerpt(before[2][1])}, which was sent "
                    "before it", before[1].record, told.record,
                )
            last_position[(told.writer, root)] = (position, told, k)
        return None

    def _sent_twice(self, placed: list[tuple[Told, Key, str]]) -> set[Key]:
        """The messages the user may rightly find live more than once, which therefore cannot be counted or placed:
        one told saved twice, a question the user typed more than once (a later turn may save a failed turn's copy
        of it, which the user was told failed, not lost), and the reply told with such a question."""
        told_twice = {k for k, count in Counter(k for _, k, _ in placed).items() if count > 1}
        typed_twice = {told.row for told, k, _ in placed if told.key is not None and self._sent[k[1]] > 1}
        return told_twice | {k for told, k, _ in placed if told.row in typed_twice}


def key(row: MessageRow) -> Key:
    return (row.role, row.content)


MERGED = "\n\n"  # what joins a user message to an unanswered one before it (hermes's `repair_message_sequence`)


def keys(row: MessageRow) -> list[Key]:
    """The messages a row holds: its own, and for a user row another user message was merged into (a target that
    repairs two user messages in a row by appending the second to the first after a blank line), the one merged."""
    if row.role == "user" and row.content is not None and MERGED in row.content:
        return [key(row), ("user", row.content.rsplit(MERGED, 1)[1])]
    return [key(row)]


class ReceivedMessageSurvivesGatewayCrash(Invariant):
    """With the gateway writing on receipt, a platform message whose turn went on to compact (its receipt write not
    failed) has a user row with its platform message id if the gateway's process dies during that turn.

    #104653: writing on receipt makes a platform message durable before its turn compacts (a summary may take
    minutes). No reply was shown yet, so the invariants of what the user was told see nothing when such a message is
    lost: the promise is the receipt write's own. A receipt write that failed is fail-open by design: the turn's flush
    is then the only writer.
    """

    name = "received_message_survives_gateway_crash"
    settings = frozenset({'gateway_writes_on_receipt'})
    races = ("R10",)

    _taken: dict[str, tuple[str, HistoryEvent[Event] | None]] = per_run(dict)  # gateway task -> its message's id, its compaction

    @handles(GatewayTurnStarted)
    def taken(self, event: GatewayTurnStarted, record: HistoryEvent[GatewayTurnStarted]) -> None:
        self._taken.pop(record.task, None)
        if event.platform_message_id is not None and self.system.config.gateway_writes_on_receipt:
            self._taken[record.task] = (event.platform_message_id, None)

    @handles(AppendFailed)
    def write_failed(self, event: AppendFailed, record: HistoryEvent[AppendFailed]) -> None:
        taken = self._taken.get(record.task)
        if taken is not None and taken[1] is None:  # the receipt write failed: fail-open, the flush writes it
            del self._taken[record.task]

    @handles(HostStarted)
    def compacting(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        taken = self._taken.get(record.task)
        if taken is not None and taken[1] is None:
            self._taken[record.task] = (taken[0], record)

    @handles(ProcessCrashed)
    def crashed(self, event: ProcessCrashed, record: HistoryEvent[ProcessCrashed]) -> Violation | None:
        dying = [task for task in self._taken if self._process_of_task(task) == event.process]
        taken = [self._taken.pop(task) for task in dying]
        for platform_id, compaction in taken:
            if compaction is not None and not self._durable(platform_id):
                return self.violation(
                    f"platform message {platform_id} was taken by a gateway that writes on receipt, yet no user row holds it "
                    f"when the gateway's process {event.process} died during its turn's compaction", compaction, record,
                )
        return None

    def _process_of_task(self, task: str) -> str | None:
        slot = self.slot_of_task(task)
        return None if slot is None else slot.spec.process

    def _durable(self, platform_id: str) -> bool:
        store = self.system.store
        return any(row.role == "user" and row.platform_message_id == platform_id
                   for sid in store.session_ids() for row in store.all_messages(sid))


class HeldRowsAreLive(Invariant):
    """Every message an agent holds as durable names its row, and that row is live in the agent's session, unless a
    commit retired it after the agent last loaded its transcript, or the store handed it back to the agent's own write.

    durable_messages_match_rows compares a held message with its row's payload, which never changes: an agent that
    loaded archived rows (summarized ones beside their summary), or held a durable message with no row, passed it. A
    commit the agent had not loaded is another process's, which it learns of only at its own next compaction; a row
    handed back to its own write may be one another writer summarized meanwhile. Judged where the agent works from
    what it holds: when it starts a compaction, when it has replied, and at the end."""

    name = "held_rows_are_live"
    races = ("R15", "R19")

    def __init__(self, system: SystemView) -> None:
        super().__init__(system)
        self._loaded: dict[str, int] = {}  # agent -> the seq at which it last loaded its transcript from the store
        self._rewritten = -1  # the seq of the last event that may have retired rows (a commit, a crash after one)
        self._written: dict[str, set[int]] = {}  # agent -> the rows the store handed back to its own writes
        self._read_at: AttemptTable[AttemptId, int] = AttemptTable()  # attempt -> the seq of the store state its outcome's list reflects

    @handles(SessionAdopted)
    def adopted(self, event: SessionAdopted, record: HistoryEvent[SessionAdopted]) -> None:
        name = self.system.agent_of_task(record.task)
        if event.attempt is not None:
            self._read_at[event.attempt] = record.seq
        elif name is not None:
            self._loaded[name] = record.seq  # a turn's adoption replaces the list in this step

    @handles(ProcessRestarted)
    def restarted(self, event: ProcessRestarted, record: HistoryEvent[ProcessRestarted]) -> None:
        for name, slot in self.system.agents.items():
            if slot.spec.process == event.process:
                self._loaded[name] = record.seq  # its agents reopened their sessions from the store

    @handles(CommitArchived, CommitPublished, CompactionCommitFailed, ExternalRotated, ProcessCrashed)
    def rewritten(self, event: Event, record: HistoryEvent[Event]) -> None:
        self._rewritten = record.seq
        if isinstance(event, (CommitArchived, CommitPublished)):
            self._read_at[event.attempt] = record.seq

    @handles(TurnPersisted)
    def persisted(self, event: TurnPersisted, record: HistoryEvent[TurnPersisted]) -> Violation | None:
        name = self.system.agent_of_task(record.task)
        if name is None:
            return None
        self._written.setdefault(name, set()).add(event.row)
        return self._judge(name, record) if event.role == "assistant" else None

    @handles(HostStarted)
    def compacting(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> Violation | None:
        name = self.system.agent_of_task(record.task)
        return None if name is None else self._judge(name, record)

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> None:
        """The list a commit or an adoption hands back is the store's as the commit (or the adoption's read) left
        it: a newer commit made before this return (another /compress of the agent, still waiting) may have
        retired its rows."""
        name = self.system.agent_of_task(record.task)
        read_at = self._read_at.pop(event.attempt, None)
        if name is not None and read_at is not None and event.status in ("committed", "rotated", "adopted"):
            self._loaded[name] = read_at

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        for name in sorted(self.system.agents):
            violation = self._judge(name, history[-1] if history else None)
            if violation is not None:
                return violation
        return None

    def _judge(self, name: str, record: HistoryEvent[Event] | None) -> Violation | None:
        slot = self.system.agents.get(name)
        if slot is None or self._rewritten > self._loaded.get(name, -1):
            return None
        agent = slot.agent
        live = {row.id for row in self.system.store.active_messages(agent.session_id)}
        own = self._written.get(name, set())
        for message in agent.messages:
            if not message.get("_db_persisted"):
                continue
            row = message.get("_row_id")
            if row is None or (row not in live and row not in own):
                found = "names no row" if row is None else f"holds row {row}, which is not live there"
                return self.violation(f"agent {name} on {agent.session_id} {found} as a durable {message.get('role')} "
                                      "message", record)
        return None


class TurnAppendAllOrNothing(Invariant):
    """A turn's flush writes its messages all or none: a turn the user was told failed at its flush leaves its question
    live only with a reply right after it (the next turn's flush writes both).

    A flush that wrote them one at a time and failed at the reply left the question live with no answer, a turn the
    user was told had failed half-saved. Judged at the end, for each terminal turn that failed at its own flush holding
    its reply (a turn stopped by Ctrl+C, or whose overflow recovery deferred it, has none), unless a compaction wrote a
    session since the turn began (a candidate may keep the question and summarize the reply; a rotation's pre-publish
    flush writes a turn's unsaved question before it has a reply)."""

    name = "turn_append_all_or_nothing"
    races = ("R10", "R12")

    def __init__(self, system: SystemView) -> None:
        super().__init__(system)
        self._open: dict[str, tuple[str, int]] = {}  # task -> the text of its running terminal turn, and when it began
        self._flush_failed: set[str] = set()  # tasks whose running turn had an append fail
        self._last_commit = -1  # the seq of the last compaction that wrote a session
        self._failed: list[tuple[str, HistoryEvent[Event]]] = []  # (question, failure) of each turn that failed at its flush
        self._typed: Counter[str] = Counter()

    @handles(FrontendTurnSubmitted)
    def submitted(self, event: FrontendTurnSubmitted, record: HistoryEvent[FrontendTurnSubmitted]) -> None:
        self._open[record.task] = (event.text, record.seq)
        self._flush_failed.discard(record.task)
        self._typed[event.text] += 1

    @handles(AppendFailed)
    def append_failed(self, event: AppendFailed, record: HistoryEvent[AppendFailed]) -> None:
        if event.writer is None and record.task in self._open:
            self._flush_failed.add(record.task)

    @handles(FrontendTurnFailed)
    def turn_failed(self, event: FrontendTurnFailed, record: HistoryEvent[FrontendTurnFailed]) -> None:
        question, began = self._open.get(record.task, ("", -1))
        if record.task in self._flush_failed and began > self._last_commit and self._replied(record.task, question):
            self._failed.append((question, record))

    def _replied(self, task: str, question: str) -> bool:
        """Whether the agent of `task` holds, unsaved, `question` and a reply after it: what its failed flush carried."""
        slot = self.slot_of_task(task)
        unsaved = [] if slot is None else [m for m in slot.agent.messages if not m.get("_db_persisted")]
        asked = next((i for i, m in enumerate(unsaved) if m["role"] == "user" and m["content"] == question), None)
        return asked is not None and any(m["role"] == "assistant" for m in unsaved[asked + 1:])

    @handles(CommitArchived, CommitPublished, CompactionCommitFailed, ExternalRotated)
    def rewritten(self, event: Event, record: HistoryEvent[Event]) -> None:
        self._failed.clear()  # a commit keeps the user turn a candidate anchors, and may summarize its reply
        self._last_commit = record.seq

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        store = self.system.store
        for question, failure in self._failed:
            if self._typed[question] > 1:
                continue  # typed again: which copy is whose cannot be told
            for session in store.live_sessions():
                rows = store.active_messages(session.id)
                at = next((i for i, row in enumerate(rows) if row.role == "user" and row.content == question), None)
                if at is not None and (at + 1 == len(rows) or rows[at + 1].role != "assistant"):
                    return self.violation(f"the turn {question[:40]!r} failed at its flush, yet its question is live in "
                                          f"{session.id} with no reply after it", failure)
        return None


class ReceivedMessageWrittenOnce(_CreditsEachCommit):
    """A platform message that a committed compaction summarized (its row was in the attempt's input, and the commit
    left no live row of it) is never written live again: the receipt write and the flush share one row.

    #104653: the row is found by its platform message id. Once summarized, an append that writes it live again puts
    it in the model's context twice, the second time after messages sent later; neither copy is an active duplicate,
    so no_duplicate_persisted_turn cannot see it.
    """

    name = "received_message_written_once"
    races = ("R10",)

    _inputs: AttemptTable[AttemptId, set[str]] = per_run(AttemptTable)  # attempt -> the platform message ids of its input rows
    # platform message id -> the attempt whose commit summarized it, and the event by which it had (its commit,
    # or its process's crash after a commit that never said so)
    _summarized: dict[str, tuple[AttemptId, HistoryEvent[Event]]] = per_run(dict)

    @handles(CompactionInput)
    def input(self, event: CompactionInput, record: HistoryEvent[CompactionInput]) -> None:
        rows = set(event.rows)
        received = set(platform_user_ids(row for row in self.system.store.all_messages(event.session) if row.id in rows))
        if received:
            self._inputs[event.attempt] = received

    def _credit(self, attempt: AttemptId, session: SessionId, written: SessionId | None,
                commit: HistoryEvent[Event]) -> None:
        received = self._inputs.pop(attempt, None)
        if not received:
            return
        if written is None:  # where a commit that never said so left the transcript: the child it published, else there
            children = self.system.store.children(session)
            written = SessionId(children[-1].id) if children else session
        kept = set(platform_user_ids(self.system.store.active_messages(written)))
        for platform_id in received - kept:
            self._summarized.setdefault(platform_id, (attempt, commit))

    @handles(AppendOk)
    def appended(self, event: AppendOk, record: HistoryEvent[AppendOk]) -> Violation | None:
        if not self._summarized or not event.ids:
            return None
        ids = set(event.ids)
        for row in self.system.store.active_messages(event.session, above=min(ids) - 1):
            platform_id = row.platform_message_id
            summarized = self._summarized.get(platform_id) if platform_id and row.id in ids and row.role == "user" else None
            if summarized is not None:
                attempt, commit = summarized
                return self.violation(
                    f"platform message {platform_id} was summarized by the commit of {attempt}, yet an append wrote it "
                    f"live again as row {row.id} of {event.session}", commit, record,
                )
        return None


class AdoptedTipReachesAgent(Invariant):
    """An agent whose attempt adopts a compression tip holds every row live in the tip at the adoption, as that row or
    as an unsaved message of its own with the same role, text and time.

    An agent that finds its session rotated by another writer goes on from the tip's live transcript (§2 step 8,
    R15/R19); an adoption that loses the tip's rows from memory goes unnoticed by every store check (nothing durable
    changed, the agent merely forgot the conversation). A tip row one of its own unsaved messages already owns (a
    failed write that committed all the same) may stand in memory as that message. A turn's adoption is not judged:
    it replaces the list in its own step, and its next write may come after a compaction rewrote the list again.
    """

    name = "adopted_tip_reaches_agent"
    races = ("R19",)
    learns = CRASHES

    _by_attempt: AttemptTable[AttemptId, tuple[list[MessageRow], SessionId, HistoryEvent[Event]]] = per_run(AttemptTable)

    @handles(SessionAdopted)
    def adopted(self, event: SessionAdopted, record: HistoryEvent[SessionAdopted]) -> None:
        if event.attempt is not None:
            self._by_attempt[event.attempt] = (self.system.store.active_messages(event.to_session), event.to_session, record)

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> Violation | None:
        adopted = self._by_attempt.pop(event.attempt, None)
        slot = self.slot_of_task(record.task)
        if adopted is None or event.status != "adopted" or slot is None:
            return None
        rows, tip, adoption = adopted
        held = {message.get("_row_id") for message in slot.agent.messages}
        payloads = {message_payload(m) for m in slot.agent.messages}
        missing = [row.id for row in rows if row.id not in held and payload(row) not in payloads]
        if not missing:
            return None
        return self.violation(f"{slot.spec.name} adopted {tip} but does not hold its live rows "
                              f"{missing[:5]}", adoption, record)

