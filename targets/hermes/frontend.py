"""hermes's terminal (cli.py), as the harness drives it: its turn loop, its Ctrl+C, its typed interrupt, /compress.

`Cli` keeps what cli.py keeps (`conversation_history`, the agent) and does what it does, without prompt_toolkit
(line numbers are 0.19.0's; the same code is in every release):
- a turn runs on a daemon thread (`run_agent`, cli.py :12146) with the history as it was before the question;
  the chat loop then waits for the thread, polling its interrupt queue every 0.1 s (:12160);
- a message typed while a turn runs goes to that queue: the loop calls `agent.interrupt(message)` (:12177),
  joins the turn 50 times for 0.2 s (10 s, :12215), abandons it if it is still alive, and runs the message as
  the next turn (the history still ends in the abandoned question, which was appended when it was typed);
- Ctrl+C calls `agent.interrupt()` from the key handler's thread (:13681) and the loop keeps waiting;
- `/compress` runs `agent._compress_context(history, None, force=True)`, takes the result as the history and,
  if the session rotated, flushes it to the child (`_manual_compress`, :9874-9910).

Each step the user could see is an event of `contract.events.frontends`, recorded on the thread that does it
(a turn's own events on the turn's thread, which is also the thread its rows are written from).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from contract.events import FrontendCtrlC, FrontendCtrlCGraceExpired, FrontendTurnAbandoned, FrontendTurnFailed, FrontendTurnSubmitted

POLL_S = 0.1  # the chat loop's wait on its interrupt queue while a turn runs (cli.py :12160)
JOIN_SLICE_S = 0.2  # the abandon path's joins (cli.py :12215)
JOINS = 50  # 10 s in all
COMPRESS = "/compress"
EXIT = None  # what ends the chat loop (the terminal closed)


class Cli:
    """One terminal of one agent: an input queue the drives type into, served by a chat-loop thread."""

    def __init__(self, name: str, agent: Any, history: list[dict[str, Any]], emit: Callable[[Any], None],
                 turn_started: Callable[[Cli, str], None]) -> None:
        self.name = name
        self.agent = agent
        self.history = history
        self._emit = emit
        self._turn_started = turn_started
        self._inputs: queue.Queue[str | None] = queue.Queue()
        self._interrupts: queue.Queue[str] = queue.Queue()
        self._running: threading.Thread | None = None
        self.turns = 0

    # ---- what the user does (each from a thread of the harness) -------------------------------------

    def type(self, text: str | None) -> None:
        """A line typed at the prompt: a new turn, or, while a turn runs, an interrupt of it; None closes the terminal."""
        running = self._running
        if text is not None and running is not None and running.is_alive():
            self._interrupts.put(text)
        else:
            self._inputs.put(text)

    def ctrl_c(self) -> None:
        """The key handler's Ctrl+C: interrupt the agent if a turn runs; the chat loop keeps waiting for it."""
        running = self._running is not None and self._running.is_alive()
        self._emit(FrontendCtrlC(agent=self.name, turn_running=running))
        if running:
            self.agent.interrupt()

    # ---- the chat loop (its own thread) -------------------------------------------------------------

    def chat_loop(self) -> None:
        while True:
            text = self._inputs.get()
            if text is EXIT:
                return
            if text == COMPRESS:
                self._compress()
                continue
            typed = self._run_turn(text)
            if typed is not None:
                self._inputs.put(typed)

    def _run_turn(self, text: str) -> str | None:
        """One turn on its daemon thread; the text of an interrupt that came meanwhile (to run next), else None."""
        self.history.append({"role": "user", "content": text})
        prior = self.history[:-1]  # cli.py :12088: the history without the question just added
        self.turns += 1
        number = self.turns
        outcome: dict[str, Any] = {}

        thread = turn_thread(self.name, number, self.agent, text, prior, outcome, self._emit,
                             lambda: self._turn_started(self, str(number)))
        self._running = thread
        thread.start()
        typed = None
        while thread.is_alive():
            try:
                typed = self._interrupts.get(timeout=POLL_S)
            except queue.Empty:
                continue
            self._emit(FrontendCtrlC(agent=self.name, turn_running=True))
            self.agent.interrupt(typed)
            break
        if typed is None:
            thread.join(timeout=30)
        else:
            for _ in range(JOINS):
                thread.join(timeout=JOIN_SLICE_S)
                if not thread.is_alive():
                    break
            abandoned = thread.is_alive()
            if abandoned:
                self._emit(FrontendTurnAbandoned(agent=self.name, text=text))
            self._emit(FrontendCtrlCGraceExpired(agent=self.name, turn_abandoned=abandoned))
        result = outcome.get("result")
        if result:  # cli.py :12271: the history becomes the turn's messages (an abandoned turn has none yet)
            self.history = result.get("messages", self.history)
        return typed

    def _compress(self) -> None:
        """`/compress` at the prompt: the whole history compacted, the CLI following a rotation (cli.py :9874)."""
        before = self.agent.session_id
        compressed, _ = self.agent._compress_context(list(self.history), None, force=True)
        self.history[:] = compressed
        if self.agent.session_id != before:
            self.agent._flush_messages_to_session_db(self.history, None)


def turn_thread(name: str, number: int, agent: Any, text: str, history: list[dict[str, Any]], outcome: dict[str, Any],
                emit: Callable[[Any], None], started: Callable[[], None]) -> threading.Thread:
    """One turn of agent `name` on its daemon thread `turn.<name>.<number>` (not started), as either frontend runs it:
    it says it started, submits the text, and keeps the turn loop's result in `outcome` (or says how it failed)."""

    def run_agent() -> None:
        started()
        emit(FrontendTurnSubmitted(agent=name, text=text))
        try:
            outcome["result"] = agent.run_conversation(user_message=text, conversation_history=history)
        except Exception as error:
            emit(FrontendTurnFailed(agent=name, error=f"{type(error).__name__}: {error}"))

    return threading.Thread(target=run_agent, daemon=True, name=f"turn.{name}.{number}")
