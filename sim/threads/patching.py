"""Install the thread runtime into the standard library for a batch of runs, and take it out again.

The threading module, the clock and SQLite are shared by the whole process, so the runtime patches them for
as long as a batch of runs lasts (patching per run would cost more than a small run) and restores every
attribute it changed on exit, also after an error. Each replacement asks who calls it: a simulated thread
gets the simulated behaviour, any other thread (the kernel's, pytest's, a thread started before the batch)
the behaviour it had before, so the process goes on working around the runs.

A program often holds its own references to what is patched: `from time import sleep`, a module-level
`_lock = threading.Lock()` made at import. The batch therefore also scans the loaded modules (and the
classes they define) once, freezegun-style: a captured function is pointed at its replacement, and a real
lock or RLock becomes a simulated one over that same lock (so it stays one lock), both until the batch ends;
so do the locks the program reaches through its own objects, closure and arguments (`adoption.py`).
"""

from __future__ import annotations

import _thread
import functools
import gc
import itertools
import os
import queue
import random
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from sim.core import heap
from sim.core.timefreeze import frozen_time
from sim.threads import clock, entropy, lifecycle, locks, signals, sqlite, unmodelled
from sim.threads.adoption import Adoption
from sim.threads.tracing import is_program

_LOCK_TYPES = frozenset((_thread.LockType, _thread.RLock))
# Modules whose own references must stay real: the machinery threads and imports run on, and the simulator.
_KEEP_REAL = ("threading", "_thread", "importlib", "_frozen_importlib", "sim", "contract", "freezegun", "_pytest",
              "pytest", "pluggy", "trio", "hypothesis", "queue", "time", "os", "socket",
              "subprocess", "builtins", "concurrent.futures._base")

_active = 0
_adoption = Adoption()  # the current batch's locks made before it, made simulated (`adoption.py`)
_collecting = True  # whether cyclic collection was on when the current run began
_batch_excepthook = threading.excepthook  # the hook each run of the current batch starts with (the environment's)


class _Patches:
    """Every attribute changed, with what it was, so that `restore` puts back exactly that."""

    def __init__(self) -> None:
        self._changed: list[tuple[Any, str, Any, bool]] = []
        self.replaced: dict[int, tuple[Any, Any]] = {}  # id(original) -> (original, replacement), for the scan

    def set(self, owner: Any, name: str, replacement: Any) -> None:
        original = getattr(owner, name)
        own = name in vars(owner)
        self._changed.append((owner, name, original, own))
        setattr(owner, name, replacement)
        self.replaced[id(original)] = (original, replacement)

    def wrap(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        self.set(owner, name, make(getattr(owner, name)))

    def swap(self, owner: Any, name: str, replacement: Any) -> None:
        """Change a captured reference (no entry in the scan's table: it is the scan's own work)."""
        self._changed.append((owner, name, getattr(owner, name), True))
        setattr(owner, name, replacement)

    def restore(self) -> None:
        for owner, name, original, own in reversed(self._changed):
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        self._changed.clear()


def _install(patches: _Patches) -> None:
    for name in ("time", "monotonic", "perf_counter"):
        patches.wrap(time, name, clock.virtual_seconds)
    for name in ("time_ns", "monotonic_ns", "perf_counter_ns"):
        patches.wrap(time, name, clock.virtual_nanoseconds)
    for name in ("process_time", "thread_time"):
        patches.wrap(time, name, functools.partial(clock.virtual_seconds, epoch_s=0.0))
        patches.wrap(time, f"{name}_ns", functools.partial(clock.virtual_nanoseconds, epoch_ns=0))
    patches.wrap(time, "sleep", clock.virtual_sleep)
    patches.wrap(threading, "_time", lambda previous: clock.virtual_seconds(previous, preempts=False))
    patches.wrap(queue, "time", lambda previous: clock.virtual_seconds(previous, preempts=False))

    patches.set(threading, "Lock", locks.Lock)
    patches.set(threading, "RLock", locks.RLock)
    patches.set(threading, "_allocate_lock", locks.WaiterLock)
    patches.set(queue, "SimpleQueue", queue._PySimpleQueue)  # type: ignore[attr-defined]  # queue's pure-Python SimpleQueue, private and untyped
    for numbered in _numbered_classes():
        patches.wrap(numbered, "__init__", lifecycle.numbered_init)
        numbered.__hash__ = lifecycle.run_order_hash  # type: ignore[method-assign, assignment]  # kept: see _numbered_classes
    patches.wrap(threading.Thread, "start", lifecycle.start)
    patches.wrap(threading.Thread, "join", lifecycle.join)
    patches.wrap(threading.Thread, "is_alive", lifecycle.is_alive)
    for owner in (threading, _thread):
        patches.wrap(owner, "get_ident", lifecycle.get_ident)
        patches.wrap(owner, "get_native_id", lifecycle.get_ident)
    patches.wrap(os, "getpid", lifecycle.getpid)
    patches.wrap(threading, "main_thread", lifecycle.main_thread)
    patches.wrap(threading, "enumerate", lifecycle.enumerate_threads)
    patches.wrap(threading, "active_count", lifecycle.active_count)

    patches.wrap(sqlite3, "connect", sqlite.simulated_connect)
    patches.wrap(os, "urandom", entropy.recorded_urandom)
    recorded = entropy.RecordedRandom(random._inst)
    for name in entropy.RANDOM_FUNCTIONS:
        patches.set(random, name, getattr(recorded, name))
    patches.wrap(random.Random, "seed", entropy.recorded_seed)
    patches.wrap(signal, "signal", signals.set_handler)
    patches.wrap(signal, "getsignal", signals.get_handler)
    for owner, attribute, name, why in unmodelled.refusals():
        patches.wrap(owner, attribute, functools.partial(unmodelled.refused, name, why=why))


def _numbered_classes() -> tuple[type, ...]:
    """The classes whose objects get a run-order hash. The hash stays after the batch: an object hashed in a
    set before the batch ended must hash the same when it leaves the set later (it falls back to the address
    for every object made outside a run, which is what `object.__hash__` gives)."""
    from concurrent.futures import Future

    return (threading.Thread, Future)


def _scan(patches: _Patches) -> None:
    """Point the program's captured references at the replacements, and its module-level locks at simulated ones.

    It reads every global of every loaded module and every attribute of the classes they define, about ten
    thousand values once a test suite is loaded, at the start of each batch: so each module's values are
    tested at C speed (set intersections) and only a module or class with a hit is walked in Python.
    """
    replaced = patches.replaced.keys()
    for module_name, module in list(sys.modules.items()):
        if not isinstance(module, ModuleType) or _kept_real(module_name):
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        values = list(namespace.values())
        if not replaced.isdisjoint(map(id, values)) or not _LOCK_TYPES.isdisjoint(map(type, values)):
            for name, value in list(namespace.items()):
                if id(value) in replaced or type(value) in _LOCK_TYPES:
                    _adopt(patches, module, name, value, module_name)
        metaclasses = {kind for kind in set(map(type, values)) if issubclass(kind, type)}
        for value in itertools.compress(values, map(metaclasses.__contains__, map(type, values))):
            if value.__module__ == module_name and not _LOCK_TYPES.isdisjoint(map(type, vars(value).values())):
                for attribute, member in list(vars(value).items()):
                    if type(member) in _LOCK_TYPES:
                        _adopt(patches, value, attribute, member, module_name)


def _adopt(patches: _Patches, owner: Any, name: str, value: Any, module_name: str) -> None:
    """One captured reference: a replaced function points at its replacement, a real lock becomes a simulated one."""
    found = patches.replaced.get(id(value))
    if found is not None and found[0] is value:
        patches.swap(owner, name, found[1])
    elif type(value) in _LOCK_TYPES:
        patches.swap(owner, name, _adoption.simulated(value, f"{module_name}.{name}"))


def _program_modules() -> Iterator[tuple[str, ModuleType]]:
    """The loaded modules of the program's own files, the roots of the batch's walk for locks made before it."""
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(module, ModuleType) and isinstance(path, str) and is_program(path) and not _kept_real(name):
            yield name, module


def _kept_real(module_name: str) -> bool:
    return module_name in _KEEP_REAL or module_name.split(".")[0] in _KEEP_REAL


def adopt_reachable(program: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Before a run: adopt the locks made before it that the program reaches through its closure and arguments
    (`adoption.py`); what earlier runs of the batch walked is not walked again."""
    _adoption.adopt_reachable([("program", program), *((f"args[{index}]", arg) for index, arg in enumerate(args))])


@contextmanager
def threads_patched() -> Iterator[None]:
    """Patch the standard library for simulated threads for the length of a batch (re-entrant)."""
    global _active, _batch_excepthook, _adoption
    if _active:
        _active += 1
        try:
            yield
        finally:
            _active -= 1
        return
    patches = _Patches()
    _adoption = Adoption()
    _active = 1
    freeze = frozen_time()  # first: freezegun would put its own clock over ours if it started inside the batch
    freeze.__enter__()
    kept = heap.frozen_for_batch()
    kept.__enter__()
    try:
        _install(patches)
        _scan(patches)
        _adoption.adopt_reachable(_program_modules())
        for owner, name, _ in _run_counters():
            patches.set(owner, name, getattr(owner, name))  # reset by each run, restored here
        _batch_excepthook = threading.excepthook
        patches.set(threading, "excepthook", _batch_excepthook)  # likewise
        yield
    finally:
        _active = 0
        _adoption.restore()
        patches.restore()
        kept.__exit__(None, None, None)
        freeze.__exit__(None, None, None)


def _run_counters() -> tuple[tuple[Any, str, int], ...]:
    """The process-wide counters that name threads ("Thread-3", "ThreadPoolExecutor-2_0"), with their first value."""
    from concurrent.futures import ThreadPoolExecutor

    return (threading, "_counter", 1), (ThreadPoolExecutor, "_counter", 0)


def program_excepthook() -> Callable[[Any], object] | None:
    """The `threading.excepthook` the running program set, or None while it is still the environment's (the
    interpreter's default, or pytest's, which would report a thread's exception the run already fails with)."""
    hook = threading.excepthook
    return None if hook is _batch_excepthook else hook


def begin_run() -> None:
    """What each run starts afresh: the counters of default thread names, the `threading.excepthook` the batch
    began with (a program's own hook is its run's), `uuid1`'s last timestamp (the next one is made greater), and no
    cyclic garbage collection: a collection runs finalizers and weakref callbacks (an executor's wakes its
    workers) at whatever allocation crossed a threshold, which depends on the whole process's history."""
    for owner, name, first in _run_counters():
        setattr(owner, name, itertools.count(first).__next__)
    threading.excepthook = _batch_excepthook
    uuid = sys.modules.get("uuid")
    if uuid is not None:
        uuid._last_timestamp = None  # type: ignore[attr-defined]  # uuid1's private memory of its last time
    global _collecting
    _collecting = gc.isenabled()
    gc.disable()


def end_run() -> None:
    """Undo what the run changed in the process: locks made before the run free again (`Adoption`), collection
    back on, concurrent.futures' shutdown flag (an interpreter exit in the run set it) back off."""
    _adoption.reset_after_run()
    if _collecting:
        gc.enable()
    futures = sys.modules.get("concurrent.futures.thread")
    if futures is not None:
        futures._shutdown = False  # type: ignore[attr-defined]  # concurrent.futures' private interpreter-exit flag
