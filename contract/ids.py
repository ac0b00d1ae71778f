"""The ids the reference mints, as value types: each knows how it is built and how it is read back.

They are strings (they are stored in SQLite, compared, hashed and traced as plain text), so an id reads the
same in a trace, a store row and a repro file; what they add is the one place where each format is written
and parsed. An attempt is `<process>.<n>` (unique per process incarnation, also its fence's name); a lease
holder is `proc=<process>:pid=<pid>:attempt=<n>`, and a real process adds `host=`, `start=` and `nonce=`
around its pid (its name carries the nonce too); a rotation's child session is minted as production mints it,
`<family>/YYYYMMDD_HHMMSS_<6 hex>`, the hex a digest of what made it (the attempt's holder id).
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

_FIELD = re.compile(r"(?:^|:)([a-z]+)=([^:]*)")
MINTED_HEX = 6  # like production's `YYYYMMDD_HHMMSS_<6hex>`


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
    """A compression lease's holder: `proc=<process>[:host=<host>]:pid=<pid>[:start=<ticks>][:nonce=<hex>]:attempt=<n>`."""

    __slots__ = ()

    @classmethod
    def of(cls, process: str, pid: int, number: int, *, host: str | None = None, start_ticks: int | None = None,
           nonce: str | None = None) -> HolderId:
        """A holder id; the real identity (host, the kernel's start time of the pid, a nonce) only where known."""
        identity = {"host": host, "pid": pid, "start": start_ticks, "nonce": nonce}
        shown = "".join(f":{key}={value}" for key, value in identity.items() if value is not None)
        return cls(f"proc={process}{shown}:attempt={number}")

    @property
    def fields(self) -> dict[str, str]:
        """The `key=value` fields (proc, host, pid, start, nonce, attempt) of the id, as written."""
        return dict(_FIELD.findall(self))

    @property
    def attempt(self) -> AttemptId | None:
        """The attempt that holds (or held) the lease; None for a holder id of another format."""
        fields = self.fields
        if "proc" not in fields or not fields.get("attempt", "").isdigit():
            return None
        return AttemptId.of(fields["proc"], int(fields["attempt"]))

    @property
    def pid(self) -> int | None:
        """The holder's process id; None when the id names none (an unknown holder counts as alive)."""
        pid = self.fields.get("pid", "")
        return int(pid) if pid.isdigit() else None


class SessionId(str):
    """A session; a rotation's child is named after the first session of its conversation and the attempt."""

    __slots__ = ()

    @property
    def family(self) -> str:
        """The first session of this one's conversation: the part of the id before the first `/`."""
        return self.split("/", 1)[0]

    def continuation(self, name: str) -> SessionId:
        """The id of a continuation child of this session, named `name` (a writer's label)."""
        return SessionId(f"{self.family}/{name}")

    def minted_child(self, minter: str, now_s: float) -> SessionId:
        """A continuation's id as production mints it (`<family>/YYYYMMDD_HHMMSS_<6hex>`).

        The hex is a digest of `minter` (an attempt's holder id, unique per attempt and per process life), so
        two rotations never mint one id; it depends only on the minter and the clock reading, so a simulated
        run replays to the same ids.
        """
        stamp = datetime.fromtimestamp(now_s, UTC).strftime("%Y%m%d_%H%M%S")
        digest = hashlib.sha256(minter.encode("utf-8")).hexdigest()[:MINTED_HEX]
        return SessionId(f"{self.family}/{stamp}_{digest}")
