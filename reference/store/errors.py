"""Typed store errors, so callers react to the cause rather than parse a message."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every refusal the store raises on purpose."""


class UnknownSessionError(StoreError):
    """A write named a session row that does not exist."""


class SessionExistsError(StoreError):
    """A session id was minted twice; rows are never overwritten."""


class SessionClosedByCompression(StoreError):
    """A write reached a session that a rotation closed; the caller must adopt its compression tip.

    The message names compression, not the disk, because the old surface ("often a full disk") sent users
    chasing the wrong cause (R15).
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} was closed by compression (rotated into a continuation); "
            "write to its compression tip instead"
        )
        self.session_id = session_id


class LeaseLostError(StoreError):
    """The committing holder no longer owns an unexpired compression lease."""


class ParentEndedError(StoreError):
    """The parent was ended deliberately (a boundary the user chose); a rotation must not undo it."""


class ParentChangedError(StoreError):
    """The parent was rotated or otherwise changed underneath the publication."""


class CooldownRestoreMismatch(StoreError):
    """The cooldown row read back after an exact restore differs from what was written."""


class TitleInUseError(StoreError):
    """A user's title is already shown by another conversation."""

    def __init__(self, title: str, holder: str) -> None:
        super().__init__(f"title {title!r} is already in use by {holder!r}")
        self.title = title
