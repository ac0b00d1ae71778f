"""Invariants of session titles: one conversation shows one title, the one last given to it, by whom (R17)."""

from __future__ import annotations

from typing import Sequence

from contract.events import CommitPublished, Event, ExternalRotated, SessionTitled, SessionTitleIndeterminate
from contract.history import HistoryEvent
from sim.invariants.base import Invariant, Violation, handles
from sim.invariants.lineage import lineage_roots
from sim.invariants.transcript import live_sessions_by_root


class TitleFollowsConversation(Invariant):
    """R17, judged on what the reference wrote.

    A lease-less writer (an older agent sharing the database, the `unleased_rotation` fault) copies the
    parent's title to its child and leaves it on the parent, as the code before R17's fix did; that hidden
    copy is its doing, not the reference's, which clears it when it next gives the conversation a title (a
    title held by a compression ancestor moves). So a parent closed that way may keep the title it had then.
    """

    name = "title_follows_conversation"
    races = ("R17",)
    description = (
        "After a rotation and at the end, a conversation's live session shows the title last given to it, with "
        "the source that gave it (a carried auto title stays auto), and no other session of it shows one."
    )

    def __init__(self, system) -> None:
        super().__init__(system)
        self._given: dict[str, tuple[str, str | None, HistoryEvent | None]] = {}  # lineage root -> (title, source, event)
        self._left_behind: dict[str, str | None] = {}  # a parent a lease-less writer rotated -> the title it left there
        self._seeded = False

    @handles(Event)
    def any_event(self, event: Event, record: HistoryEvent) -> None:
        """The first event once the store has sessions reads the titles the world starts with."""
        self._seed()

    @handles(SessionTitled)
    def titled(self, event: SessionTitled, record: HistoryEvent) -> None:
        self._seed()
        if event.stored is not None:
            root = lineage_roots(self.system.store).get(event.session, event.session)
            self._given[root] = (event.stored, event.source, record)

    @handles(SessionTitleIndeterminate)
    def titled_maybe(self, event: SessionTitleIndeterminate, record: HistoryEvent) -> None:
        self._seed()
        roots = lineage_roots(self.system.store)
        root = roots.get(event.session, event.session)
        for sid in sorted(s for s, r in roots.items() if r == root):
            row = self.system.store.get_session(sid)
            if row.title_source == event.source and _is_variant(row.title, event.title):
                self._given[root] = (row.title, event.source, record)
                return

    @handles(ExternalRotated)
    def rotated_externally(self, event: ExternalRotated, record: HistoryEvent) -> None:
        self._seed()
        self._left_behind[event.parent] = self.system.store.get_session(event.parent).title

    @handles(CommitPublished)
    def published(self, event: CommitPublished, record: HistoryEvent) -> Violation | None:
        self._seed()
        return self._check(record)

    def at_end(self, history: Sequence[HistoryEvent]) -> Violation | None:
        return self._check(history[-1] if history else None)

    def _seed(self) -> None:
        """Titles the world starts with (read once the store has sessions)."""
        if self._seeded:
            return
        store = self.system.store
        for sid in store.session_ids():
            self._seeded = True
            row = store.get_session(sid)
            if row.title is not None and row.parent_id is None:
                self._given.setdefault(sid, (row.title, row.title_source, None))

    def _check(self, event: HistoryEvent | None) -> Violation | None:
        store = self.system.store
        roots = lineage_roots(store)
        heads = live_sessions_by_root(store)
        for root, (title, source, given) in sorted(self._given.items()):
            for sid in sorted(s for s, r in roots.items() if r == root):
                row = store.get_session(sid)
                shown = (row.title, row.title_source)
                if sid in heads.get(root, []) and shown != (title, source):
                    return self.violation(
                        f"{sid}, the live session of {root}'s conversation, shows {shown[0]!r} ({shown[1]}) but was "
                        f"given {title!r} ({source})", given, event,
                    )
                left_behind = sid in self._left_behind and self._left_behind[sid] == row.title
                if sid not in heads.get(root, []) and row.title is not None and row.rotated and not left_behind:
                    return self.violation(f"{sid}, closed by compression, still shows the title {row.title!r}", given, event)
        return None


def _is_variant(shown: str | None, title: str) -> bool:
    """Whether `shown` is `title` as the store keeps it: itself, or numbered because another conversation had it."""
    return shown == title or (shown is not None and shown.startswith(f"{title} #") and shown[len(title) + 2:].isdigit())
