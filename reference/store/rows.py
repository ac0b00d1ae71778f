"""Frozen row values handed out by the store, so no caller can hold a cursor across a transaction."""

from __future__ import annotations

from contract.store import MISSING_COOLDOWN, CooldownRow, LeaseRow, MessageRow, SessionRow  # noqa: F401  (the store hands these out)

SESSION_COLUMNS = (
    "id, parent_id, started_at, ended_at, end_reason, model_config, message_count, title, title_source"
)
MESSAGE_COLUMNS = (
    "id, session_id, role, content, timestamp, platform_message_id, active, compacted, is_summary"
)
LEASE_COLUMNS = "session_id, holder, acquired_at, expires_at"
COOLDOWN_COLUMNS = "cooldown_until, cooldown_error, ineffective_count, fallback_streak"

# Every column a clone copies byte for byte: all but the identity and the liveness flags.
PAYLOAD_COLUMNS = "role, content, timestamp, platform_message_id, is_summary"
