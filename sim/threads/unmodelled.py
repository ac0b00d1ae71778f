"""What a simulated thread must not do: real processes, the network, real I/O waits, signals, the terminal.

Each would block on something outside the run (a child process, a peer, a file descriptor, a signal, a user at
a keyboard) for real time, or make the run depend on the machine, so a simulated thread that calls one gets
`NotSimulated` naming the call, at once, instead of a hang or a silently real effect. It is a BaseException,
so that a program's `except Exception` cannot turn it into a different run; `sim.explore` raises it as a usage
error, not as a found failure. Any other thread calls the real thing.

multiprocessing and asyncio are refused where they start (a process, a pipe, an event loop) when the program
has loaded them; one loaded later still meets the refusals beneath them (`os.fork`, `select`).
"""

from __future__ import annotations

import builtins
import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

from sim.threads.baton import current


class NotSimulated(BaseException):
    """A simulated thread called something the thread runtime does not model."""


def refused(name: str, previous: Callable[..., Any], why: str) -> Callable[..., Any]:
    """`previous` for any other thread; for a simulated one, NotSimulated naming `name` and why."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if current() is not None:
            raise NotSimulated(f"{name} is not modelled by the thread runtime: {why}; stub it for the run")
        return previous(*args, **kwargs)

    call.__name__ = getattr(previous, "__name__", name)
    call.__qualname__ = getattr(previous, "__qualname__", name)
    return call


_PROCESS = "a real process runs outside the virtual clock and the schedule"
_NETWORK = "a real peer answers in real time, not in the schedule"
_FORK = "a forked child copies every simulated thread's state but none of the threads"
_SIGNAL = "a real signal arrives at the real process's main thread, at a real time"
_SELECT = "it waits on real file descriptors in real time"
_EVENT_LOOP = "its selector waits on real file descriptors in real time (a coroutine program runs as `async def main(rt)`)"


def refusals() -> Iterator[tuple[Any, str, str, str]]:
    """(owner, attribute, the name a message shows, why): everything `refused` wraps while runs are patched."""
    for owner, attribute, name, why in _refusals():
        if hasattr(owner, attribute):
            yield owner, attribute, name, why


def _refusals() -> Iterator[tuple[Any, str, str, str]]:
    yield from ((os, call, f"os.{call}", _FORK) for call in ("fork", "forkpty"))
    yield from ((os, call, f"os.{call}", _PROCESS) for call in ("system", "posix_spawn", "posix_spawnp", "wait",
                                                                "waitpid", "wait3", "wait4", "waitid"))
    yield subprocess.Popen, "_execute_child", "subprocess.Popen", _PROCESS
    yield from ((os, call, f"os.{call}", _SIGNAL) for call in ("kill", "killpg"))
    yield from ((signal, call, f"signal.{call}", _SIGNAL) for call in (
        "raise_signal", "pthread_kill", "alarm", "setitimer", "pause", "sigwait", "sigwaitinfo", "sigtimedwait"))
    yield from ((select, call, f"select.{call}", _SELECT) for call in ("select", "poll", "epoll", "devpoll", "kqueue"))
    yield from ((socket.socket, call, f"socket.{call}", _NETWORK) for call in (
        "connect", "connect_ex", "accept", "recv", "recv_into", "recvfrom", "recvfrom_into", "recvmsg", "send",
        "sendall", "sendto", "sendmsg", "sendfile"))
    yield socket, "getaddrinfo", "socket.getaddrinfo", "name resolution asks a real resolver"
    yield builtins, "input", "input()", "it waits for a real user at a real terminal"
    processes, pipes = sys.modules.get("multiprocessing.process"), sys.modules.get("multiprocessing.connection")
    if processes is not None:
        yield processes.BaseProcess, "start", "multiprocessing's Process.start", _PROCESS
    if pipes is not None:
        yield from ((pipes, call, f"multiprocessing.{call}", "its ends talk through a real pipe or socket")
                    for call in ("Pipe", "Client", "Listener"))
    events = sys.modules.get("asyncio.events")
    if events is not None:
        yield events.BaseDefaultEventLoopPolicy, "new_event_loop", "an asyncio event loop", _EVENT_LOOP
