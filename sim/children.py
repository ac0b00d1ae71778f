"""Child processes that end with their parent, so nothing they made is left behind.

`mutate`, `bench detection` and `check-determinism` do their work in child `python -m sim` processes, and
each curated mutant lives in an overlay folder under the temporary directory for as long as its child
runs. A SIGTERM that killed the parent outright would leave its children running, or, sent to the whole
process group, would kill each without the cleanup that removes its overlay. So every command process
(`install_sigterm_handler`, at the CLI's entry) turns SIGTERM into a clean exit: it first terminates the
children it started through `run` (which do the same in turn), starts no new one, and then unwinds,
running every `finally` and `with` on the way. A SIGTERM that arrives while one is already being handled
(a whole process group signalled, then each parent terminating its children) is not raised again, and one
that arrives inside `held()` waits for the block to end, so a cleanup or a folder's creation is never cut
half-way.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

TERMINATE_GRACE_S = 10.0  # how long a terminated child may take to clean up before it is killed
EXIT_TERMINATED = 128 + signal.SIGTERM

_lock = threading.Lock()
_live: set[subprocess.Popen[Any]] = set()
_stopping = False
_held = 0  # how many `held()` blocks are open
_pending = False  # a SIGTERM arrived inside one


class Terminated(SystemExit):
    """This process was asked to end (SIGTERM); raised where it waits, and in place of a new child."""

    def __init__(self) -> None:
        super().__init__(EXIT_TERMINATED)


def run(command: Sequence[str], *, timeout: float | None = None, **popen: Any) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run` whose child is terminated with this process, and on a timeout given time to clean up."""
    process: subprocess.Popen[Any] | None = None
    try:
        with held(), _lock:  # held: the handler must not run while this thread holds the lock it takes
            if _stopping:
                raise Terminated()
            process = subprocess.Popen(command, **popen)
            _live.add(process)
        stdout, stderr = process.communicate(timeout=timeout)
    except BaseException:
        if process is not None:
            _end(process)
        raise
    finally:
        if process is not None:
            with held(), _lock:
                _live.discard(process)
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


@contextmanager
def dialogue(command: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """A child to talk with while it runs (its pipes as `popen` asks), terminated with this process like `run`'s
    children; on leaving the block its stdin is closed and it is waited for (ended, if the block raised)."""
    with held(), _lock:
        if _stopping:
            raise Terminated()
        process = subprocess.Popen(command, **popen)
        _live.add(process)
    try:
        yield process
        if process.stdin is not None:
            process.stdin.close()
        process.wait()
    except BaseException:
        _end(process)
        raise
    finally:
        with held(), _lock:
            _live.discard(process)


def _end(process: subprocess.Popen[Any]) -> None:
    """Terminate, wait for its cleanup a while, then kill."""
    process.terminate()
    try:
        process.communicate(timeout=TERMINATE_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()


def terminate_all() -> None:
    """Start no new child and ask every live one to end."""
    global _stopping
    with _lock:
        _stopping = True
        live = list(_live)
    for process in live:
        process.terminate()


def _on_sigterm(signum: int, frame: Any) -> None:
    global _pending
    if _stopping or _pending:
        return  # already ending: let the cleanup under way finish
    if _held:
        _pending = True
        return
    terminate_all()
    raise Terminated()


@contextmanager
def held() -> Iterator[None]:
    """Run the block whole: a SIGTERM that arrives inside it is acted on only once it ends.

    Python runs signal handlers in the main thread only, so only the main thread's blocks need holding.
    """
    global _held, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _held += 1
    try:
        yield
    finally:
        _held -= 1
    if _pending and not _held:
        _pending = False
        terminate_all()
        raise Terminated()


def install_sigterm_handler() -> None:
    """Make SIGTERM a clean exit for this process and its children (call once, from the main thread)."""
    signal.signal(signal.SIGTERM, _on_sigterm)
