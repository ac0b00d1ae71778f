"""The ids the reference mints, as value types: each knows how it is built and how it is read back.

They are strings (they are stored in SQLite, compared, hashed and traced as plain text), so an id reads the
same in a trace, a store row and a repro file; what they add is the one place where each format is written
and parsed. An attempt is `<process>.<n>` (unique per process incarnation, also its fence's name); a lease
holder is `proc=<process>:pid=<pid>:attempt=<n>`; a rotation's child session is `<family>/<attempt>`.
"""

from __future__ import annotations

import re

_HOLDER = re.compile(r"proc=([^:]+):pid=(\d+):attempt=(\d+)")
_PID = re.compile(r"(?:^|:)pid=(\d+)(?::|$)")


class AttemptId(str):
    """One compression attempt: `<process>.<n>`."""

    __slots__ = ()

    @classmethod
    def of(cls, process: str, number: int) -> AttemptId:
        return cls(f"{process}.{number}")

    @property
    def process(self) -> str:
        """The process (incarnation) that made the attempt; a restarted process numbers from 1 again."""
        return self.rsplit(".", 1)[0]


class HolderId(str):
    """A compression lease's holder: `proc=<process>:pid=<pid>:attempt=<n>`."""

    __slots__ = ()

    @classmethod
    def of(cls, process: str, pid: int, number: int) -> HolderId:
        return cls(f"proc={process}:pid={pid}:attempt={number}")

    @property
    def attempt(self) -> AttemptId | None:
        """The attempt that holds (or held) the lease; None for a holder id of another format."""
        match = _HOLDER.search(self)
        return None if match is None else AttemptId.of(match.group(1), int(match.group(3)))

    @property
    def pid(self) -> int | None:
        """The holder's process id; None when the id names none (an unknown holder counts as alive)."""
        match = _PID.search(self)
        return None if match is None else int(match.group(1))


class SessionId(str):
    """A session; a rotation's child is named after the first session of its conversation and the attempt."""

    __slots__ = ()

    @property
    def family(self) -> str:
        """The first session of this one's conversation: the part of the id before the first `/`."""
        return self.split("/", 1)[0]

    def continuation(self, name: str) -> SessionId:
        """The id of a continuation child of this session, named `name` (an attempt, or a writer's label)."""
        return SessionId(f"{self.family}/{name}")
