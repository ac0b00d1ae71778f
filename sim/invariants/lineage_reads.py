"""How invariants read a conversation (a lineage of sessions) in a target's store, judged here rather than by the
store's own lineage code: the rows the store named, continuations as opposed to forks, each session's lineage root
and each lineage's head, and whether a refused turn met a conversation its user ended on purpose."""

from __future__ import annotations

from collections.abc import Sequence

from contract.events import AppendFailed, Event
from contract.history import HistoryEvent
from contract.store import SessionRow, StoreView
from contract.vocabulary import DELIBERATE_END_REASONS, EXPLICIT_CLOSE_REASONS
from sim.invariants.invariant import Invariant, SystemView, handles

# The model_config keys by which a branch, delegate or reset child names the session it forked from.
FORK_MARKERS = ("_branched_from", "_delegate_from", "_reset_from")


def session_row(store: StoreView, sid: str) -> SessionRow:
    """The row of a session the store itself named (in `session_ids`, a lineage, a rotation): never missing."""
    row = store.get_session(sid)
    if row is None:
        raise LookupError(f"the store has no session {sid}, which it named")
    return row


def _is_fork(row: SessionRow) -> bool:
    return any(row.model_config.get(marker) == row.parent_id for marker in FORK_MARKERS)


def continuations(store: StoreView, sid: str) -> list[str]:
    """The children continuing `sid` (not forks of it), judged here rather than by the store's own lineage code."""
    return [child.id for child in store.children(sid) if not _is_fork(child)]


def lineage_roots(store: StoreView) -> dict[str, str]:
    """Each session's lineage root: follow compression parents; a fork (its marker names its parent) starts its own."""
    rows = {row.id: row for row in (session_row(store, sid) for sid in store.session_ids())}
    roots: dict[str, str] = {}
    for sid in rows:
        current, seen = sid, set()
        while (parent := rows[current].parent_id) in rows and not _is_fork(rows[current]) and current not in seen:
            seen.add(current)
            current = parent
        roots[sid] = current
    return roots


def live_sessions_by_root(store: StoreView) -> dict[str, list[str]]:
    """Each lineage's head: its live session(s); a lineage with none (ended on purpose, e.g. a session reset)
    keeps its transcript in its sessions that were not closed by compression."""
    heads: dict[str, list[str]] = {}
    ended: dict[str, list[str]] = {}
    for sid, root in lineage_roots(store).items():
        row = session_row(store, sid)
        if row.ended_at is None:
            heads.setdefault(root, []).append(sid)
        elif not row.rotated:
            ended.setdefault(root, []).append(sid)
    return {**{root: sids for root, sids in ended.items() if root not in heads}, **heads}


class JudgesRefusedTurns(Invariant):
    """An invariant that excuses a turn whose write was refused in a conversation the user ended on purpose.

    Such a turn fails closed by design: its session was closed by compression, no session of its conversation is
    live, and the last one has a deliberate end (a reset is final: deliberate_end_is_final) or an explicit close
    (cleared only by a turn of the host that routes it, #106459). No writer bound elsewhere may adopt either, so
    a terminal still bound to a closed ancestor has nowhere to write, and the reference fails that turn closed,
    naming compression, as R15's fix says. The store is read as the refusal happens: an explicit close may be
    cleared, and the conversation rotated on, before the run ends.
    """

    def __init__(self, system: SystemView) -> None:
        super().__init__(system)
        self._refused_ended: set[int] = set()  # seqs of the refusals that met a conversation ended on purpose

    @handles(AppendFailed)
    def write_refused(self, event: AppendFailed, record: HistoryEvent[AppendFailed]) -> None:
        if event.writer is None and event.error == "SessionClosedByCompression" and event.session is not None \
                and _ended_on_purpose(self.system.store, event.session):
            self._refused_ended.add(record.seq)

    def refused_in_ended_conversation(self, history: Sequence[HistoryEvent[Event]], start: HistoryEvent[Event], failed: HistoryEvent[Event]) -> bool:
        """The turn from `start` to `failed` failed because its write was refused in a conversation ended on purpose."""
        return any(record.seq in self._refused_ended and record.task == failed.task
                   for record in history[start.seq + 1:failed.seq])


def _ended_on_purpose(store: StoreView, sid: str) -> bool:
    """`sid`'s continuations end in a session ended on purpose, and no session of its lineage is live."""
    current, seen = sid, set()
    row = store.get_session(current)
    while row is not None and row.end_reason == "compression" and current not in seen:
        seen.add(current)
        children = continuations(store, current)
        if len(children) != 1:
            return False
        current = children[0]
        row = store.get_session(current)
    if row is None or row.end_reason not in DELIBERATE_END_REASONS | EXPLICIT_CLOSE_REASONS:
        return False
    roots = lineage_roots(store)
    return all(session_row(store, other).ended_at is not None for other, root in roots.items() if root == roots[sid])
