"""Progress of long commands: one line on stderr per finished unit, flushed at once, terminal or not.

CI logs show it as it happens, and stdout keeps only the result (one JSON document under `--json`, where
progress is off unless `--progress` asks for it). A unit is what a command finishes one at a time: a
scenario for `run`, a mutant for `mutate` and `bench detection`, a scenario's seeds in one process for
`check-determinism`, a shrinking pass for `shrink`. `explore` finishes runs by the thousand, so its lines
are at most one every few seconds.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

EXPLORE_EVERY_S = 2.0  # seconds between two of explore's lines


class Progress:
    """Counts finished units and prints a line for each: `[ 3/42] what: detail`.

    Safe to call from worker threads (mutants finish on several at once).
    """

    def __init__(self, command: str, total: int | None, *, enabled: bool) -> None:
        self.command = command
        self.total = total
        self.enabled = enabled
        self.count = 0
        self._lock = threading.Lock()

    def done(self, what: str) -> None:
        with self._lock:
            self.count += 1
            if self.enabled:
                self.say(f"[{self._position()}] {what}")

    def say(self, line: str) -> None:
        """A line that is not a unit (what the command is about to do)."""
        if self.enabled:
            print(f"{self.command}: {line}", file=sys.stderr, flush=True)

    def _position(self) -> str:
        if self.total is None:
            return str(self.count)
        return f"{self.count:>{len(str(self.total))}}/{self.total}"


def elapsed_s() -> float:
    """Real seconds since a fixed point, from a clock the wall-clock freeze leaves alone (`time.monotonic` is frozen
    while runs execute here; this process's CPU time does not move while worker processes run a swarm's runs)."""
    return os.times().elapsed


class Throttled(Progress):
    """A Progress for units that come too fast to print each: a line only every `every_s` seconds."""

    def __init__(self, command: str, *, enabled: bool, every_s: float = EXPLORE_EVERY_S,
                 clock: Callable[[], float] = elapsed_s) -> None:
        super().__init__(command, None, enabled=enabled)
        self.every_s = every_s
        self._clock = clock
        self._last_s = clock()

    def done(self, what: str) -> None:
        with self._lock:
            self.count += 1
            now = self._clock()
            if not self.enabled or now - self._last_s < self.every_s:
                return
            self._last_s = now
        self.say(what)
