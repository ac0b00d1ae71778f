"""The thread runtime: unmodified threaded Python scheduled deterministically by the kernel.

A thread program is a plain callable that uses the standard library's threading (and time, queue,
concurrent.futures, random, sqlite3). Each of its threads is a real OS thread that runs only while it holds
the baton (`baton.py`), so exactly one runs at a time and every switch is the strategy's choice; its blocking
calls, clock reads, SQL statements and (by default) lines are scheduling points (`tracing.py`); time is the
kernel's virtual clock. `program.run_threads` runs one program on a World; `sim.explore` searches it.

| module | holds |
|---|---|
| `baton.py` | `SimThread`: an OS thread speaking the coroutine protocol to the kernel |
| `run.py` | `ThreadRun`: one run's threads, and what a thread does at a scheduling point |
| `locks.py` | `threading.Lock` and `RLock` over the real locks (Condition, Event, ... run unmodified on them) |
| `lifecycle.py` | `Thread.start`, `join`, `is_alive`, idents, `current_thread` |
| `clock.py` | `time.time`, `monotonic`, `perf_counter`, `sleep` on the virtual clock |
| `entropy.py` | `random`, `os.urandom` (so `uuid4`) as recorded draws |
| `sqlite.py` | SQLite's lock wait in virtual time |
| `signals.py` | `signal.signal` and `getsignal`: the program's handlers, kept per run |
| `unmodelled.py` | `NotSimulated`: processes, sockets, `select`, signals sent, event loops, `input()` |
| `tracing.py` | `Preemption`: where plain code may be switched |
| `patching.py` | installing all of the above for a batch of runs, and taking it out |
"""
