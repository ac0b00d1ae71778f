"""Invariants of compression lineage in the store: one live head, one continuation, no orphan parent."""

from __future__ import annotations

from typing import Any, Sequence

from sim.history import HistoryEvent
from sim.invariants.base import Invariant, Violation

# Events after which the lineage in the store may have changed.
LINEAGE_EVENTS = ("commit.published", "session.reopened", "session.adopted", "process.crashed", "frontend.session_ended")


def _is_fork(row: Any) -> bool:
    markers = ("_branched_from", "_delegate_from", "_reset_from")
    return any(row.model_config.get(marker) == row.parent_id for marker in markers)


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
                return self.violation(f"lineage of {root} has {len(heads)} live heads: {', '.join(sorted(heads))}", *[e for e in [event] if e])
        return None


class OneContinuationPerParent(_LineageCheck):
    name = "one_continuation_per_parent"
    races = ("R19",)
    description = "A session closed by compression has exactly one continuation child, never two."

    def check(self, event: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        for sid in store.session_ids():
            children = store.continuation_children(sid)
            if len(children) > 1:
                return self.violation(f"{sid} has {len(children)} continuations: {', '.join(sorted(children))}", *[e for e in [event] if e])
        return None


class NoOrphanParent(_LineageCheck):
    name = "no_orphan_parent"
    races = ("R20",)
    description = "No reader ever sees a session closed by compression without a continuation child."

    def check(self, event: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        for sid in store.session_ids():
            row = store.get_session(sid)
            if row.end_reason == "compression" and not store.continuation_children(sid):
                return self.violation(f"{sid} is closed by compression but has no continuation", *[e for e in [event] if e])
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
