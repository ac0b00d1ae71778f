"""R1's reported interleaving ("seed 000") on a real release, with real threads and real time: the baseline.

Compaction holds the session's lease while its summary call blocks; the user presses Ctrl+C; the
frontend's grace expires and the next turn starts; a second process appends to the session. In hermes the
CLI's Ctrl+C with a typed message (cli.py, 0.19.0 :12177-12230) calls `agent.interrupt(message)` from the
UI thread, polls the turn's daemon thread for 10 s (50 joins of 0.2 s),
abandons it, and runs the typed message as the next turn with `conversation_history` still ending in the
abandoned turn's question. `Cli` below does exactly that, without prompt_toolkit. The second process is
a second `SessionDB` on the same file.

What it reports is read from the database file alone (a read-only connection, not hermes's code): for each
user message, whether it is live (an active row of a session that has not ended), archived (only inactive
rows of a live session), only in ended sessions, or absent. A message that is not live is lost to the
conversation. `python -m targets.hermes baseline VERSION` runs it; the wall time is the figure the
simulated run of the same scenario is compared with.
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from targets.hermes import probes
from targets.hermes.loader import LoadedRelease
from targets.hermes.provider import GatedSummary, script_main_model, script_summary

SESSION = "seed000"
HISTORY_EXCHANGES = 20
# Low enough that the turn prologue's preflight compacts the history above (~5,000 rough tokens).
THRESHOLD_TOKENS = 1000
QUESTIONS = {
    "first turn": "Q1: a long question that triggers compaction",
    "next turn": "Q2: the next question, typed during the summary",
    "second process": "P2: appended by a second process during the summary",
}
CLI_POLL_S = 0.2  # cli.py joins the abandoned turn's thread in 0.2 s slices
TURN_LIMIT_S = 60.0  # a real-time run never waits longer than this for a thread


@dataclass
class Outcome:
    """What one run did and what the store holds at its end."""

    version: str
    mode: str
    grace_s: float
    setup_s: float = 0.0  # AIAgent() and the earlier conversation's persist, probes stubbed
    wall_s: float = 0.0  # from the first turn's start to the end of the last thread
    cpu_s: float = 0.0  # this process's CPU time (every thread) for the setup and the interleaving
    where: dict[str, str] = field(default_factory=dict)
    first_turn: dict[str, Any] = field(default_factory=dict)
    next_turn: dict[str, Any] = field(default_factory=dict)
    abandoned: bool = False
    sessions: list[tuple] = field(default_factory=list)

    @property
    def lost(self) -> list[str]:
        return [label for label, place in self.where.items() if place != "live"]


class Cli:
    """The CLI's turn handling (cli.py): each turn on a daemon thread; Ctrl+C with a message interrupts,
    waits out the grace in 0.2 s joins, abandons a turn still running and starts the message as a turn."""

    def __init__(self, agent: Any, history: list[dict]) -> None:
        self.agent = agent
        self.history = list(history)
        self.results: dict[str, Any] = {}

    def start_turn(self, label: str, text: str) -> threading.Thread:
        prior = list(self.history)
        self.history.append({"role": "user", "content": text})

        def run() -> None:
            self.results[label] = self.agent.run_conversation(user_message=text, conversation_history=prior)

        thread = threading.Thread(target=run, daemon=True, name=f"turn:{label}")
        thread.start()
        return thread

    def interrupt_with_message(self, running: threading.Thread, text: str, grace_s: float) -> bool:
        """`agent.interrupt(text)`, then the grace; True if the running turn had to be abandoned."""
        self.agent.interrupt(text)
        deadline = time.monotonic() + grace_s
        while running.is_alive() and time.monotonic() < deadline:
            running.join(min(CLI_POLL_S, max(0.0, deadline - time.monotonic())))
        return running.is_alive()


def history(exchanges: int = HISTORY_EXCHANGES) -> list[dict]:
    """An earlier conversation long enough to be compacted."""
    rows = []
    for i in range(exchanges):
        rows.append({"role": "user", "content": f"earlier question {i} " + "x" * 400})
        rows.append({"role": "assistant", "content": f"earlier answer {i} " + "y" * 400})
    return rows


def make_agent(db: Any, in_place: bool | None, threshold_tokens: int | None = THRESHOLD_TOKENS) -> Any:
    """A real AIAgent on `db`, offline (an unreachable local URL), scripted main model; `in_place` and
    `threshold_tokens` None keep the release's own setting."""
    import run_agent

    agent = run_agent.AIAgent(base_url="http://127.0.0.1:9/v1", api_key="offline", provider="custom", model="m",
                              quiet_mode=True, skip_context_files=True, skip_memory=True, enabled_toolsets=[],
                              session_db=db, session_id=SESSION)
    if in_place is not None:
        agent.compression_in_place = in_place
    if threshold_tokens is not None:
        agent.context_compressor.threshold_tokens = threshold_tokens
    script_main_model(agent, "the answer")
    return agent


def run_seed_000(loaded: LoadedRelease, mode: str, grace_s: float) -> Outcome:
    """Seed 000 on the loaded release; `mode` is "in_place" or "rotation" (0.16-0.17 only rotate)."""
    import hermes_state

    probes.stub_probes()
    db_path = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=loaded.home)) / "state.db"  # each run starts empty
    summary = GatedSummary()
    script_summary(summary)
    outcome = Outcome(loaded.version, mode, grace_s)
    cpu = time.process_time()
    started = time.perf_counter()
    db = hermes_state.SessionDB(db_path=db_path)
    agent = make_agent(db, in_place=_in_place_flag(loaded, mode))
    earlier = history()
    agent._persist_session(earlier, [])
    cli = Cli(agent, earlier)
    outcome.setup_s = time.perf_counter() - started
    started = time.perf_counter()
    first = cli.start_turn("first turn", QUESTIONS["first turn"])
    if not summary.started.wait(TURN_LIMIT_S):
        raise RuntimeError(f"{loaded.release.name}: the first turn never reached the summary call")
    outcome.abandoned = cli.interrupt_with_message(first, QUESTIONS["next turn"], grace_s)
    second = cli.start_turn("next turn", QUESTIONS["next turn"])
    second.join(TURN_LIMIT_S)
    other = hermes_state.SessionDB(db_path=db_path)
    other.append_message(agent.session_id, role="user", content=QUESTIONS["second process"])
    summary.release.set()
    first.join(TURN_LIMIT_S)
    outcome.wall_s = time.perf_counter() - started
    outcome.cpu_s = time.process_time() - cpu
    outcome.first_turn = _summary_of(cli.results.get("first turn"))
    outcome.next_turn = _summary_of(cli.results.get("next turn"))
    outcome.where = {label: where_is(db_path, text) for label, text in QUESTIONS.items()}
    outcome.sessions = sessions(db_path)
    return outcome


def _in_place_flag(loaded: LoadedRelease, mode: str) -> bool | None:
    """None where the release has no in-place compaction (it always rotates)."""
    has_in_place = hasattr(loaded.modules["hermes_state"].SessionDB, "archive_and_compact")
    if mode == "in_place" and not has_in_place:
        raise ValueError(f"{loaded.release.name} has no in-place compaction (no SessionDB.archive_and_compact)")
    return (mode == "in_place") if has_in_place else None


def _summary_of(result: dict | None) -> dict[str, Any]:
    if result is None:
        return {"returned": False}
    keys = ("final_response", "completed", "interrupted", "failed")
    return {"returned": True, **{key: result.get(key) for key in keys}}


def _read_only(db_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)


def where_is(db_path: Path, text: str) -> str:
    """live / archived / ended-session-only / absent: where the rows carrying `text` are."""
    with _read_only(db_path) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
        active = "m.active" if "active" in columns else "1"
        rows = conn.execute(f"SELECT {active}, s.ended_at IS NULL FROM messages m JOIN sessions s "
                            "ON s.id = m.session_id WHERE m.content = ?", (text,)).fetchall()
    if any(is_active and live for is_active, live in rows):
        return "live"
    if any(live for _, live in rows):
        return "archived"
    return "ended-session-only" if rows else "absent"


def sessions(db_path: Path) -> list[tuple]:
    """(id, parent, end_reason, active rows) for each session, oldest first."""
    with _read_only(db_path) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
        active = "SUM(m.active)" if "active" in columns else "COUNT(m.id)"
        return conn.execute(f"SELECT s.id, s.parent_session_id, s.end_reason, {active} FROM sessions s "
                            "LEFT JOIN messages m ON m.session_id = s.id GROUP BY s.id "
                            "ORDER BY s.started_at").fetchall()
