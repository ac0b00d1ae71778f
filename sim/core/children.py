"""Child processes that stop with their parent, so nothing they made is left behind.

`mutate`, `bench`, `check-determinism`, `swarm -j` and any command under `--mutant` do their work in child
`python -m sim` processes, and each curated mutant lives in an overlay folder under the temporary directory
for as long as its child runs. Every child started here hears each stop request of its parent (Ctrl+C,
SIGTERM; `sim.core.stopping`) as a SIGTERM of its own, so a first request stops the children after their run in
progress too (they print what they found, which the parent reads), and a second one stops them at once,
running every `finally` and `with` on the way, so no overlay folder is left behind. A child asked to start
after a first request starts already stopping; after a stop at once, none starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sim.core import stopping

TERMINATE_GRACE_S = 10.0  # how long a terminated child may take to clean up before it is killed

_lock = threading.Lock()
_live: set[subprocess.Popen[Any]] = set()
_stopping = False  # a stop at once was requested: no new child


def run(command: Sequence[str], *, timeout: float | None = None, **popen: Any) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run` whose child is terminated with this process, and on a timeout given time to clean up."""
    process: subprocess.Popen[Any] | None = None
    try:
        process = _start(command, popen)
        stdout, stderr = process.communicate(timeout=timeout)
    except BaseException:
        if process is not None:
            _end(process)
        raise
    finally:
        if process is not None:
            _forget(process)
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


@contextmanager
def dialogue(command: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """A child to talk with while it runs (its pipes as `popen` asks), terminated with this process like `run`'s
    children; on leaving the block its stdin is closed and it is waited for (ended, if the block raised)."""
    process = _start(command, popen)
    try:
        yield process
        if process.stdin is not None:
            process.stdin.close()
        process.wait()
    except BaseException:
        _end(process)
        raise
    finally:
        _forget(process)


def _start(command: Sequence[str], popen: dict[str, Any]) -> subprocess.Popen[Any]:
    """Start a child that hears this process's stop requests (already stopping if one came)."""
    env: Mapping[str, str] = popen.pop("env", None) or os.environ
    stopping.before_start()
    with stopping.held(), _lock:  # held: the handler must not run while this thread holds the lock it takes
        if _stopping:
            raise stopping.Interrupted()
        listening = "stopping" if stopping.requested() else "listening"
        process = subprocess.Popen(command, env={**env, stopping.BY_PARENT_ENV: listening}, **popen)
        _live.add(process)
    if listening == "listening" and stopping.requested():
        process.send_signal(signal.SIGTERM)  # the request came while it started, before it was live to hear it
    return process


def _forget(process: subprocess.Popen[Any]) -> None:
    with stopping.held(), _lock:
        _live.discard(process)


def _end(process: subprocess.Popen[Any]) -> None:
    """Terminate, wait for its cleanup a while, then kill."""
    process.terminate()
    try:
        process.communicate(timeout=TERMINATE_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()


def _on_stop(at_once: bool) -> None:
    """Pass a stop request on to every live child (from the signal handler: it must not wait for the lock);
    after a stop at once, start no new child."""
    global _stopping
    _stopping = _stopping or at_once
    for process in list(_live):
        try:
            process.send_signal(signal.SIGTERM)
        except OSError:
            pass


stopping.listen(_on_stop)
