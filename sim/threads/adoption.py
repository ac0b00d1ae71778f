"""Locks made before the run that the program reaches through its own objects, made simulated for the batch.

A lock the program made before the run is a real lock: a simulated thread that finds it taken would block in C,
holding the baton, until the stall detector gave up on it (10 s of real time) and the run ended in a deadlock the
program does not have. The batch's scan (`patching._scan`) adopts the locks that are module globals and class
attributes; this module adopts those one step further in, where programs keep them as often: an attribute of a
module-level object (`REGISTRY._lock`), an item of a module-level dict or list, a variable the program function
closes over or an argument it is given (an object the test made before calling `sim.explore`).

The walk is bounded (`DEPTH` steps from a root) and enters only what the program's own files define: their
modules' globals, instances of their classes, their functions' closures, and the dicts, lists and tuples held
there; a library's objects (a queue, a logging handler) are left as they are, since their code runs between
scheduling points. Each real lock gets one simulated lock over it for the whole batch, however many references
lead to it, so that a release through one wakes the waiters of every other; every reference it swaps is put
back when the batch ends. A Condition made before the run over a real lock is pointed at the simulated one in
place (it keeps its lock's bound methods, which `Condition.__init__` copied). The Condition inside an Event, a
Semaphore or a queue made before the run is left real: their code is the library's, which runs between scheduling
points, so no thread is switched out holding it.
"""

from __future__ import annotations

import _thread
import functools
import operator
import sys
import threading
from collections.abc import Callable, Iterable
from types import CellType, FunctionType, MethodType, ModuleType
from typing import Any

from sim.threads import locks
from sim.threads.tracing import is_program

DEPTH = 3
_ADOPTERS: dict[type, Callable[[Any, str], Any]] = {_thread.LockType: locks.Lock.adopt, _thread.RLock: locks.RLock.adopt}
_CONDITION = threading.Condition  # the class, before any batch: Conditions are not replaced, they run on the locks
_CONDITION_BINDINGS = ("_lock", "acquire", "release", "_release_save", "_acquire_restore", "_is_owned")
_CONTAINERS = (dict, list, tuple)  # a tuple's locks cannot be swapped, but what it holds is walked

_CELL = object()  # the key of a closure cell's one slot
Undo = Callable[[], None]


class Adoption:
    """The simulated lock of each real one adopted in a batch, and how to put every swapped reference back."""

    def __init__(self) -> None:
        self._simulated: dict[int, tuple[Any, Any]] = {}  # id(real lock) -> (real lock, its simulated lock)
        self._undo: list[Undo] = []
        self._visited: set[int] = set()
        self._conditions: list[Any] = []  # the Conditions pointed at a simulated lock
        self._programs: dict[str, bool] = {}  # module name -> whether its file is the program's

    def simulated(self, real: Any, name: str) -> Any:
        """The batch's one simulated lock over `real` (made on first sight, named where it was found)."""
        known = self._simulated.get(id(real))
        if known is None:
            known = self._simulated[id(real)] = (real, _ADOPTERS[type(real)](real, name))
        return known[1]

    def adopt_reachable(self, roots: Iterable[tuple[str, Any]]) -> None:
        """Adopt the real locks reachable from the named roots through the program's objects."""
        for name, root in roots:
            self._walk(root, name, DEPTH)

    def reset_after_run(self) -> None:
        """Give the next run the locks as the batch found them. A run that ends in a deadlock, or with threads
        left running, leaves its threads parked where they were, holding what they held: a lock made during the
        run goes with the run, but one made before it would be found taken by every later run of the batch (and
        by the program after it). A lock a thread of the run holds is made free again; one that another thread
        (the caller's, say) holds stays taken, and only forgets the run's waiters; so does a Condition (a stale
        waiter would take the next run's notify)."""
        for _, lock in self._simulated.values():
            if lock.owner is not None:
                lock._at_fork_reinit()
            lock._waiters.clear()
        for condition in self._conditions:
            stale = [waiter for waiter in condition._waiters if isinstance(waiter, locks.WaiterLock)]
            for waiter in stale:
                condition._waiters.remove(waiter)

    def restore(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    # ---- the walk --------------------------------------------------------------------------------------

    def _walk(self, value: Any, name: str, depth: int) -> None:
        if depth == 0 or id(value) in self._visited:
            return
        kind = type(value)
        if kind is MethodType:
            self._walk(value.__self__, name, depth)
            return
        if kind is FunctionType:
            if not is_program(value.__code__.co_filename):
                return
            self._visited.add(id(value))
            for cell, variable in zip(value.__closure__ or (), value.__code__.co_freevars):
                if _filled(cell):
                    self._slot(cell.cell_contents, f"{name}.{variable}", depth, cell, _CELL)
            return
        if kind is ModuleType:
            if depth == DEPTH:  # a root: a module the program imports is a root of its own, or a library's
                self._visited.add(id(value))
                for attribute, member in list(vars(value).items()):
                    if type(member) not in _ADOPTERS:  # a module's own locks are the batch scan's
                        self._slot(member, f"{name}.{attribute}", depth)
            return
        if kind in _CONTAINERS:
            self._visited.add(id(value))
            items = list(value.items()) if kind is dict else list(enumerate(value))
            for key, member in items:
                self._slot(member, f"{name}[{key!r}]", depth, None if kind is tuple else value, key)
            return
        if self._is_program_instance(value):
            self._visited.add(id(value))
            state = vars(value)  # past any __setattr__ or property: the program's own slots
            for attribute, member in list(state.items()):
                self._slot(member, f"{name}.{attribute}", depth, state, attribute)

    def _slot(self, member: Any, name: str, depth: int, holder: Any = None, key: Any = None) -> None:
        """One reference the walk passes, `holder[key]` (None: one that cannot be swapped): a real lock is swapped
        for its simulated one, a Condition over a real lock is pointed at the simulated one in place, anything
        else walked on."""
        if type(member) in _ADOPTERS:
            if holder is not None:
                self._undo.append(_swap(holder, key, self.simulated(member, name)))
            return
        if type(member) is _CONDITION and id(member) not in self._visited:
            self._visited.add(id(member))
            lock = vars(member)["_lock"]
            if type(lock) in _ADOPTERS:
                self._undo.append(_repoint(member, self.simulated(lock, name)))
                self._conditions.append(member)
            return
        self._walk(member, name, depth - 1)

    def _is_program_instance(self, value: Any) -> bool:
        kind = type(value)
        module = getattr(kind, "__module__", None)
        if module is None or not kind.__dictoffset__ or isinstance(value, type):  # asks the type: no __getattr__ runs
            return False
        known = self._programs.get(module)
        if known is None:
            path = getattr(sys.modules.get(module), "__file__", None)
            known = self._programs[module] = path is not None and is_program(path)
        return known


def _repoint(condition: Any, lock: Any) -> Undo:
    """Point a Condition made before the run at the simulated lock over its real one, as `Condition.__init__` binds
    a lock (its acquire and release, and an RLock's save and restore), keeping the Condition itself."""
    state = vars(condition)
    saved = {attribute: state[attribute] for attribute in _CONDITION_BINDINGS if attribute in state}
    state["_lock"] = lock
    for attribute in _CONDITION_BINDINGS[1:]:
        if hasattr(lock, attribute):
            state[attribute] = getattr(lock, attribute)

    def undo() -> None:
        for attribute in _CONDITION_BINDINGS:
            state.pop(attribute, None)
        state.update(saved)

    return undo


def _filled(cell: CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018  # an empty cell raises: the only way to ask
    except ValueError:
        return False
    return True


def _swap(holder: Any, key: Any, replacement: Any) -> Undo:
    """Put `replacement` in `holder[key]` (a closure cell's contents for `_CELL`); returns how to put back the original."""
    if key is _CELL:
        original = holder.cell_contents
        holder.cell_contents = replacement
        return functools.partial(setattr, holder, "cell_contents", original)
    original = holder[key]
    holder[key] = replacement
    return functools.partial(operator.setitem, holder, key, original)
