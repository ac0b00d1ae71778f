"""Invariants of the durable transcript: nothing persisted twice, nothing acknowledged lost, no drift."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from contract.events import (
    AppendOk,
    AttemptClaimed,
    CommitArchived,
    CommitPublished,
    CompactionFinished,
    CompactionWatermark,
    FrontendTurnSubmitted,
    HostReturned,
    TurnPersisted,
)
from contract.history import HistoryEvent
from contract.ids import AttemptId, SessionId
from sim.invariants.base import Invariant, Violation, handles
from sim.invariants.lineage import lineage_roots

NOT_COMMITTED = ("failed", "error", "unchanged")


def payload(row: Any) -> tuple[str, str, float]:
    """What makes two rows the same logical message."""
    return (row.role, row.content, row.timestamp)


def live_sessions_by_root(store: Any) -> dict[str, list[str]]:
    """Each lineage's head: its live session(s); a lineage with none (ended on purpose, e.g. a session reset)
    keeps its transcript in its sessions that were not closed by compression."""
    heads: dict[str, list[str]] = {}
    ended: dict[str, list[str]] = {}
    for sid, root in lineage_roots(store).items():
        row = store.get_session(sid)
        if row.ended_at is None:
            heads.setdefault(root, []).append(sid)
        elif not row.rotated:
            ended.setdefault(root, []).append(sid)
    return {**{root: sids for root, sids in ended.items() if root not in heads}, **heads}


class NoDuplicatePersistedTurn(Invariant):
    name = "no_duplicate_persisted_turn"
    races = ("R10", "R12")
    description = "No logical message (role, content, timestamp) is active twice in a live session."

    @handles(AppendOk, CommitArchived, CommitPublished)
    def written(self, event: AppendOk | CommitArchived | CommitPublished, record: HistoryEvent) -> Violation | None:
        return self._check(record)

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        return self._check(history[-1] if history else None)

    def _check(self, record: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        for row in store.live_sessions():
            counts = Counter(payload(message) for message in store.active_messages(row.id))
            duplicated = [key for key, count in counts.items() if count > 1]
            if duplicated:
                role, content, _ = duplicated[0]
                return self.violation(
                    f"session {row.id} holds {counts[duplicated[0]]} active copies of the {role} message {content[:40]!r}",
                    record,
                )
        return None


class AcknowledgedAppendsSurvive(Invariant):
    name = "acknowledged_appends_survive"
    races = ("R14", "R12")
    description = "Every acknowledged append is, at the end, active in its lineage's head (its live session, or its last one if ended on purpose), or was summarized by a commit whose watermark covers it."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._acknowledged: list[tuple[TurnPersisted, HistoryEvent]] = []
        self._watermarks: dict[AttemptId, tuple[SessionId, int]] = {}
        self._covered: dict[str, int] = {}

    @handles(TurnPersisted)
    def persisted(self, event: TurnPersisted, record: HistoryEvent) -> None:
        self._acknowledged.append((event, record))

    @handles(CompactionWatermark)
    def watermark(self, event: CompactionWatermark, record: HistoryEvent) -> None:
        watermark = event.watermark
        if watermark is None:  # not captured: the attempt still knew of no row appended after this moment
            watermark = self.system.store.active_watermark(event.session)
        self._watermarks[event.attempt] = (event.session, watermark)

    @handles(CommitArchived, CommitPublished)
    def committed(self, event: CommitArchived | CommitPublished, record: HistoryEvent) -> None:
        if event.attempt in self._watermarks:
            session, watermark = self._watermarks[event.attempt]
            self._covered[session] = max(self._covered.get(session, 0), watermark)

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        store = self.system.store
        roots = lineage_roots(store)
        heads = live_sessions_by_root(store)
        rows = {row.id: row for sid in roots for row in store.all_messages(sid)}
        live_payloads = {root: {payload(m) for sid in sids for m in store.active_messages(sid)} for root, sids in heads.items()}
        for event, record in self._acknowledged:
            row = rows.get(event.row)
            if row is None or row.id <= self._covered.get(row.session_id, 0):
                continue
            if payload(row) not in live_payloads.get(roots.get(row.session_id, ""), set()):
                return self.violation(
                    f"acknowledged {row.role} row {row.id} ({row.content[:40]!r}) is not active in the live head of its lineage "
                    "and no committed summary covers it", record,
                )
        return None


class AbortedAttemptLeavesParentUnchanged(Invariant):
    name = "aborted_attempt_leaves_parent_unchanged"
    races = ("R11",)
    description = "An attempt that does not commit appends nothing to the session it tried to compact."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._worker_of: dict[str, AttemptId] = {}  # the worker task -> its attempt
        self._appends: dict[AttemptId, list[tuple[AppendOk, HistoryEvent]]] = {}

    @handles(AttemptClaimed)
    def claimed(self, event: AttemptClaimed, record: HistoryEvent) -> None:
        self._worker_of[record.task] = event.attempt

    @handles(AppendOk)
    def appended(self, event: AppendOk, record: HistoryEvent) -> None:
        if record.task in self._worker_of:
            self._appends.setdefault(self._worker_of[record.task], []).append((event, record))

    @handles(CompactionFinished)
    def finished(self, event: CompactionFinished, record: HistoryEvent) -> Violation | None:
        appends = self._appends.get(event.attempt) if event.status in NOT_COMMITTED else None
        if not appends:
            return None
        return self.violation(
            f"attempt {event.attempt} ended {event.status} but had appended "
            f"{sum(len(append.ids) for append, _ in appends)} rows to {appends[0][0].session}",
            *(appended for _, appended in appends), record,
        )


class CallerTranscriptOnlyThroughCommit(Invariant):
    name = "caller_transcript_only_through_commit"
    races = ("R4", "R12")
    description = "When a compression returns without committing, the caller's transcript is exactly what it was before."

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent) -> Violation | None:
        if event.status not in ("committed", "rotated", "adopted") and event.transcript_before != event.transcript_after:
            return self.violation(f"attempt {event.attempt} returned {event.status} but the caller's transcript changed", record)
        return None


class RewindSlotsStayUnderWatermark(Invariant):
    name = "rewind_slots_stay_under_watermark"
    races = ("R14",)
    description = "An in-place commit keeps its tail_count verbatim rows (the newest at or below its watermark) as hidden copies, never summarized; an append made meanwhile never takes their slot."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._watermarks: dict[AttemptId, tuple[int, HistoryEvent]] = {}
        self._retired_up_to: dict[str, int] = {}  # per session: the newest row an earlier commit retired

    @handles(CompactionWatermark)
    def watermark(self, event: CompactionWatermark, record: HistoryEvent) -> None:
        if event.watermark is not None:
            self._watermarks[event.attempt] = (event.watermark, record)

    @handles(CommitArchived)
    def archived(self, event: CommitArchived, record: HistoryEvent) -> Violation | None:
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
        summarized = [row for row in under[-count:] if row.compacted]
        if summarized:
            row = summarized[0]
            return self.violation(
                f"attempt {event.attempt} marked its carried tail row {row.id} ({row.content[:40]!r}) summarized: "
                "a row appended above its watermark took the rewind slot", captured_at, record,
            )
        return None


class DurableMessagesMatchRows(Invariant):
    name = "durable_messages_match_rows"
    races = ("R4",)
    description = "Every message an agent holds as already durable says exactly what its row says: nothing edits the live transcript in place."

    @handles(HostReturned)
    def returned(self, event: HostReturned, record: HistoryEvent) -> Violation | None:
        return self._check(record)

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        return self._check(history[-1] if history else None)

    def _check(self, record: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        rows = None
        for name, slot in sorted(self.system.agents.items()):
            for message in slot.agent.messages:
                row_id = message.get("_row_id")
                if row_id is None:
                    continue
                if rows is None:
                    rows = {row.id: row for sid in store.session_ids() for row in store.all_messages(sid)}
                row = rows.get(row_id)
                held = (message.get("role"), message.get("content"), message.get("timestamp"))
                if row is None or held != payload(row):
                    found = "no such row exists" if row is None else (
                        f"the row is a {row.role} message of {len(row.content or '')} chars at t={row.timestamp}")
                    return self.violation(
                        f"agent {name} holds a {held[0]} message of {len(str(held[1]))} chars at t={held[2]} as durable "
                        f"row {row_id}, but {found}: the live transcript was edited in place", record,
                    )
        return None


class MessageCountMatchesActiveRows(Invariant):
    name = "message_count_matches_active_rows"
    races = ("R10", "R14")
    description = "At the end, every session's stored message_count equals its number of active rows."

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        store = self.system.store
        for sid in store.session_ids():
            row = store.get_session(sid)
            active = len(store.active_messages(sid))
            if row is not None and row.message_count != active:
                return self.violation(f"session {sid} says message_count={row.message_count} but has {active} active rows")
        return None


class CompletedTurnPersistsUserMessage(Invariant):
    name = "completed_turn_persists_user_message"
    races = ("R10", "R12")
    description = "A frontend turn that persisted its reply also made its user message durable (a user row with that text)."

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        submitted: dict[str, tuple[str, HistoryEvent]] = {}  # task -> the text of its open turn, and the turn
        answered: list[tuple[str, HistoryEvent, HistoryEvent]] = []
        for record in history:
            event = record.event
            if isinstance(event, FrontendTurnSubmitted):
                submitted[record.task] = (event.text, record)
            elif isinstance(event, TurnPersisted) and event.role == "assistant" and record.task in submitted:
                answered.append((*submitted.pop(record.task), record))
        if not answered:
            return None
        store = self.system.store
        durable = {(row.role, row.content) for sid in store.session_ids() for row in store.all_messages(sid)}
        for text, turn, reply in answered:
            if ("user", text) not in durable:
                return self.violation(f"the turn {text!r} persisted its reply but no user row holds its text", turn, reply)
        return None
