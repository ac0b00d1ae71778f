"""Invariants of compression lineage in the store: one live head, one continuation, no orphan parent."""

from __future__ import annotations

from typing import Any, Sequence

from sim.history import HistoryEvent
from sim.invariants.base import Invariant, Violation, attempt_of_holder

# Events after which the lineage in the store may have changed.
LINEAGE_EVENTS = (
    "commit.published", "session.reopened", "session.adopted", "process.crashed", "frontend.session_ended",
    "external.rotated",
)


def _is_fork(row: Any) -> bool:
    markers = ("_branched_from", "_delegate_from", "_reset_from")
    return any(row.model_config.get(marker) == row.parent_id for marker in markers)


def continuations(store: Any, sid: str) -> list[str]:
    """The children continuing `sid` (not forks of it), judged here rather than by the store's own lineage code."""
    return [child.id for child in store.children(sid) if not _is_fork(child)]


def lineage_roots(store: Any) -> dict[str, str]:
    """Each session's lineage root: follow compression parents; a fork (its marker names its parent) starts its own."""
    rows = {row.id: row for row in (store.get_session(sid) for sid in store.session_ids())}
    roots: dict[str, str] = {}
    for sid in rows:
        current, seen = sid, set()
        while rows[current].parent_id in rows and not _is_fork(rows[current]) and current not in seen:
            seen.add(current)
            current = rows[current].parent_id
        roots[sid] = current
    return roots


class _LineageCheck(Invariant):
    """Run a store check after each lineage-changing event and at the end."""

    def on_event(self, event: HistoryEvent) -> Violation | None:
        return self.check(event) if event.kind in LINEAGE_EVENTS else None

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        return self.check(history[-1] if history else None)

    def check(self, event: HistoryEvent | None) -> Violation | None:
        raise NotImplementedError


class SingleLiveHead(_LineageCheck):
    name = "single_live_head"
    races = ("R16", "R19", "R20")
    description = "Each compression lineage has at most one live (open) session."

    def check(self, event: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        live: dict[str, list[str]] = {}
        for sid, root in lineage_roots(store).items():
            if store.get_session(sid).ended_at is None:
                live.setdefault(root, []).append(sid)
        for root, heads in sorted(live.items()):
            if len(heads) > 1:
                return self.violation(f"lineage of {root} has {len(heads)} live heads: {', '.join(sorted(heads))}", event)
        return None


class OneContinuationPerParent(_LineageCheck):
    name = "one_continuation_per_parent"
    races = ("R19",)
    description = "A session closed by compression has exactly one continuation child, never two."

    def check(self, event: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        for sid in store.session_ids():
            children = continuations(store, sid)
            if len(children) > 1:
                return self.violation(f"{sid} has {len(children)} continuations: {', '.join(sorted(children))}", event)
        return None


class NoOrphanParent(_LineageCheck):
    name = "no_orphan_parent"
    races = ("R20",)
    description = "No reader ever sees a session closed by compression without a continuation child."

    def check(self, event: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        for sid in store.session_ids():
            row = store.get_session(sid)
            if row.end_reason == "compression" and not continuations(store, sid):
                return self.violation(f"{sid} is closed by compression but has no continuation", event)
        return None


class CallerSessionFollowsRotation(Invariant):
    name = "caller_session_follows_rotation"
    races = ("R18",)
    description = "When a compression returns to the host, the host's own session binding equals the agent's session."

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if event.kind == "host.returned" and event.fields["caller_session"] != event.fields["session"]:
            return self.violation(
                f"after attempt {event.fields['attempt']} the host is still bound to {event.fields['caller_session']} "
                f"but the agent moved to {event.fields['session']}", event,
            )
        return None


# The boundary reasons (§1.3): ends the user or a policy chose. Spelled out here rather than imported, so the
# checker does not trust the taxonomy of the code it checks.
DELIBERATE_END_REASONS = frozenset({
    "session_reset", "session_switch", "idle", "daily", "suspended", "resume_pending_expired", "new_session",
})


class DeliberateEndIsFinal(_LineageCheck):
    name = "deliberate_end_is_final"
    races = ("R11",)
    description = "A session ended on purpose (a reset, a switch, ...) stays ended for that reason; no rotation heals or re-closes it."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._ended: dict[str, tuple[str, HistoryEvent | None]] = {}
        self._seeded = False

    def on_event(self, event: HistoryEvent) -> Violation | None:
        if not self._seeded:
            self._seed()
        if event.kind == "frontend.session_ended":
            session, reason = event.fields["session"], event.fields.get("reason")
            if reason is None:  # the frontend's default stamp: read what it wrote
                row = self.system.store.get_session(session)
                reason = None if row is None else row.end_reason
            if reason in DELIBERATE_END_REASONS:
                self._ended.setdefault(session, (reason, event))
        return super().on_event(event)

    def _seed(self) -> None:
        """Sessions the world starts with already ended on purpose (once the store has sessions at all)."""
        store = self.system.store
        for sid in store.session_ids():
            self._seeded = True
            row = store.get_session(sid)
            if row.end_reason in DELIBERATE_END_REASONS:
                self._ended.setdefault(sid, (row.end_reason, None))

    def check(self, event: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        for sid, (reason, ended) in sorted(self._ended.items()):
            row = store.get_session(sid)
            if row.ended_at is None or row.end_reason != reason:
                now = "live again" if row.ended_at is None else f"ended as {row.end_reason}"
                return self.violation(f"{sid} was ended on purpose ({reason}) but is now {now}", ended, event)
        return None


class ClosedWriteAdoptsLiveTip(Invariant):
    name = "closed_write_adopts_live_tip"
    races = ("R15",)
    description = "A turn whose write hits a session closed by compression is persisted in its lineage's live head; it fails only if the lineage has none."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._closed: dict[str, tuple[HistoryEvent, str]] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "append.failed" and fields.get("error") == "SessionClosedByCompression" and fields.get("writer") is None:
            head = self._live_head(fields.get("session"))
            if head is not None:
                self._closed[event.task] = (event, head)
        elif event.kind == "append.ok":
            self._closed.pop(event.task, None)
        elif event.kind == "frontend.turn_failed" and event.task in self._closed:
            closed, head = self._closed.pop(event.task)
            return self.violation(
                f"the turn failed writing to {closed.fields['session']}, closed by compression, although its lineage "
                f"continues live in {head}", closed, event,
            )
        return None

    def _live_head(self, session: str | None) -> str | None:
        """The live session of `session`'s lineage other than itself, found by walking parents (not the store's tip walk)."""
        store = self.system.store
        roots = lineage_roots(store)
        if session not in roots:
            return None
        heads = [sid for sid, root in roots.items() if root == roots[session] and sid != session and store.get_session(sid).ended_at is None]
        return heads[0] if len(heads) == 1 else None


class LateContenderAdopts(Invariant):
    name = "late_contender_adopts"
    races = ("R19",)
    description = "An attempt that wins the lease of a session already closed by compression adopts its live tip and sits out; it never summarizes the closed session."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._on_closed: dict[str, HistoryEvent] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "lease.acquired":
            row = self.system.store.get_session(fields["session"])
            if row is not None and row.end_reason == "compression":
                self._on_closed[attempt_of_holder(fields["holder"]) or ""] = event
        elif event.kind == "compaction.summary_started" and fields["attempt"] in self._on_closed:
            acquired = self._on_closed[fields["attempt"]]
            return self.violation(
                f"attempt {fields['attempt']} took the lease of {acquired.fields['session']}, already closed by compression, "
                "and went on to summarize it instead of adopting its tip", acquired, event,
            )
        elif event.kind == "process.crashed":
            # a restarted process numbers its attempts from 1 again
            process = fields["process"]
            self._on_closed = {a: e for a, e in self._on_closed.items() if a.rsplit(".", 1)[0] != process}
        return None
