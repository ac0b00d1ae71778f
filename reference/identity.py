"""Who a process is on a real host.

A holder id names its process by host, pid, the kernel's start time of that pid and a random nonce drawn
when the process starts. The nonce keeps ids unique when the kernel hands a dead process's pid to a new one
(so a restarted process never re-enters the lease of its previous life); the start time lets another
process on the same host tell the holder from a stranger that reuses its pid, because a nonce cannot be
read from outside. Off the holder's host nothing is provable, and the lease's TTL is the only way out.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

from contract.ids import HolderId
from reference.lease import Process, pid_runs_another_process

NONCE_BYTES = 4


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after the command name, which may hold spaces
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


def pid_is_gone(pid: int) -> bool:
    """True only if no process has `pid` now (a process of another user still exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class HostProcesses:
    """The real processes of this host: this process's identity, and the dead-holder probe (R24).

    The same interface as the simulator's `ProcessTable`: `spawn(name)` and `holder_is_dead(holder)`.
    """

    def __init__(self, host: str | None = None) -> None:
        self.host = host or socket.gethostname()

    def spawn(self, name: str) -> Process:
        """This process, as a lease holder: its name carries the nonce, so its attempt ids are its own."""
        pid, nonce = os.getpid(), secrets.token_hex(NONCE_BYTES)
        return Process(f"{name}-{nonce}", pid, host=self.host, nonce=nonce, start_ticks=process_start_ticks(pid))

    def holder_is_dead(self, holder: str) -> bool:
        """Provably dead: same host, and the pid is gone or now belongs to a process started at another time.

        Any doubt (another host, no start time recorded or readable) answers alive: the TTL then decides.
        """
        fields = HolderId(holder).fields
        if fields.get("host") != self.host or not fields.get("pid", "").isdigit():
            return False
        pid = int(fields["pid"])
        if pid_is_gone(pid):
            return True
        return pid_runs_another_process(HolderId(holder), process_start_ticks(pid))

