"""`python -m reference chat --db PATH`: the reference agent on trio, in real time, on a real SQLite file.

The fake provider summarizes slowly (`--summary-latency`), so a compaction is easy to interrupt: Ctrl+C
during a summary cancels it cleanly (rolled back, lease freed) and the next turn persists. Ctrl+C at the
prompt, or a second Ctrl+C within the grace period of the first, ends the chat. With `--script FILE` the
turns come from a file, one per line, so it can be driven without a terminal; each is echoed after the
prompt. The database is consistent after any exit: every write is one transaction, and the store is closed
on the way out.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

from contract.events import (
    CompactionCommitted,
    CompactionRefused,
    CompactionSummaryDone,
    CompactionSummaryStarted,
    FenceCancelWon,
    FrontendCtrlC,
    FrontendCtrlCGraceExpired,
    HostTimeout,
    LeaseAcquired,
    LeaseReleased,
    SessionAdopted,
    TurnPersisted,
)
from contract.history import HistoryEvent
from contract.trio_runtime import TrioRuntime
from reference.agent import Agent, TurnResult
from reference.config import CompactionConfig
from reference.db import Database
from reference.frontends import CliFrontend
from reference.identity import HostProcesses
from reference.provider import ProviderScript, ScriptedProvider
from reference.store import SessionStore

# Events worth a line on the terminal: what a person watching a compaction wants to see.
SHOWN_EVENTS = (
    CompactionSummaryStarted, CompactionSummaryDone, CompactionCommitted, CompactionRefused, FenceCancelWon,
    LeaseAcquired, LeaseReleased, FrontendCtrlC, FrontendCtrlCGraceExpired, TurnPersisted, HostTimeout,
    SessionAdopted,
)


PROMPT = "you> "


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m reference", description="Run the reference agent for real.")
    commands = parser.add_subparsers(dest="command", required=True)
    chat = commands.add_parser("chat", help="chat with the reference agent (fake provider, real SQLite, real time)")
    chat.add_argument("--db", required=True, type=Path, help="SQLite file for the session store (created if missing)")
    chat.add_argument("--session", default="chat", help="session id (default: chat)")
    chat.add_argument("--script", type=Path, help="read turns from this file, one per line, instead of the terminal")
    chat.add_argument("--summary-latency", type=float, default=5.0, help="seconds the fake provider takes per summary")
    chat.add_argument("--threshold", type=int, default=200, help="token estimate that triggers compaction")
    chat.add_argument("--grace", type=float, default=1.0, help="seconds after Ctrl+C before the next turn is accepted")
    return parser


class _Printer:
    """Prints the events worth seeing, stamped with seconds since the chat started."""

    def __init__(self) -> None:
        self._start: float | None = None

    def __call__(self, event: HistoryEvent) -> None:
        if self._start is None:
            self._start = event.time
        if isinstance(event.event, SHOWN_EVENTS):
            fields = " ".join(f"{key}={value}" for key, value in sorted(event.fields.items()))
            print(f"[{event.time - self._start:8.3f}s] {event.kind} {fields}", flush=True)


async def _read_turns(rt: TrioRuntime, script: Path | None, send: trio.MemorySendChannel[str]) -> None:
    async with send:
        if script is not None:
            for line in script.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    await send.send(line.strip())
            return
        while line := await rt.run_sync_in_worker(sys.stdin.readline):
            if line.strip():
                await send.send(line.strip())


async def _on_ctrl_c(frontend: CliFrontend, nursery: trio.Nursery, grace_s: float) -> None:
    """Ctrl+C during a turn is a hard cancel; Ctrl+C at the prompt ends the chat, and so does a second one
    within the grace of the first (with a script, the next turn starts at once, so the prompt never shows)."""
    last_s = -math.inf
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            now_s = trio.current_time()
            if frontend.busy and now_s - last_s > grace_s:
                last_s = now_s
                nursery.start_soon(frontend.ctrl_c)
            else:
                print("bye", flush=True)
                nursery.cancel_scope.cancel()


def _reply(agent: Agent, result: TurnResult | None) -> str:
    """What the user reads: the assistant's message of the turn, or why there is none."""
    if result is None or result.interrupted:
        return "(no reply: the turn was cancelled or failed)"
    replies = [message["content"] for message in agent.messages if message["role"] == "assistant"]
    return replies[-1] if replies else "(no reply)"


async def _chat(rt: TrioRuntime, args: argparse.Namespace, store: SessionStore) -> None:
    processes = HostProcesses()  # real identity: host, pid, start time and nonce; a real dead-holder probe
    config = CompactionConfig(threshold_tokens=args.threshold, idle_timeout_s=max(120.0, args.summary_latency * 2),
                              ceiling_timeout_s=max(600.0, args.summary_latency * 4))
    provider = ScriptedProvider(rt, ProviderScript(latency_s=args.summary_latency, tick_s=min(1.0, args.summary_latency)))
    agent = Agent(rt, Database(rt, store), provider, session_id=args.session, process=processes.spawn("chat"),
                  config=config, processes=processes)
    await agent.open()
    frontend = CliFrontend(rt, agent, grace_s=args.grace)
    send, receive = trio.open_memory_channel[str](0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_on_ctrl_c, frontend, nursery, args.grace)
        nursery.start_soon(_read_turns, rt, args.script, send)
        # A person at a terminal sees what they type; otherwise each turn is echoed after the prompt.
        await _converse(agent, frontend, receive, typed=args.script is None and sys.stdin.isatty())
        nursery.cancel_scope.cancel()


async def _converse(agent: Agent, frontend: CliFrontend, receive: trio.MemoryReceiveChannel[str], *, typed: bool) -> None:
    """Prompt, take a turn, show the reply; until the turns run out."""
    while True:
        if typed:
            print(PROMPT, end="", flush=True)
        try:
            text = await receive.receive()
        except trio.EndOfChannel:
            break
        if not typed:
            print(PROMPT + text, flush=True)
        result = await frontend.submit(text)
        print(f"agent> {_reply(agent, result)}", flush=True)
        if result is not None:
            print(f"turn done: session={result.session_id} persisted={len(result.persisted)} "
                  f"interrupted={result.interrupted}", flush=True)
    if typed:
        print(flush=True)  # end the last prompt's line


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        store = SessionStore(str(args.db))
    except Exception as error:  # an unusable database path is the user's input: say which, exit 2
        print(f"python -m reference chat: --db {args.db}: cannot open the database ({error})", file=sys.stderr)
        return 2
    if args.script is not None and not args.script.is_file():
        print(f"python -m reference chat: --script {args.script}: no such file", file=sys.stderr)
        return 2
    try:
        TrioRuntime.run(_chat, args, store, on_event=_Printer(), wait_for_workers=False, wall_clock=True)
    finally:
        store.close()
    return 0
