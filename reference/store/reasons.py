"""End-reason taxonomy: which stamps a rotation may heal, which it must respect, which owns lineage."""

from __future__ import annotations

COMPRESSION_END = "compression"

# Stamped by machinery (shutdown, reaping, eviction) while an agent may still be working: healable.
AUTOMATIC_END_REASONS = frozenset({
    "agent_close",
    "ws_orphan_reap",
    "superseded_by_resume",
    "startup_orphan_reap",
    "tui_shutdown",
    "ws_disconnect",
    "idle_timeout",
    "lru_evict",
})

# Boundaries the user or policy chose: a rotation must never heal them.
DELIBERATE_END_REASONS = frozenset({
    "session_reset",
    "session_switch",
    "idle",
    "daily",
    "suspended",
    "resume_pending_expired",
    "new_session",
})

# Explicit closes (a terminal's or a hook's): the store cannot tell a stale one from the user's, so publication
# refuses them; only the host that still routes the session clears one, as it starts a turn there (#106459).
EXPLICIT_CLOSE_REASONS = frozenset({"tui_close", "cli_close", "webhook_complete"})

# Every stamp a rotation must not publish over (its pre-flush guard and publication agree on this set).
UNPUBLISHABLE_END_REASONS = DELIBERATE_END_REASONS | EXPLICIT_CLOSE_REASONS

# `compression` is accepted from end_session only to reproduce the legacy non-atomic rotation (R20).
KNOWN_END_REASONS = AUTOMATIC_END_REASONS | UNPUBLISHABLE_END_REASONS | {COMPRESSION_END}
