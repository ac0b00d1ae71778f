"""Message dicts as the agent holds them, and the in-memory markers that tie them to durable rows.

A message is a plain dict (role, content, timestamp, optional platform_message_id / is_summary). Two
markers ride on it: `_db_persisted` (this dict is already a durable row: the ONLY flush-dedup authority,
R10/R12) and `_row_id` (which row); a third, `_maybe_written`, says an append of it raised, so it may be
durable all the same, and the store looks for its row before writing it again. Copies handed across the compaction boundary are stripped of them so a
committer has to re-stamp what it actually wrote.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from contract.events import AppendFailed, AppendOk
from contract.events.turns import transcript_fingerprint
from contract.ids import SessionId
from contract.runtime import Runtime
from contract.vocabulary import message_tokens
from reference.db import Database
from reference.store import MAYBE_WRITTEN, MessageRow

Message = dict[str, Any]

PERSISTED = "_db_persisted"
ROW_ID = "_row_id"


def new_message(role: str, content: str, timestamp: float, **extra: Any) -> Message:
    return {"role": role, "content": content, "timestamp": timestamp, **extra}


def is_persisted(message: Message) -> bool:
    return bool(message.get(PERSISTED))


def unpersisted(messages: Iterable[Message]) -> list[Message]:
    return [m for m in messages if not is_persisted(m)]


def appended_meanwhile(messages: Iterable[Message], taken: Sequence[Message], handed: Sequence[Message]) -> list[Message]:
    """What a turn appended to the caller's list after an attempt copied it (none of the dicts it `taken`, by
    identity) and the list the attempt `handed` back lacks: the unsaved messages the turn's flush still owes the
    session, and those it saved above every row of that list (after the commit, into the session it left)."""
    copied = {id(message) for message in taken}
    newest = max((m[ROW_ID] for m in handed if is_persisted(m)), default=0)
    # FIX keep-turns-saved-after-commit (R4): a turn that ran between a rotation's commit and its host's return wrote into the child; no list the attempt hands back has it
    return [m for m in messages if id(m) not in copied and (not is_persisted(m) or m[ROW_ID] > newest)]


def stamp(messages: Sequence[Message], row_ids: Sequence[int]) -> None:
    """Mark dicts as durable: `row_ids[i]` is the row written for `messages[i]`."""
    for message, row_id in zip(messages, row_ids):
        message[PERSISTED] = True
        message[ROW_ID] = row_id


class CallerCopies:
    """The caller's unsaved messages an attempt took, each paired with the attempt's copy of it.

    A /compress typed beside a running turn of the same agent takes that turn's unsaved messages: the turn may
    write one while the attempt works from its copy, and the attempt may write a copy the turn still owes.
    Each writer takes the other's write in the step of its own, or the message is live twice (R10).
    """

    def __init__(self, originals: Sequence[Message], copies: Sequence[Message]) -> None:
        assert len(originals) == len(copies), "an attempt copies each unsaved message of its caller once"
        self._pairs = list(zip(originals, copies))

    def take_caller_writes(self) -> list[Message]:
        """Stamp each copy whose original the caller wrote since with the caller's row; the copies so stamped
        are no longer the attempt's to write: the caller's row stands for them."""
        taken = []
        for original, copy in self._pairs:
            if is_persisted(original) and not is_persisted(copy):
                stamp([copy], [original[ROW_ID]])
                taken.append(copy)
        return taken

    def handed_back(self, given: Sequence[Message]) -> list[Message]:
        """`given` (the caller's list as the attempt copied it) with each unsaved message the caller's own dict again,
        stamped with its copy's row if the attempt wrote that copy (a rotation's pre-publish flush): what a failed
        commit hands back.

        Not a stand-in: a /compress typed beside the same turn pairs with the caller's own dicts, and would never see
        the turn's flush of a stand-in; it writes its copy beside the turn's row (R10)."""
        originals = iter(self._pairs)
        result = []
        for message in given:
            if not is_persisted(message):
                # FIX failed-commit-hands-back-caller-dicts (R10): a stand-in's flush is a write no attempt paired with the caller sees; a /compress beside the turn writes its copy again
                message, copy = next(originals)
                if is_persisted(copy) and not is_persisted(message):
                    stamp([message], [copy[ROW_ID]])
            result.append(message)
        return result

    def hand_back_writes(self) -> None:
        """After the attempt wrote its copies (or its write raised, maybe after the COMMIT): each original still
        unsaved, and each unstamped copy (a failed commit hands those back), is marked maybe-written, so a flush of
        it (even one already waiting at the store) looks for its live row in the session it writes to.

        Not stamped with the copy's row: a rotation's pre-publish flush wrote that row into the parent, and a turn
        that finds the session rotated (and maybe compacted again) writes the message where it is live now."""
        # FIX caller-takes-attempt-writes (R10): an original left unmarked is written again by its turn's flush, beside the attempt's copy
        for original, copy in self._pairs:
            for message in (original, copy):
                if not is_persisted(message):
                    message[MAYBE_WRITTEN] = True


def rows_not_written_for(rows: Sequence[MessageRow], pending: Sequence[Message]) -> list[MessageRow]:
    """`rows` without the one each message of `pending` may own already, the live row the store's next append of
    it hands back instead of writing it (`store.messages.append`): a platform user message's row by its platform
    message id (the gateway's receipt write, or an append that raised after its COMMIT), a maybe-written
    message's by its exact payload (an earlier append of it raised, maybe after its COMMIT). Each row stands for
    one message."""
    return _unclaimed(rows, pending, lambda row: _claim_key(row.role, row.content, row.timestamp, row.platform_message_id))


def loaded_beside_unsaved(loaded: Sequence[Message], held: Sequence[Message]) -> list[Message]:
    """The transcript of an adopted tip: its live rows (`loaded`, as `from_row` made them), then the unsaved
    messages of `held`, the agent's list before it moved, less each loaded row one of them may own already (as
    `rows_not_written_for` says).

    A turn whose append raised after its COMMIT, then a rotation that copied its rows into the tip: the store's
    next append hands the copies back for the unsaved messages. Kept beside them, the turn is twice in memory,
    and the next rotation writes both into its child (R10).
    """
    pending = unpersisted(held)
    # FIX adopted-tip-skips-own-indeterminate-rows (R10): a loaded copy of a failed turn's committed append beside its unsaved message puts the turn in memory twice
    loaded = _unclaimed(loaded, pending, _message_claim_key)
    return list(loaded) + pending


def _unclaimed(items: Sequence[Any], pending: Sequence[Message], key: Callable[[Any], tuple[Any, ...]]) -> list[Any]:
    """`items` (oldest first) less the first one with each claiming message's key: a platform user message's,
    or a maybe-written message's."""
    claims = Counter(
        _message_claim_key(m) for m in pending if m.get(MAYBE_WRITTEN) or _message_claim_key(m)[0] == "platform"
    )
    kept = []
    for item in items:
        found = key(item)
        if claims[found] > 0:
            claims[found] -= 1
        else:
            kept.append(item)
    return kept


def _message_claim_key(message: Message) -> tuple[Any, ...]:
    return _claim_key(message["role"], message["content"], message.get("timestamp"), message.get("platform_message_id"))


def _claim_key(role: str, content: str | None, timestamp: float | None, platform_id: str | None) -> tuple[Any, ...]:
    """What the store's append finds a message's live row by: a platform user message's platform message id
    (its one dedup authority, #104653), any other message's exact payload."""
    if role == "user" and platform_id is not None:
        return ("platform", platform_id)
    return ("payload", role, content, timestamp)


def without_copies_of(messages: list[Message], copies: Sequence[Message]) -> None:
    """Remove from `messages`, in place, the first entry with the content of each of `copies`."""
    for copy in copies:
        key = without_markers(copy)
        found = next((i for i, message in enumerate(messages) if without_markers(message) == key), None)
        if found is not None:
            del messages[found]


def take_stamps(messages: Sequence[Message], held: Sequence[Message]) -> None:
    """Stamp each unflushed message of `messages` whose content `held` holds as a durable row.

    A turn's write that failed because the agent's own attempt rotated the session meanwhile: the rotation
    wrote that turn's messages into the child from its copies and stamped the copies, not the turn's dicts.
    """
    durable = {_content_key(m): m[ROW_ID] for m in held if is_persisted(m)}
    for message in messages:
        row_id = None if is_persisted(message) else durable.get(_content_key(message))
        if row_id is not None:
            stamp([message], [row_id])


def _content_key(message: Message) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(without_markers(message).items()))


def without_markers(message: Message) -> Message:
    """A copy that carries no claim about durability (every underscore key is in-memory bookkeeping)."""
    return {key: value for key, value in message.items() if not key.startswith("_")}


def same_content(left: Sequence[Message], right: Sequence[Message]) -> bool:
    """Equal as transcripts, ignoring markers: a cold-loaded list and a fresh copy compare equal."""
    return [without_markers(m) for m in left] == [without_markers(m) for m in right]


def fingerprint(messages: Iterable[Message]) -> str:
    """A short digest of a transcript's content and order, so an observer can tell whether it changed."""
    return transcript_fingerprint((m.get("role"), m.get("content"), m.get("timestamp")) for m in messages)


def estimate_tokens(messages: Iterable[Message]) -> int:
    """A rough count (one token per four characters, at least one per message) for thresholds and growth."""
    return sum(message_tokens(m.get("content") or "") for m in messages)


def from_row(row: MessageRow) -> Message:
    """A durable row as a live dict, already stamped (it needs no flush)."""
    message = new_message(row.role, row.content or "", row.timestamp)
    if row.platform_message_id is not None:
        message["platform_message_id"] = row.platform_message_id
    if row.is_summary:
        message["is_summary"] = True
    # FIX loaded-rows-stamped (R10): an unstamped loaded row looks new, so the next flush writes the durable prefix again
    stamp([message], [row.id])
    return message


async def persist(
    rt: Runtime, db: Database, session: SessionId, pending: list[Message], *, refuse_ended: Collection[str] = (),
    settle: Callable[[], None] = lambda: None,
) -> list[int]:
    """Append `pending` to `session` in one transaction and stamp each dict with its row (refused, in that
    transaction, if the session has ended for a reason in `refuse_ended`); `settle` may shorten `pending` in the
    step of the write (`Database.call_settled`)."""
    try:
        # FIX turn-append-atomic (R10/R12): one transaction for the batch; written one message at a time, a failure part-way leaves the question without its reply
        row_ids = await db.call_settled(settle, "append_messages", session, pending, refuse_ended=refuse_ended)
    except Exception as exc:
        for message in pending:  # the error may have come after the COMMIT: the next append asks the store first
            message[MAYBE_WRITTEN] = True
        rt.emit(AppendFailed(session=session, error=type(exc).__name__))
        raise
    stamp(pending, row_ids)
    rt.emit(AppendOk(session=session, ids=row_ids))
    return row_ids


def copied(messages: Iterable[Message]) -> list[Message]:
    """A deep copy of `messages` at a fraction of `copy.deepcopy`'s cost: a message holds only scalars (its
    role, content, timestamp, ids and markers), so a copy of each dict shares nothing the copy could change."""
    return [dict(message) for message in messages]
