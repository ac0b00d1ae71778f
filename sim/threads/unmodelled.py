"""What a simulated thread must not do: real processes, the network, the terminal.

Each would block on something outside the run (a child process, a peer, a user at a keyboard) or make the run
depend on the machine, so a simulated thread that calls one gets `NotSimulated` naming the call, at once,
instead of a hang or a silently real effect. It is a BaseException, so that a program's `except Exception`
cannot turn it into a different run; `sim.explore` raises it as a usage error, not as a found failure.
Any other thread calls the real thing.
"""

from __future__ import annotations

import builtins
import os
import socket
import subprocess
from collections.abc import Callable
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

# (owner, attribute, the name a message shows, why): everything `refused` wraps while runs are patched.
REFUSED: tuple[tuple[Any, str, str, str], ...] = tuple(
    (owner, attribute, name, why)
    for owner, attribute, name, why in (
        (os, "fork", "os.fork", "a forked child copies every simulated thread's state but none of the threads"),
        (os, "forkpty", "os.forkpty", "a forked child copies every simulated thread's state but none of the threads"),
        (os, "system", "os.system", _PROCESS),
        (os, "posix_spawn", "os.posix_spawn", _PROCESS),
        (os, "posix_spawnp", "os.posix_spawnp", _PROCESS),
        (subprocess.Popen, "_execute_child", "subprocess.Popen", _PROCESS),
        (socket.socket, "connect", "socket.connect", _NETWORK),
        (socket.socket, "connect_ex", "socket.connect_ex", _NETWORK),
        (socket.socket, "accept", "socket.accept", _NETWORK),
        (socket, "getaddrinfo", "socket.getaddrinfo", "name resolution asks a real resolver"),
        (builtins, "input", "input()", "it waits for a real user at a real terminal"),
    )
    if hasattr(owner, attribute)
)
