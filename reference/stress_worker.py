"""One OS process of the stress run: the reference agents on trio, in real time, on a shared SQLite file.

The parent (`python -m sim stress`) starts several of these on one database, interrupts them with SIGINT and
kills them with SIGKILL at random moments, and restarts them. Each worker runs a CLI agent (turns and
`/compress`, Ctrl+C is SIGINT) and a gateway agent (platform messages queued while its turns run), both on
sessions every process shares, with the fake provider at random latencies. Every event goes to this
process's JSONL log as soon as it happens, so a SIGKILL loses only what had not happened yet.

SIGINT while the CLI agent is in a turn is a hard cancel (the process lives on); SIGINT at the prompt, or
SIGTERM, ends the process cleanly. A real "database is locked" is recorded as the simulated `db_busy` fault
is, and the reference handles both alike.
"""

from __future__ import annotations

import argparse
import random
import signal
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import trio

from contract.events import FrontendTurnFailed, ProcessStarted, ProcessStopping, RealStoreBusyFired
from contract.trio_runtime import TrioRuntime
from reference.agent import Agent
from reference.config import CompactionConfig
from reference.db import Database, takes_now
from reference.eventlog import EventLog
from reference.frontends import CliFrontend, GatewayFrontend
from reference.identity import HostProcesses
from reference.lease import Process
from reference.pool import CompressionPool
from reference.provider import ProviderScript, ScriptedProvider
from reference.store import SessionStore

# Small budgets, so a few minutes hold many compactions, timeouts, leases and handoffs.
STRESS_CONFIG = CompactionConfig(
    threshold_tokens=160, lease_ttl_s=6.0, idle_timeout_s=2.0, ceiling_timeout_s=4.0, pool_cap=2,
    cooldown_ladder_s=(1.0, 2.0, 4.0), summary_failure_cooldown_s=1.0, split_failure_cooldown_s=1.0,
    structural_backoff_s=1.0, cancelled_worker_grace_s=1.0, commit_overrun_slice_s=2.0,
)
SUMMARY_SCRIPTS = (
    ProviderScript(latency_s=0.2, tick_s=0.1),
    ProviderScript(latency_s=1.0, tick_s=0.2),
    ProviderScript(latency_s=0.3, tick_s=0.1, stall_before_s=2.5),  # silent past the idle timeout
    ProviderScript(latency_s=0.2, tick_s=0.1, error="overloaded"),
)
GRACE_S = 0.5
OPEN_RETRY_S = 0.1
PAUSE_S = (0.05, 0.4)


class RealDatabase(Database):
    """The store on a shared file: SQLite's own "database is locked" is reported as the db_busy fault, and
    the log learns the clock reading each operation uses."""

    def __init__(self, rt: Any, store: SessionStore, log: EventLog) -> None:
        super().__init__(rt, store)
        self._log = log

    def _invoke(self, op: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if takes_now(type(self.store), op):  # type: ignore[arg-type]  # a class is hashable: the checker reads type(x).__hash__ as the instance's
            kw.setdefault("now", self._rt.now())
        self._log.note_now(kw.get("now"))
        try:
            return super()._invoke(op, args, kw)
        except sqlite3.OperationalError as error:
            if "locked" in str(error) or "busy" in str(error):
                self._rt.emit(RealStoreBusyFired(fault_kind="db_busy", op=op, phase="real"))
            raise


class RandomProvider(ScriptedProvider):
    """The fake summarizer, each call following one of the scripts at random (seeded)."""

    def __init__(self, rt: Any, rng: random.Random) -> None:
        super().__init__(rt, *SUMMARY_SCRIPTS)
        self._rng = rng

    def script_for(self, call: int) -> ProviderScript:
        return self._rng.choice(SUMMARY_SCRIPTS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m reference.stress_worker", description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="the shared SQLite file (its sessions already exist)")
    parser.add_argument("--log", required=True, help="this process's JSONL event log (appended to)")
    parser.add_argument("--name", required=True, help="the worker's slot name, e.g. w1")
    parser.add_argument("--seed", type=int, required=True, help="seeds this life's actions")
    parser.add_argument("--sessions", required=True, help="comma-separated ids of the shared sessions")
    return parser


class Worker:
    def __init__(self, rt: TrioRuntime, args: argparse.Namespace, store: SessionStore, log: EventLog,
                 process: Process, processes: HostProcesses) -> None:
        self.rt = rt
        self.rng = random.Random(args.seed)
        self.sessions = args.sessions.split(",")
        self.process = process
        self.db = RealDatabase(rt, store, log)
        self.pool = CompressionPool(rt, STRESS_CONFIG.pool_cap)
        self.processes = processes
        self.gateway = GatewayFrontend(rt)
        self.cli: CliFrontend | None = None

    def agent(self) -> Agent:
        """An agent on a random shared session; half compact in place, half rotate (where lineage races live)."""
        session = self.rng.choice(self.sessions)
        config = STRESS_CONFIG if self.rng.random() < 0.5 else replace(STRESS_CONFIG, in_place=False)
        return Agent(self.rt, self.db, RandomProvider(self.rt, random.Random(self.rng.random())), session_id=session,
                     process=self.process, config=config, pool=self.pool, processes=self.processes)

    async def _open(self, agent: Agent) -> None:
        """Start-up meets the store busy (a killed writer's lock, a commit of another process): a program waits
        it out and tries again, as its turns do, rather than dying with a traceback before its first turn."""
        while True:
            try:
                await agent.open()
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) and "busy" not in str(error):
                    raise
            await trio.sleep(OPEN_RETRY_S)

    async def run(self) -> None:
        cli_agent, gateway_agent = self.agent(), self.agent()
        await self._open(cli_agent)
        await self._open(gateway_agent)
        self.cli = CliFrontend(self.rt, cli_agent, grace_s=GRACE_S, name=f"{self.process.name}.cli")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._on_signals, nursery)
            nursery.start_soon(self.gateway.serve, "gateway", gateway_agent)
            nursery.start_soon(self._type)
            nursery.start_soon(self._deliver)

    async def _type(self) -> None:
        """The terminal user: turns, and now and then /compress."""
        assert self.cli is not None
        for number in range(1, sys.maxsize):
            await trio.sleep(self.rng.uniform(*PAUSE_S))
            if self.rng.random() < 0.15:
                await self._compress(self.cli.agent)
            else:
                await self.cli.submit(f"{self.process.name} cli turn {number}")

    async def _compress(self, agent: Agent) -> None:
        """`/compress`: a forced attempt; like a turn, it can fail without ending the process."""
        try:
            await agent.compress(force=True)
        except Exception as error:  # shown to the user, as the terminal would
            self.rt.emit(FrontendTurnFailed(agent=f"{self.process.name}.cli", error=f"{type(error).__name__}: {error}"))

    async def _deliver(self) -> None:
        """Platform messages arrive whenever they like; the gateway queues them behind a running turn."""
        for number in range(1, sys.maxsize):
            await trio.sleep(self.rng.uniform(*PAUSE_S))
            platform = self.rng.choice(("telegram", "slack"))
            await self.gateway.deliver("gateway", f"{self.process.name} {platform} message {number}",
                                       platform_message_id=f"{platform}:{self.process.name}:{number}")

    async def _on_signals(self, nursery: trio.Nursery) -> None:
        """SIGINT in a turn is Ctrl+C (a hard cancel); at the prompt, or SIGTERM, it ends the process."""
        assert self.cli is not None
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                if signum == signal.SIGINT and self.cli.busy:
                    nursery.start_soon(self.cli.ctrl_c)
                else:
                    self.rt.emit(ProcessStopping(process=self.process.name, signal=signal.Signals(signum).name))
                    nursery.cancel_scope.cancel()
                    return


async def _main(rt: TrioRuntime, args: argparse.Namespace, store: SessionStore, log: EventLog, process: Process,
                processes: HostProcesses) -> None:
    rt.emit(ProcessStarted(process=process.name, pid=process.pid, slot=args.name))
    await Worker(rt, args, store, log, process, processes).run()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    processes = HostProcesses()
    process = processes.spawn(args.name)
    with open(args.log, "a", encoding="utf-8") as out:
        log = EventLog(out, process)
        store = SessionStore(args.db, fault_hook=log.on_commit)
        try:
            TrioRuntime.run(_main, args, store, log, process, processes, on_event=log, wait_for_workers=False,
                            wall_clock=True)
        finally:
            store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
