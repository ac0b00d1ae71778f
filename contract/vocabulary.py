"""The names and rules the system under test and the oracle must agree on, written once.

A session's end reason is shared data: the store writes it, the oracle judges lineages by it, and a target
other than the reference (hermes-agent) writes the same strings (its `hermes_state_common.py`, section 1.3 of
the compaction notes). The oracle reads them from here, not from the reference's code, so that it never
trusts the taxonomy of the code it checks.
"""

from __future__ import annotations

COMPRESSION_END = "compression"  # a rotation ended the session: its lineage continues in a child

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

# Explicit closes (a terminal's or a hook's, hermes #106459): refused by publication, cleared only by a turn on
# the session that the host still routes.
EXPLICIT_CLOSE_REASONS = frozenset({"tui_close", "cli_close", "webhook_complete"})

# Who gave a session its title, by rising authority: a title never yields to one of lower authority.
TITLE_SOURCES = ("derived", "llm", "user")

CHARS_PER_TOKEN = 4  # the model's count: a token per four characters


def message_tokens(content: str) -> int:
    """The model's count of one message: a token per four characters, at least one."""
    return 1 + len(content) // CHARS_PER_TOKEN

# Task names: the reference names a task after the work it runs, and the oracle reads whose work a step is from
# the name, so the prefixes are shared data like the end reasons.
JOB_TASK = "compress:"  # the pooled job that runs an attempt: `compress:<attempt>`
SUMMARY_TASK = "summary:"  # an attempt's provider call: `summary:<attempt>`
GRACE_TASK = "grace:"  # a Ctrl+C's grace period: `grace:<the task that pressed it>`
