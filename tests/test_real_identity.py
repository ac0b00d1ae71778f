"""Real process identity: two OS processes on one SQLite file never share a lease holder id.

The collision this replaces: the simulated `ProcessTable` makes up pids from 100, so two real `python -m
reference chat` processes both minted `proc=chat:pid=100:start=1:attempt=1`; the second "re-entered" the first's lease
and both compacted at once. `test_simulated_identity_collides_across_real_processes` keeps that failure
visible (it is what main's chat did); the real identity (`HostProcesses`) must exclude the second process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from contract.ids import HolderId, SessionId
from reference.identity import HostProcesses, process_start_ticks
from reference.store import SessionStore

ROOT = Path(__file__).resolve().parent.parent

# One chat-like process: take `chat`'s lease for attempt 1 with the given identity, print the outcome, then
# hold on (alive) until stdin closes.
CHILD = """
import sys, time
from reference.identity import HostProcesses
from reference.lease import ProcessTable
from reference.store import SessionStore
table = HostProcesses() if sys.argv[2] == "real" else ProcessTable()
holder = table.spawn("chat").holder(1)
store = SessionStore(sys.argv[1])
won = store.try_acquire_lease("chat", holder, now=time.time(), ttl_s=300.0, holder_is_dead=table.holder_is_dead)
print(holder, won, flush=True)
sys.stdin.read()
"""


def _start(db: Path, identity: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(db), identity], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def _two_processes(db: Path, identity: str) -> list[tuple[str, bool]]:
    """Both processes try the lease while the first is still alive; each one's (holder, won)."""
    SessionStore(str(db)).create_session("chat", now=time.time())
    first = _start(db, identity)
    try:
        first_line = first.stdout.readline().split()
        second = subprocess.run([sys.executable, "-c", CHILD, str(db), identity], cwd=ROOT, text=True, input="",
                                capture_output=True, check=True)
    finally:
        first.communicate("")
    return [(line[0], line[1] == "True") for line in (first_line, second.stdout.split())]


def test_simulated_identity_collides_across_real_processes(tmp_path):
    (holder_a, won_a), (holder_b, won_b) = _two_processes(tmp_path / "chat.db", "simulated")
    assert holder_a == holder_b == "proc=chat:pid=100:start=1:attempt=1"
    assert won_a and won_b, "the second process re-entered the first one's lease"


def test_real_identity_keeps_the_second_process_out(tmp_path):
    (holder_a, won_a), (holder_b, won_b) = _two_processes(tmp_path / "chat.db", "real")
    assert holder_a != holder_b
    assert won_a and not won_b
    for holder in (holder_a, holder_b):
        fields = HolderId(holder).fields
        assert {"host", "pid", "start", "nonce", "attempt"} <= set(fields) and fields["proc"].startswith("chat-")


def test_the_probe_knows_a_dead_holder_and_a_reused_pid(tmp_path):
    table = HostProcesses()
    me = table.spawn("chat")
    assert not table.holder_is_dead(me.holder(1))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    gone = HostProcesses().spawn("chat")
    gone.pid, gone.start_ticks = child.pid, 1
    assert table.holder_is_dead(gone.holder(1)), "a reaped pid is provably dead"
    reused = table.spawn("chat")
    reused.start_ticks = (process_start_ticks(os.getpid()) or 0) + 1
    assert table.holder_is_dead(reused.holder(1)), "a live pid started at another time is not the holder"
    elsewhere = HostProcesses(host="another-host").spawn("chat")
    elsewhere.pid = child.pid
    assert not table.holder_is_dead(elsewhere.holder(1)), "off the holder's host only the TTL can tell"


def test_a_lease_held_by_a_recycled_pids_holder_is_reclaimed_through_the_real_probe(tmp_path):
    """R24 on this machine's /proc: the row's holder names this live process's pid with another start (the kernel
    handed a dead holder's pid to this process). A second process's acquire, asking the real probe, takes the row
    at once; a holder of this process's own start, alive, keeps it."""
    store = SessionStore(str(tmp_path / "chat.db"))
    store.create_session("chat", now=0.0)
    me, contender = HostProcesses().spawn("chat"), HostProcesses().spawn("chat")
    recycled = HostProcesses().spawn("chat")
    recycled.start_ticks = (process_start_ticks(os.getpid()) or 0) + 1
    probe = HostProcesses().holder_is_dead
    assert store.try_acquire_lease("chat", me.holder(1), now=1.0, ttl_s=300.0)
    assert not store.try_acquire_lease("chat", contender.holder(1), now=2.0, ttl_s=300.0, holder_is_dead=probe)
    store.release_lease("chat", me.holder(1))
    assert store.try_acquire_lease("chat", recycled.holder(1), now=3.0, ttl_s=300.0)
    assert store.try_acquire_lease("chat", contender.holder(1), now=4.0, ttl_s=300.0, holder_is_dead=probe)
    assert store.lease_holder("chat", now=5.0) == contender.holder(1)
    store.close()


def test_rotation_ids_differ_across_process_lives_at_the_same_second():
    first, restarted = HostProcesses().spawn("chat"), HostProcesses().spawn("chat")
    assert first.pid == restarted.pid
    parent = SessionId("s")
    assert parent.minted_child(first.holder(1), 1000.0) != parent.minted_child(restarted.holder(1), 1000.0)
    assert parent.minted_child(first.holder(1), 1000.0).startswith("s/19700101_001640_")
