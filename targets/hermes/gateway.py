"""hermes's gateway (gateway/run.py), as the harness drives it: a session's platform messages, one turn at a time,
and the auto-reset of a session whose turn reported its compression exhausted.

`Gateway` keeps what the gateway keeps per session key (its cached AIAgent, `_agent_cache`; the key's entry in the
real `gateway.session.SessionStore`) and does what `_handle_message_with_agent` does with a message (line numbers
are 0.19.0's; the same steps are in every release):
- the history is the session's transcript as `SessionStore.load_transcript` reads it from the SQLite store;
- the turn runs `agent.run_conversation(message, conversation_history=history)` on a worker thread (the gateway's
  executor, `_run_agent` :18733), while the gateway's own thread waits for it;
- a message arriving while a turn runs interrupts it (`_handle_active_session_busy_message`: `running_agent.interrupt`)
  and is queued to run next;
- after the turn, the entry follows the agent's session (a rotation moved it), and if the result says
  `compression_exhausted`, the session is reset: `SessionStore.reset_session(session_key)` (:13255-13262) ends the
  session as `session_reset` and creates a fresh one, and the cached agent is evicted, so the next message builds a
  new AIAgent on the fresh session.

What is real: the AIAgent and its turn loop (overflow recovery, compaction), `SessionStore.load_transcript` and
`SessionStore.reset_session` with their store writes. What is not: the platform adapters, asyncio and the rest of
`GatewayRunner` (hygiene, hooks, delivery), which decide nothing of the reset; the reset's condition
(`agent_result.get("compression_exhausted") and session_entry and session_key`) is the one line restated here.
The `SessionStore` writes to the run's database through its process's `SessionDB` (it opens its own at the
default path, which is not the run's).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from contract.events import SessionAutoReset
from contract.ids import SessionId
from targets.hermes.frontend import turn_thread

EXIT = None  # what ends the gateway's loop (the gateway shut down)
PLATFORM = "telegram"  # the platform of the session's entry: the reset creates the fresh session with its name
EXHAUSTED = "compression_exhausted"  # the key of a turn's result the reset decision reads


class Gateway:
    """One session key of one agent at the gateway: a queue of platform messages served by the gateway's thread."""

    def __init__(self, name: str, agent: Any, db: Any, folder: Path, emit: Callable[[Any], None],
                 turn_started: Callable[[Gateway, str], None], new_agent: Callable[[str], Any]) -> None:
        self.name = name
        self.agent = agent
        self.key = f"agent:main:{PLATFORM}:dm:{name}"
        self.store = session_store(folder, db, self.key, agent.session_id)
        self._emit = emit
        self._turn_started = turn_started
        self._new_agent = new_agent
        self._inputs: queue.Queue[str | None] = queue.Queue()
        self._running: threading.Thread | None = None
        self.turns = 0

    def deliver(self, text: str | None) -> None:
        """A platform message (None: the gateway shuts down); while a turn runs, it interrupts the running agent."""
        running = self._running
        if text is not None and running is not None and running.is_alive():
            self.agent.interrupt(text)
        self._inputs.put(text)

    def serve(self) -> None:
        while True:
            text = self._inputs.get()
            if text is EXIT:
                return
            self._handle(text)

    def _handle(self, text: str) -> None:
        """One message: its turn on a worker thread, then the entry follows the agent, and an exhausted turn resets."""
        entry = self.store._entries[self.key]
        history = self.store.load_transcript(entry.session_id)
        self.turns += 1
        number = self.turns
        outcome: dict[str, Any] = {}
        agent = self.agent
        thread = turn_thread(self.name, number, agent, text, history, outcome, self._emit,
                             lambda: self._turn_started(self, str(number)))
        self._running = thread
        thread.start()
        thread.join()
        entry.session_id = agent.session_id  # the agent-result sync: a rotation moved the session
        result = outcome.get("result") or {}
        if result.get(EXHAUSTED):
            self._reset(entry.session_id)

    def _reset(self, old: str) -> None:
        """The gateway's auto-reset: a fresh session for the key, the cached agent evicted (the next message's is new)."""
        fresh = self.store.reset_session(self.key)
        if fresh is None:
            return
        self.agent = self._new_agent(fresh.session_id)
        self._emit(SessionAutoReset(from_session=SessionId(old), to_session=SessionId(fresh.session_id), reason=EXHAUSTED))


def session_store(folder: Path, db: Any, key: str, session_id: str) -> Any:
    """The gateway's real `SessionStore`, on the run's database, holding one entry: `key` routed to `session_id`."""
    from gateway.config import GatewayConfig, Platform
    from gateway.session import SessionEntry, SessionStore

    store = SessionStore(folder / "sessions", GatewayConfig())
    store._db = db
    now = datetime.now()
    store._entries[key] = SessionEntry(session_key=key, session_id=session_id, created_at=now, updated_at=now,
                                       platform=Platform(PLATFORM))
    store._loaded = True
    return store
