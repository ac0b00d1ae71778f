"""`python -m reference chat` for real: Ctrl+C (SIGINT) during a slow summary, then the next turn persists.

This is the one test that runs in real time, because it tests the real-time entry point: it waits on the
program's own output (never on a sleep) and sends SIGINT the moment the summary has started.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from reference.store import SessionStore

TURNS = [
    "the first question, long enough to add some weight to the transcript",
    "the second question, which pushes the transcript over the threshold",
    "the question after ctrl c, which must be persisted",
]


def chat_process(tmp_path: Path, *options: str) -> subprocess.Popen[str]:
    db, script = tmp_path / "chat.db", tmp_path / "turns.txt"
    script.write_text("\n".join(TURNS) + "\n")
    return subprocess.Popen([sys.executable, "-m", "reference", "chat", "--db", str(db), "--script", str(script), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def interrupted(chat: subprocess.Popen[str], *markers: str) -> str:
    """Send SIGINT the moment each marker shows in the output, in order; then the whole output, once it exits."""
    seen, pending = [], list(markers)
    assert chat.stdout is not None
    for line in chat.stdout:
        seen.append(line)
        if pending and pending[0] in line:
            chat.send_signal(signal.SIGINT)
            pending.pop(0)
        if not pending:
            break
    rest, errors = chat.communicate(timeout=120)
    output = "".join(seen) + rest
    assert chat.returncode == 0, output + errors
    return output


def test_sigint_during_a_slow_summary_rolls_back_and_the_next_turn_persists(tmp_path: Path):
    chat = chat_process(tmp_path, "--summary-latency", "4", "--threshold", "30", "--grace", "0.5")
    output = interrupted(chat, "compaction.summary_started")
    assert "fence.cancel_won" in output and "frontend.ctrl_c_grace_expired" in output

    store = SessionStore(str(tmp_path / "chat.db"))
    try:
        live = store.live_sessions()
        assert len(live) == 1, "exactly one live head"
        assert store.lease_row(live[0].id) is None, "the lease is free"
        contents = [row.content for row in store.active_messages(live[0].id)]
        assert TURNS[2] in contents, "the turn after Ctrl+C was persisted"
        assert contents.count(TURNS[2]) == 1
    finally:
        store.close()


def test_each_turn_shows_after_the_prompt_with_its_reply(tmp_path: Path):
    chat = chat_process(tmp_path, "--threshold", "100000")
    output, errors = chat.communicate(timeout=120)
    assert chat.returncode == 0, output + errors
    shown = [line for line in output.splitlines() if line.startswith(("you> ", "agent> "))]
    assert shown == [line for turn in TURNS for line in (f"you> {turn}", f"agent> ack: {turn}")]


def test_a_second_sigint_within_the_grace_ends_a_scripted_chat(tmp_path: Path):
    """With a script the next turn starts at once, so the frontend is always busy: the second Ctrl+C ends it."""
    chat = chat_process(tmp_path, "--summary-latency", "60", "--threshold", "30", "--grace", "60")
    output = interrupted(chat, "compaction.summary_started", "frontend.ctrl_c ")
    assert "\nbye\n" in output, output
    assert "frontend.ctrl_c_grace_expired" not in output, "it ended within the grace, not after it"
    assert f"you> {TURNS[2]}" not in output, "no turn ran after the second Ctrl+C"
    store = SessionStore(str(tmp_path / "chat.db"))
    try:
        live = store.live_sessions()
        assert len(live) == 1 and store.lease_row(live[0].id) is None, "one live head, and the lease freed on the way out"
    finally:
        store.close()


def test_bad_database_path_is_exit_2(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "reference", "chat", "--db", str(tmp_path / "no" / "such" / "dir.db")],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "--db" in done.stderr and "Traceback" not in done.stderr
