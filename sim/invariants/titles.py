"""Invariants of session titles: one conversation shows one title, the one last given to it, by whom; one title
names one conversation (R17)."""

from __future__ import annotations

from collections.abc import Sequence

from contract.events import CommitPublished, Event, ExternalRotated, FrontendTitleFailed, SessionTitled, SessionTitleIndeterminate
from contract.history import HistoryEvent
from contract.vocabulary import TITLE_SOURCES
from sim.invariants.invariant import Invariant, Violation, handles, per_run
from sim.invariants.lineage_reads import lineage_roots, live_sessions_by_root, session_row

Given = tuple[str, str | None, HistoryEvent[Event] | None]  # a title given to a conversation: (title, source, by what)


class TitleFollowsConversation(Invariant):
    """After a rotation and at the end, a conversation's live session shows the title last given to it, with the source
    that gave it (a carried auto title stays auto), and no other session of it shows one; an automatic title replaces
    only a title of lower authority (never the user's) and is refused only by one of equal or higher; a numbered title
    takes the lowest free number.

    Judged on what the reference wrote: a lease-less writer (an older agent sharing the database, the
    `unleased_rotation` fault) copies the parent's title to its child and leaves it on the parent, as the code
    before R17's fix did. That hidden copy is its doing; the reference clears it when it next gives the
    conversation a title (a title held by a compression ancestor moves), so such a parent may keep the title it
    had then until a rotation of the reference's carries that title on.
    """

    name = "title_follows_conversation"
    races = ("R17",)
    # Titles given and rotations are the judgement; the lease-less writer's rotation and a title write of unknown
    # outcome only refine it (a target without them is still judged).
    needs = frozenset({"session.titled", "commit.published"})

    _given: dict[str, Given] = per_run(dict)  # lineage root -> the title last given to its conversation
    _left_behind: dict[str, str | None] = per_run(dict)  # a parent a lease-less writer rotated -> the title it left there

    @handles(SessionTitled)
    def titled(self, event: SessionTitled, record: HistoryEvent[SessionTitled]) -> Violation | None:
        root = lineage_roots(self.system.store).get(event.session, event.session)
        before = self._given.get(root)
        if event.stored is not None:
            self._given[root] = (event.stored, event.source, record)
        return self._judge_authority(event, before, record) or self._judge_numbering(event, before, record)

    def _judge_authority(self, event: SessionTitled, before: Given | None,
                         record: HistoryEvent[Event]) -> Violation | None:
        """An automatic title against the one its conversation showed: taken only over a lower authority."""
        if event.source == "user" or before is None:
            return None  # a user's title always applies; over no title, an automatic one always does
        title, source, given = before
        outranked = _authority(source) >= _authority(event.source)
        if event.stored is not None and outranked:
            return self.violation(f"the automatic title {event.stored!r} ({event.source}) replaced {title!r} "
                                  f"({source}), a title of equal or higher authority", given, record)
        if event.stored is None and not outranked:
            return self.violation(f"the automatic title {event.title!r} ({event.source}) was refused, yet the "
                                  f"conversation showed only {title!r} ({source})", given, record)
        return None

    def _judge_numbering(self, event: SessionTitled, before: Given | None,
                         record: HistoryEvent[Event]) -> Violation | None:
        """A numbered title takes the lowest free number: each lower variant was shown before the write, by some
        session now or by the conversation itself (the title it gave up for this one)."""
        if event.stored is None or event.stored == event.title:
            return None
        store = self.system.store
        shown = {session_row(store, sid).title for sid in store.session_ids()}
        if before is not None:
            shown.add(before[0])
        free = next((n for n in range(2, _number(event.stored, event.title)) if f"{event.title} #{n}" not in shown), None)
        if free is not None:
            return self.violation(f"{event.title!r} was numbered {event.stored!r}, yet {event.title!r} #{free} was "
                                  "free", record)
        return None

    @handles(SessionTitleIndeterminate)
    def titled_maybe(self, event: SessionTitleIndeterminate, record: HistoryEvent[SessionTitleIndeterminate]) -> None:
        roots = lineage_roots(self.system.store)
        root = roots.get(event.session, event.session)
        for sid in sorted(s for s, r in roots.items() if r == root):
            row = session_row(self.system.store, sid)
            if row.title is not None and self._same_source(row.title_source, event.source) and _is_variant(row.title, event.title):
                self._given[root] = (row.title, event.source, record)
                return

    @handles(ExternalRotated)
    def rotated_externally(self, event: ExternalRotated, record: HistoryEvent[ExternalRotated]) -> None:
        self._left_behind[event.parent] = session_row(self.system.store, event.parent).title

    @handles(CommitPublished)
    def published(self, event: CommitPublished, record: HistoryEvent[CommitPublished]) -> Violation | None:
        self._carried_off_copy(event)
        return self._check(record)

    def _carried_off_copy(self, event: CommitPublished) -> None:
        """The rotation's carry gives the child its title the way a /title does, so a title held by a compression
        ancestor moves to it: a lease-less writer's copy of that title is the reference's to clear now. Only the
        title's first holder moves (reference/FIXES.md, title-leaves-rotated-parent), so where the writer left
        several copies of it, none is judged."""
        title = session_row(self.system.store, event.child).title
        if title is None:
            return
        roots = lineage_roots(self.system.store)
        copies = [sid for sid, left in self._left_behind.items()
                  if left == title and sid != event.parent and roots.get(sid) == roots.get(event.child)]
        if len(copies) == 1:
            del self._left_behind[copies[0]]

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        return self._check(history[-1] if history else None)

    def at_start(self) -> None:
        """Titles the world starts with."""
        store = self.system.store
        for sid in store.session_ids():
            row = session_row(store, sid)
            if row.title is not None and row.parent_id is None:
                self._given.setdefault(sid, (row.title, row.title_source, None))

    def _same_source(self, shown: str | None, given: str | None) -> bool:
        """A title's source as the store shows it against the one that gave it; a store that keeps no source
        (hermes) is judged on the title alone."""
        return shown == given or not self.system.store.keeps_title_source

    def _check(self, event: HistoryEvent[Event] | None) -> Violation | None:
        store = self.system.store
        roots = lineage_roots(store)
        heads = live_sessions_by_root(store)
        for root, (title, source, given) in sorted(self._given.items()):
            for sid in sorted(s for s, r in roots.items() if r == root):
                row = session_row(store, sid)
                shown = (row.title, row.title_source)
                if sid in heads.get(root, []) and (row.title != title or not self._same_source(row.title_source, source)):
                    return self.violation(
                        f"{sid}, the live session of {root}'s conversation, shows {shown[0]!r} ({shown[1]}) but was "
                        f"given {title!r} ({source})", given, event,
                    )
                left_behind = sid in self._left_behind and self._left_behind[sid] == row.title
                if sid not in heads.get(root, []) and row.title is not None and row.rotated and not left_behind:
                    return self.violation(f"{sid}, closed by compression, still shows the title {row.title!r}", given, event)
        return None


class TitleNamesOneConversation(Invariant):
    """A title stored on a conversation is shown by no other conversation; a user's title is stored as typed; an
    automatic title is numbered, and a user's refused, only when another conversation shows it.

    The session list finds a conversation by its title. Sessions of one lineage are one conversation (a fork starts
    its own), so a rename to the conversation's own title, or to one only its closed ancestor keeps, is no conflict.
    """

    name = "title_names_one_conversation"
    races = ("R17",)

    @handles(SessionTitled)
    def titled(self, event: SessionTitled, record: HistoryEvent[SessionTitled]) -> Violation | None:
        if event.source == "user" and event.stored != event.title:
            return self.violation(f"the user's title {event.title!r} was stored as {event.stored!r}: one in use is "
                                  "refused, never renamed", record)
        if event.stored is None:
            return None
        if event.stored != event.title and self._other_holder(event.session, event.title) is None:
            return self.violation(f"the automatic title {event.title!r} was numbered {event.stored!r}, yet no other "
                                  "conversation shows it", record)
        other = self._other_holder(event.session, event.stored)
        if other is not None:
            return self.violation(f"{event.stored!r} was given to {event.session}'s conversation while {other}, "
                                  "of another conversation, shows it", record)
        return None

    @handles(FrontendTitleFailed)
    def refused(self, event: FrontendTitleFailed, record: HistoryEvent[FrontendTitleFailed]) -> Violation | None:
        if self._other_holder(event.session, event.title) is None:
            return self.violation(f"the user's title {event.title!r} for {event.session} was refused ({event.error}), "
                                  "yet no other conversation shows it", record)
        return None

    def _other_holder(self, sid: str, title: str) -> str | None:
        """A session outside `sid`'s conversation that shows `title`, if any."""
        store = self.system.store
        roots = lineage_roots(store)
        root = roots.get(sid, sid)
        return next((other for other in sorted(roots)
                     if roots[other] != root and session_row(store, other).title == title), None)


def _authority(source: str | None) -> int:
    """A title's authority: its source's rank; a legacy title with no source ranks as the user's."""
    return TITLE_SOURCES.index(source or "user")


def _number(shown: str, title: str) -> int:
    """The number of `title`'s numbered variant `shown` (0 when `shown` is not one)."""
    return int(shown[len(title) + 2:]) if shown != title and _is_variant(shown, title) else 0


def _is_variant(shown: str, title: str) -> bool:
    """Whether `shown` is `title` as the store keeps it: itself, or numbered because another conversation had it."""
    return shown == title or (shown.startswith(f"{title} #") and shown[len(title) + 2:].isdigit())
