"""Failure cooldowns and the anti-thrash breaker: what blocks an automatic attempt, and who may clear it.

The cooldown lives twice: a local deadline on the compressor and the durable merge-max row on the session
(so another process, or this one after a restart, sees it). The breaker is the persisted ineffective count.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from contract.events import CooldownCleared, CooldownClearSkipped, CooldownPersistFailed, CooldownSet
from contract.ids import AttemptId, SessionId
from contract.runtime import Runtime
from reference.attempt import Compressor
from reference.config import CompactionConfig
from reference.db import Database
from reference.store.cooldown import TIMEOUT_ERROR


class Cooldowns:
    def __init__(self, rt: Runtime, db: Database, compressor: Compressor, config: CompactionConfig) -> None:
        self._rt = rt
        self._db = db
        self._compressor = compressor
        self._config = config

    async def blocked_reason(self, session: SessionId, *, bypass_cooldown: bool = False) -> str | None:
        """Why an automatic attempt must not run now (None: it may). A forced attempt skips this gate;
        `bypass_cooldown` (a provider-proven overflow) skips only the failure cooldown."""
        now = self._rt.now()
        state = self._compressor.state
        if state.cooldown_until > now and not bypass_cooldown:
            return "cooldown"
        if state.structural_backoff_until > now:
            return "structural_backoff"
        row = await self._db.call("cooldown_row", session)
        if row.until is not None and row.until > now and not bypass_cooldown:
            state.cooldown_until = row.until
            return "cooldown"
        if row.ineffective_count >= self._config.breaker_threshold:
            return "ineffective"
        return None

    async def record_failure(self, session: SessionId, seconds: float, error: str, attempt: AttemptId) -> None:
        """Block automatic attempts for `seconds`; the durable row keeps the later of two deadlines."""
        until_s = self._rt.now() + seconds
        state = self._compressor.state
        state.cooldown_until = max(state.cooldown_until, until_s)
        state.last_error = error
        try:
            await self._db.call("record_cooldown", session, until_s, error)
        except Exception as exc:  # the local deadline still holds; an empty durable row is no proof of a clear
            self._rt.emit(CooldownPersistFailed(session=session, attempt=attempt, error=type(exc).__name__))
            return
        self._rt.emit(CooldownSet(session=session, until_s=until_s, attempt=attempt, error=error))

    async def record_timeout(self, session: SessionId, attempt: AttemptId, kind: str) -> None:
        """The host's timeout record: the ladder (60/300/900 s) climbs with consecutive timeouts."""
        await self._compressor.own_timeout_record(attempt)
        state = self._compressor.state
        state.consecutive_timeouts += 1
        seconds = self._config.timeout_cooldown_s(state.consecutive_timeouts)
        await self.record_failure(session, seconds, f"{TIMEOUT_ERROR}{kind}", attempt)

    def note_structural_noop(self) -> None:
        """An unchanged candidate: back off locally instead of re-summarizing the same input every turn."""
        self._compressor.state.structural_backoff_until = self._rt.now() + self._config.structural_backoff_s

    async def clear_on_success(self, session: SessionId, attempt: AttemptId, generation: int) -> bool:
        """A healthy summary lifts the cooldown, unless this attempt was cancelled (or superseded) meanwhile."""
        # FIX cancelled-attempt-keeps-cooldown (R2): a late worker's success must not lift the host's timeout cooldown
        veto = partial(self._compressor.attempt_is_cancelled, generation)
        if await self.clear(session, attempt, veto=veto):
            return True
        self._rt.emit(CooldownClearSkipped(session=session, attempt=attempt))
        return False

    async def clear(self, session: SessionId, attempt: AttemptId, *, veto: Callable[[], bool] = lambda: False) -> bool:
        """Clear the durable and local cooldown; `veto` is consulted in the clear's own step."""
        if not await self._db.call_unless(veto, "clear_cooldown", session):
            return False
        state = self._compressor.state
        state.cooldown_until = 0.0
        state.last_error = None
        state.consecutive_timeouts = 0
        self._rt.emit(CooldownCleared(session=session, attempt=attempt))
        return True
