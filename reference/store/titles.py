"""Session titles: one visible title per conversation, and who set it (derived < llm < user).

An automatic title (`derived`, `llm`) replaces only a title of strictly lower authority; a user's title always
applies; a legacy title with no source ranks as the user's. Titles are unique: a user's rename to a title
another conversation shows is refused, an automatic one is numbered ("T #2"). A title held by the session's
own compression ancestor is not another conversation's: it moves to the session. A rotation carries the
parent's title to the child unchanged, with its source, and a title given to a session closed by compression
(a terminal still bound to it) goes to the session its conversation continues or ended in (R17).
"""

from __future__ import annotations

import sqlite3

from contract.vocabulary import TITLE_SOURCES

from . import lineage, sessions
from .errors import TitleInUseError
from .rows import SessionRow

AUTHORITY = {source: rank for rank, source in enumerate(TITLE_SOURCES)}
NUMBERING_CAP = 1000


def holder(db: sqlite3.Connection, title: str) -> str | None:
    found = db.execute("SELECT id FROM sessions WHERE title = ? ORDER BY id LIMIT 1", (title,)).fetchone()
    return None if found is None else found[0]


def set_title(db: sqlite3.Connection, sid: str, title: str, *, source: str) -> str | None:
    """Give `sid` the title; returns the title stored, or None when an automatic title ranks too low."""
    if source not in AUTHORITY:
        raise ValueError(f"unknown title source {source!r}")
    row = sessions.require(db, sid)
    # FIX title-reaches-ended-conversation (R17): a conversation ended on purpose (a reset) is still listed under its last session; its closed parent is shown by no one
    end = lineage.chain_end(db, sid) if row.rotated else None
    # FIX title-follows-tip (R17): a session closed by compression is shown by no one; its conversation goes on in the live tip
    if end is not None and not end.rotated:
        sid, row = end.id, end
    if source != "user" and row.title is not None and _rank(row) >= AUTHORITY[source]:
        return None
    taken = holder(db, title)
    if taken is not None and taken != sid:
        if taken in compression_ancestors(db, sid):
            _write(db, taken, None, None)
        elif source == "user":
            raise TitleInUseError(title, taken)
        else:
            title = _numbered(db, title)
    _write(db, sid, title, source)
    return title


def carry_to_child(db: sqlite3.Connection, parent: SessionRow, child: str) -> None:
    """Rotation: the child shows the parent's title unchanged, and the parent gives it up."""
    if parent.title is None:
        return
    # FIX title-carried-with-source (R17): the transfer stamps 'user'; the parent's source, read before it, is put back
    source = parent.title_source
    # FIX title-leaves-rotated-parent (R17): the transfer clears only the title's first holder; an older writer's copy on an ancestor would keep it on the parent
    _write(db, parent.id, None, None)
    set_title(db, child, parent.title, source="user")
    _write(db, child, parent.title, source)


def compression_ancestors(db: sqlite3.Connection, sid: str) -> set[str]:
    """The sessions this one continues by compression (not the parents of a fork)."""
    found: set[str] = set()
    row = sessions.get(db, sid)
    while row is not None and row.parent_id is not None and not lineage.is_fork_of(row, row.parent_id):
        if row.parent_id in found or len(found) >= lineage.CHAIN_CAP:
            break
        found.add(row.parent_id)
        row = sessions.get(db, row.parent_id)
    return found


def _rank(row: SessionRow) -> int:
    return AUTHORITY.get(row.title_source or "user", AUTHORITY["user"])


def _numbered(db: sqlite3.Connection, title: str) -> str:
    for number in range(2, NUMBERING_CAP):
        candidate = f"{title} #{number}"
        if holder(db, candidate) is None:
            return candidate
    raise TitleInUseError(title, "every numbered variant")


def _write(db: sqlite3.Connection, sid: str, title: str | None, source: str | None) -> None:
    db.execute("UPDATE sessions SET title = ?, title_source = ? WHERE id = ?", (title, source, sid))
