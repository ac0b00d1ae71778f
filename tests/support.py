"""What the tests share: running a program on the simulator with faults at its points, picking typed events out
of a history, building an agent, running the command line in a subprocess, and the events of test programs
(which emit through the same contract)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from contract.events.base import Event, event, trace
from contract.history import HistoryEvent
from reference.agent import Agent
from reference.config import CompactionConfig
from reference.db import Database
from reference.lease import ProcessTable
from reference.pool import CompressionPool
from reference.provider import ProviderScript, ScriptedProvider
from sim import RunResult, World

ROOT = Path(__file__).resolve().parent.parent
E = TypeVar("E", bound=Event)
PointFault = Callable[[Any], Awaitable[None]]


def run_sim(seed: int, main: Callable[..., Awaitable[Any]], *args: Any, points: Mapping[str, PointFault] | None = None) -> RunResult:
    """Run `main(rt, *args)` in a fresh World; at a named point in `points`, its fault `points[point](rt)` runs
    first (it may sleep there or raise). The run must end normally."""
    world = World(seed)

    async def hook(label: str) -> None:
        if points and label in points:
            await points[label](world.runtime)

    world.checkpoint_hook = hook
    result = world.run(main, *args)
    assert result.outcome == "ok", result.error
    return result


def records(history: Iterable[HistoryEvent], *classes: type[Event]) -> list[HistoryEvent]:
    """The history's records of events of these classes, in order."""
    return [record for record in history if isinstance(record.event, classes)]


def events(history: Iterable[HistoryEvent], cls: type[E]) -> list[E]:
    """The history's events of one class, typed, in order."""
    return [record.event for record in history if isinstance(record.event, cls)]


def make_agent(rt: Any, db: Database, *scripts: ProviderScript, config: CompactionConfig, session: str = "s",
               process: str = "cli", table: ProcessTable | None = None, pool: CompressionPool | None = None) -> Agent:
    """An agent on `session` in a new process `process` of `table`, answered by a scripted provider."""
    table = table or ProcessTable()
    return Agent(rt, db, ScriptedProvider(rt, *scripts), session_id=session, process=table.spawn(process), config=config,
                 processes=table, pool=pool)


def checkout_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a subprocess that must run this checkout: it goes on PYTHONPATH (after any path `extra`
    puts first), because outside this folder `python -m sim` would otherwise import whatever copy is installed."""
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [(extra or {}).get("PYTHONPATH"), str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


def run_cli(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m sim ARGS` from `cwd`, as a user runs it, on this checkout."""
    return subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, cwd=cwd, env=checkout_env(env))


@event
class ProgramMark(Event):
    """A test program marked a point in its run."""

    kind = "program.mark"
    tag: str


@event
class ProgramDraw(Event):
    """A test program drew a random number."""

    kind = "program.draw"
    value: int


@event
class DemoEvent(Event):
    """A demonstration event for the trace format tests."""

    kind = "demo.event"
    session: str | None = trace(omit_if_none=True, default=None)
    count: int | None = trace(omit_if_none=True, default=None)
    note: str | None = trace(omit_if_none=True, default=None)
