"""Run the reference for real: N worker processes on one SQLite file, interrupted and killed at random.

The parent draws its schedule from `--seed`: when to strike, which worker, and how: SIGINT (Ctrl+C), SIGKILL,
or a pause (SIGSTOP, then SIGCONT after longer than the lease TTL: a laptop that sleeps while it holds a
lease, R25). A killed worker's death is recorded at the moment it is certainly dead and not yet reaped (so
no other process's probe can have seen it dead earlier); then it is reaped and started again as a new
process life. At the end every worker gets SIGTERM (a clean stop), and the logs and the database are checked.

The workers run in a process group of their own, so a Ctrl+C at the terminal reaches the parent alone: it is
the user's (`sim.core.stopping`), not a strike, and ends the striking early; the clean stop and the check follow
as at the end. A second Ctrl+C kills the workers and ends at once.
"""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from contract.events import ProcessCrashed, ProcessExited, StressLeasePlanted, StressSignal
from reference.eventlog import write_event
from reference.identity import HostProcesses, process_start_ticks
from reference.store import SessionStore
from reference.stress_worker import STRESS_CONFIG
from sim.core import stopping
from sim.mutation.mutants import ROOT, load_mutants, overlay
from sim.stress.check import CheckResult, check
from sim.stress.log import merged_history

SESSIONS = ("s0", "s1", "s2")
STRIKE_GAP_S = (0.5, 4.5)  # between two strikes: about 240 in ten minutes
STRIKES = (signal.SIGINT, signal.SIGINT, signal.SIGKILL, signal.SIGKILL, signal.SIGSTOP)
PAUSE_S = (STRESS_CONFIG.lease_ttl_s + 1.0, STRESS_CONFIG.lease_ttl_s + 3.0)  # the paused holder's lease lapses
STOP_WAIT_S = 15.0
PLANTED_TTL_S = 3600.0  # a planted row outlives the run: only the dead-holder probe can free it
PROGRESS_EVERY_S = 10.0
POLL_S = 0.05


@dataclass(frozen=True)
class StressOptions:
    duration_s: float
    processes: int
    seed: int
    workdir: Path
    mutant: str | None = None


@dataclass
class StressCounts:
    sigint: int = 0
    sigkill: int = 0
    pauses: int = 0
    restarts: int = 0
    exits: dict[str, int] = field(default_factory=dict)

    @property
    def kills(self) -> int:
        return self.sigint + self.sigkill


@dataclass(frozen=True)
class StressReport:
    options: StressOptions
    counts: StressCounts
    result: CheckResult
    events: dict[str, int]
    elapsed_s: float
    interrupted: bool = False  # a stop request ended the striking early


class Slot:
    """One worker position: the process living in it now, and its log file."""

    def __init__(self, name: str, log: Path) -> None:
        self.name = name
        self.log = log
        self.popen: subprocess.Popen[bytes] | None = None
        self.paused_until: float | None = None  # monotonic time of its SIGCONT


class StressRun:
    def __init__(self, options: StressOptions, progress: Callable[[str], None]) -> None:
        self.options = options
        self.progress = progress
        self.rng = random.Random(options.seed)
        self.db = options.workdir / "stress.db"
        self.counts = StressCounts()
        self.slots = [Slot(f"w{i}", options.workdir / f"w{i}.jsonl") for i in range(1, options.processes + 1)]
        self.env = dict(os.environ)

    def run(self) -> StressReport:
        started = time.monotonic()
        with ExitStack() as stack:
            path = [str(ROOT)]
            if self.options.mutant is not None:
                path.insert(0, str(stack.enter_context(overlay(load_mutants()[self.options.mutant]))))
            self.env["PYTHONPATH"] = os.pathsep.join(path + [p for p in [os.environ.get("PYTHONPATH")] if p])
            with open(self.options.workdir / "parent.jsonl", "a", encoding="utf-8") as parent_log:
                self._prepare(parent_log)
                try:
                    for slot in self.slots:
                        self._start(slot)
                    pids = ", ".join(f"{slot.name} pid {_pid(slot)}" for slot in self.slots)
                    self.progress(f"started {len(self.slots)} workers: {pids}")
                    self._strike_until(started + self.options.duration_s, parent_log, started)
                    self._stop_all(parent_log)
                finally:
                    self._kill_left()
        merged = merged_history(self.options.workdir.glob("*.jsonl"))
        result = check(self.db, merged, STRESS_CONFIG)
        events: dict[str, int] = {}
        for record in merged.events:
            events[record.kind] = events.get(record.kind, 0) + 1
        return StressReport(self.options, self.counts, result, events, time.monotonic() - started, stopping.requested())

    def _prepare(self, log: TextIO) -> None:
        """The sessions, each leased by a holder whose pid the kernel recycled (R24): the workers' real probe
        (`reference.identity`) must find it dead, or no worker compacts that session for the whole run."""
        store = SessionStore(str(self.db))
        try:
            for session in SESSIONS:
                store.create_session(session, now=time.time())
                holder = recycled_pid_holder()
                assert store.try_acquire_lease(session, holder, now=time.time(), ttl_s=PLANTED_TTL_S)
                planted = StressLeasePlanted(session=session, holder=holder)
                _record(log, planted.kind, planted.trace_fields())
        finally:
            store.close()

    def _start(self, slot: Slot) -> None:
        command = [sys.executable, "-P", "-m", "reference.stress_worker", "--db", str(self.db), "--log", str(slot.log),
                   "--name", slot.name, "--seed", str(self.rng.randrange(2**32)), "--sessions", ",".join(SESSIONS)]
        with open(self.options.workdir / f"{slot.name}.stderr", "ab") as stderr:
            slot.popen = subprocess.Popen(command, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=stderr, cwd=self.options.workdir, process_group=0)

    def _strike_until(self, deadline: float, log: TextIO, started: float) -> None:
        next_strike = time.monotonic() + self.rng.uniform(*STRIKE_GAP_S)
        next_progress = time.monotonic() + PROGRESS_EVERY_S
        while (now := time.monotonic()) < deadline and not stopping.requested():
            for slot in self.slots:
                self._resume_if_due(slot, log, now)
                self._restart_if_dead(slot, log)
            if now >= next_strike:
                self._strike(self.rng.choice(self.slots), log)
                next_strike = now + self.rng.uniform(*STRIKE_GAP_S)
            if now >= next_progress:
                self.progress(self._progress_line(now - started))
                next_progress += PROGRESS_EVERY_S
            time.sleep(POLL_S)

    def _progress_line(self, elapsed_s: float) -> str:
        c = self.counts
        return (f"[{elapsed_s:5.0f}s/{self.options.duration_s:.0f}s] kills {c.kills} (SIGINT {c.sigint}, "
                f"SIGKILL {c.sigkill}), pauses {c.pauses}, restarts {c.restarts}")

    def _signal(self, slot: Slot, signum: signal.Signals, log: TextIO) -> None:
        assert slot.popen is not None
        sent = StressSignal(pid=slot.popen.pid, slot=slot.name, signal=signum.name)
        _record(log, sent.kind, sent.trace_fields())
        slot.popen.send_signal(signum)

    def _resume_if_due(self, slot: Slot, log: TextIO, now: float) -> None:
        if slot.paused_until is not None and now >= slot.paused_until:
            self._signal(slot, signal.SIGCONT, log)
            slot.paused_until = None

    def _strike(self, slot: Slot, log: TextIO) -> None:
        assert slot.popen is not None
        if slot.paused_until is not None or _exited_unreaped(slot.popen.pid, block=False):
            return  # asleep, or it died by itself (the next poll buries and restarts it)
        signum = self.rng.choice(STRIKES)
        self._signal(slot, signum, log)
        if signum == signal.SIGSTOP:
            self.counts.pauses += 1
            slot.paused_until = time.monotonic() + self.rng.uniform(*PAUSE_S)
        elif signum == signal.SIGKILL:
            self.counts.sigkill += 1
            self._bury(slot, log, ProcessCrashed)
            self._start(slot)
            self.counts.restarts += 1
        else:
            self.counts.sigint += 1

    def _restart_if_dead(self, slot: Slot, log: TextIO) -> None:
        assert slot.popen is not None
        if _exited_unreaped(slot.popen.pid, block=False):
            self._bury(slot, log, ProcessExited)
            self._start(slot)
            self.counts.restarts += 1

    def _bury(self, slot: Slot, log: TextIO, death: type[ProcessCrashed | ProcessExited]) -> None:
        """Record the death while the process is a zombie (dead, its pid not yet free), then reap it.

        The record names the worker by pid and slot only: its process name (which carries its nonce) is its
        own, and the log reader takes it from the worker's `process.started`.
        """
        assert slot.popen is not None
        _exited_unreaped(slot.popen.pid, block=True)
        _record(log, death.kind, {"pid": slot.popen.pid, "slot": slot.name})
        code = slot.popen.wait()
        self.counts.exits[str(code)] = self.counts.exits.get(str(code), 0) + 1

    def _stop_all(self, log: TextIO) -> None:
        """SIGTERM is a clean stop; a worker that has not stopped in time is killed."""
        live = [(slot, slot.popen) for slot in self.slots if slot.popen is not None and slot.popen.returncode is None]
        for slot, popen in live:
            self._resume_if_due(slot, log, math.inf)
            popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        for slot, popen in live:
            while not _exited_unreaped(popen.pid, block=False) and time.monotonic() < deadline:
                time.sleep(POLL_S)
            if not _exited_unreaped(popen.pid, block=False):
                popen.kill()
                self._bury(slot, log, ProcessCrashed)
            else:
                self._bury(slot, log, ProcessExited)


    def _kill_left(self) -> None:
        """Workers still running when the run ends early (a second Ctrl+C, an error): killed and reaped, never left."""
        for slot in self.slots:
            if slot.popen is not None and slot.popen.poll() is None:
                slot.popen.kill()
                slot.popen.wait()


def recycled_pid_holder() -> str:
    """A holder id whose pid is this (living) process's but whose start is not: what a dead holder's id looks like
    once the kernel has handed its pid to another process."""
    process = HostProcesses().spawn("recycled")
    process.start_ticks = (process_start_ticks(process.pid) or 0) + 1
    return process.holder(1)


def _pid(slot: Slot) -> int:
    assert slot.popen is not None
    return slot.popen.pid


def _record(log: TextIO, kind: str, fields: dict[str, object]) -> None:
    """One line of the parent's own log, ordered by the wall clock."""
    write_event(log, time.time(), "parent", os.getpid(), "parent", kind, fields)


def _exited_unreaped(pid: int, *, block: bool) -> bool:
    """True once `pid` has exited; it stays a zombie (not reaped), so its pid cannot be reused yet."""
    options = os.WEXITED | os.WNOWAIT | (0 if block else os.WNOHANG)
    return os.waitid(os.P_PID, pid, options) is not None
