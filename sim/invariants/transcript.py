"""Invariants of the durable transcript: nothing persisted twice, nothing acknowledged lost, no drift."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from sim.history import HistoryEvent
from sim.invariants.base import Invariant, Violation
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

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind in ("append.ok", "commit.archived", "commit.published"):
            return self._check(event)
        return None

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        return self._check(history[-1] if history else None)

    def _check(self, event: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        for row in store.live_sessions():
            counts = Counter(payload(message) for message in store.active_messages(row.id))
            duplicated = [key for key, count in counts.items() if count > 1]
            if duplicated:
                role, content, _ = duplicated[0]
                return self.violation(
                    f"session {row.id} holds {counts[duplicated[0]]} active copies of the {role} message {content[:40]!r}",
                    event,
                )
        return None


class AcknowledgedAppendsSurvive(Invariant):
    name = "acknowledged_appends_survive"
    races = ("R14", "R12")
    description = (
        "Every acknowledged append is, at the end, active in its lineage's head (its live session, or its last one "
        "if ended on purpose), or the first commit on its session after it summarized it under a watermark that "
        "covers it (a copy that commit cloned onward is followed the same way)."
    )

    def __init__(self, system) -> None:
        super().__init__(system)
        self._acknowledged: list[HistoryEvent] = []
        self._appended_at: dict[int, int] = {}  # row id -> the seq of the append that wrote it
        self._watermarks: dict[str, tuple[str, float]] = {}
        self._commits: dict[str, list[tuple[int, float]]] = {}  # session -> (seq, watermark) of each commit on it

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "turn.persisted":
            self._acknowledged.append(event)
        elif event.kind == "append.ok":
            self._appended_at.update(dict.fromkeys(fields.get("ids") or (), event.seq))
        elif event.kind in ("compaction.watermark", "compaction.watermark_failed"):
            watermark = fields.get("watermark")
            if watermark is None:  # not captured: the attempt still knew of no row appended after this moment
                watermark = self.system.store.active_watermark(fields["session"])
            self._watermarks[fields["attempt"]] = (fields["session"], watermark)
        elif event.kind in COMMITTED_SESSION:
            session = fields[COMMITTED_SESSION[event.kind]]
            captured = self._watermarks.get(fields["attempt"])
            watermark = captured[1] if captured is not None and captured[0] == session else 0
            self._commits.setdefault(session, []).append((event.seq, watermark))
        return None

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        store = self.system.store
        roots = lineage_roots(store)
        heads = live_sessions_by_root(store)
        copies: dict[tuple[str, tuple[str, str, float]], list[Any]] = {}
        for sid in roots:
            for row in store.all_messages(sid):
                copies.setdefault((roots[sid], payload(row)), []).append(row)
        rows = {row.id: row for same in copies.values() for row in same}
        live_payloads = {root: {payload(m) for sid in sids for m in store.active_messages(sid)} for root, sids in heads.items()}
        for event in self._acknowledged:
            row = rows.get(event.fields["row"])
            if row is None or payload(row) in live_payloads.get(roots[row.session_id], set()):
                continue
            since = self._appended_at.get(row.id, event.seq)
            if not self._summarized(row, since, sorted(copies[(roots[row.session_id], payload(row))], key=lambda r: r.id)):
                return self.violation(
                    f"acknowledged {row.role} row {row.id} ({row.content[:40]!r}) is not active in the live head of its lineage "
                    "and no commit that found it live summarized it", event,
                )
        return None

    def _summarized(self, row: Any, since: int, same_payload: list[Any]) -> bool:
        """Whether the first commit on the row's session after `since` summarized it under a covering
        watermark; a row that commit superseded instead (cloned onward) is judged by its next copy."""
        while True:
            commit = next(((seq, wm) for seq, wm in self._commits.get(row.session_id, []) if seq > since), None)
            if commit is None:
                return False
            if row.compacted:
                return row.id <= commit[1]
            later = [copy for copy in same_payload if copy.id > row.id]
            if not later:
                return False
            row, since = later[0], commit[0]


COMMITTED_SESSION = {"commit.archived": "session", "commit.published": "parent"}


class AbortedAttemptLeavesParentUnchanged(Invariant):
    name = "aborted_attempt_leaves_parent_unchanged"
    races = ("R11",)
    description = "An attempt that does not commit appends nothing to the session it tried to compact."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._worker_of: dict[str, str] = {}
        self._appends: dict[str, list[HistoryEvent]] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "attempt.claimed":
            self._worker_of[event.task] = event.fields["attempt"]
        elif event.kind == "append.ok" and event.task in self._worker_of:
            self._appends.setdefault(self._worker_of[event.task], []).append(event)
        elif event.kind == "compaction.finished" and event.fields["status"] in NOT_COMMITTED:
            appends = self._appends.get(event.fields["attempt"])
            if appends:
                return self.violation(
                    f"attempt {event.fields['attempt']} ended {event.fields['status']} but had appended "
                    f"{sum(len(a.fields['ids']) for a in appends)} rows to {appends[0].fields['session']}",
                    *appends, event,
                )
        return None


class CallerTranscriptOnlyThroughCommit(Invariant):
    name = "caller_transcript_only_through_commit"
    races = ("R4", "R12")
    description = "When a compression returns without committing, the caller's transcript is exactly what it was before."

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "host.returned" and fields["status"] not in ("committed", "rotated", "adopted"):
            if fields.get("transcript_before") != fields.get("transcript_after"):
                return self.violation(
                    f"attempt {fields['attempt']} returned {fields['status']} but the caller's transcript changed", event,
                )
        return None


class RewindSlotsStayUnderWatermark(Invariant):
    name = "rewind_slots_stay_under_watermark"
    races = ("R14",)
    description = "An in-place commit keeps its tail_count verbatim rows (the newest at or below its watermark) as hidden copies, never summarized; an append made meanwhile never takes their slot."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._watermarks: dict[str, HistoryEvent] = {}
        self._retired_up_to: dict[str, int] = {}  # per session: the newest row an earlier commit retired

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "compaction.watermark" and fields["watermark"] is not None:
            self._watermarks[fields["attempt"]] = event
        elif event.kind == "commit.archived":
            session, captured = fields["session"], self._watermarks.pop(fields["attempt"], None)
            rows = self.system.store.all_messages(session)
            floor = self._retired_up_to.get(session, 0)
            self._retired_up_to[session] = max((row.id for row in rows if not row.active), default=floor)
            count = self.system.config.tail_count
            if captured is None or count <= 0:
                return None
            # the rows this commit found active at or below its watermark; the newest `count` are its rewind slots
            under = [row for row in rows if floor < row.id <= captured.fields["watermark"]]
            summarized = [row for row in under[-count:] if row.compacted]
            if summarized:
                row = summarized[0]
                return self.violation(
                    f"attempt {fields['attempt']} marked its carried tail row {row.id} ({row.content[:40]!r}) summarized: "
                    "a row appended above its watermark took the rewind slot", captured, event,
                )
        return None


class DurableMessagesMatchRows(Invariant):
    name = "durable_messages_match_rows"
    races = ("R4",)
    description = "Every message an agent holds as already durable says exactly what its row says: nothing edits the live transcript in place."

    def on_event(self, event: HistoryEvent) -> Violation | None:
        return self._check(event) if event.kind == "host.returned" else None

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        return self._check(history[-1] if history else None)

    def _check(self, event: HistoryEvent | None) -> Violation | None:
        agents = getattr(self.system, "agents", {})  # the system's agents by name (each slot has .agent)
        store = self.system.store
        rows = None
        for name, slot in sorted(agents.items()):
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
                        f"row {row_id}, but {found}: the live transcript was edited in place", event,
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
        submitted: dict[str, HistoryEvent] = {}  # task -> its open turn
        answered: list[tuple[HistoryEvent, HistoryEvent]] = []
        for event in history:
            if event.kind == "frontend.turn_submitted":
                submitted[event.task] = event
            elif event.kind == "turn.persisted" and event.fields.get("role") == "assistant" and event.task in submitted:
                answered.append((submitted.pop(event.task), event))
        if not answered:
            return None
        store = self.system.store
        durable = {(row.role, row.content) for sid in store.session_ids() for row in store.all_messages(sid)}
        for turn, reply in answered:
            if ("user", turn.fields.get("text")) not in durable:
                return self.violation(f"the turn {turn.fields.get('text')!r} persisted its reply but no user row holds its text", turn, reply)
        return None


class ArchivedRowsWereInInput(Invariant):
    name = "archived_rows_were_in_input"
    races = ("R14",)
    description = (
        "A commit retires only rows its attempt worked from: a row at or below the attempt's watermark that was "
        "not in its input is neither summarized nor carried, so the commit loses it (in place: archived; by "
        "rotation: left behind in the closed parent)."
    )

    def __init__(self, system) -> None:
        super().__init__(system)
        self._input: dict[str, tuple[set[int], set[int], HistoryEvent]] = {}  # attempt -> (its rows, rows retired before, event)
        self._watermark: dict[str, int] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields, store = event.fields, self.system.store
        if event.kind == "compaction.watermark":
            watermark = fields["watermark"]
            self._watermark[fields["attempt"]] = store.active_watermark(fields["session"]) if watermark is None else watermark
        elif event.kind == "compaction.input":
            retired = {row.id for row in store.all_messages(fields["session"]) if not row.active}
            self._input[fields["attempt"]] = (set(fields["rows"]), retired, event)
        elif event.kind == "commit.archived":
            return self._judge(fields["attempt"], fields["session"], event, in_place=True)
        elif event.kind == "commit.published":
            return self._judge(fields["attempt"], fields["parent"], event, in_place=False)
        return None

    def _judge(self, attempt: str, session: str, commit: HistoryEvent, *, in_place: bool) -> Violation | None:
        if attempt not in self._input or attempt not in self._watermark:
            return None
        rows, retired_before, seen = self._input[attempt]
        store, watermark = self.system.store, self._watermark[attempt]
        if in_place:
            retired = [row for row in store.all_messages(session) if not row.active and row.id not in retired_before]
        else:
            retired = store.active_messages(session)
        unseen = [row for row in retired if row.id <= watermark and row.id not in rows]
        if unseen:
            row = unseen[0]
            return self.violation(
                f"attempt {attempt}'s commit dropped {row.role} row {row.id} ({row.content[:40]!r}) of {session}: it is "
                f"at or below the watermark {watermark} but was not in the attempt's input", seen, commit,
            )
        return None
