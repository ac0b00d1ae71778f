"""Source-DPOR with sleep sets: a systematic search that only reorders steps of threads that conflict.

Why: a random walk or PCT run may spend hundreds of runs on interleavings that differ only in the order of
steps that touch nothing in common, which cannot change what the program does. Dynamic partial-order
reduction (Flanagan and Godefroid, POPL 2005; source sets after Abdulla, Aronis, Jonsson and Sagonas, POPL
2014) runs one schedule, finds where two threads' steps touched the same object, one of them writing, in an
order nothing else forced (a race), and schedules the reversal of exactly those; sleep sets skip the
reorderings that an earlier sibling already covered. A lost update needs two runs: one serial, then the
reversal of its one race.

What a step touches comes from the thread runtime (`sim/threads/accesses.py` and the primitives): reads and
writes of objects' attributes and items, globals, locks, thread starts and joins, SQLite databases. The
runtime calls `access` with the task that runs; a step is what a task does from one choice of the strategy
to the next (a task that runs without a choice, the only one runnable, makes a step of its own).

How the search maps onto the kernel: one object searches across runs. Each run follows the choices down to a
choice point that still has a thread to try, tries it, and goes on serially: the thread that ran goes on until
it blocks or ends, then the next is the one with the highest of this run's random priorities. `end` finds the
run's races and files their reversals.

The first run, which has nothing to follow, is serial too, and runs the thread started last first: a machine
almost always runs threads in the order they were started, so a test that passes on real threads has seen that
order many times, and its reverse is the serial order least like it. It breaks a program's belief that the
thread started first runs first: a reader started after its writer reads first, a watcher registers after the
jobs it watches ended, the last of ten replicas retires what the others still read. Measured against the start
order (20 roots, 2,000 runs; `bench classic --threads`), DPOR's medians went from 2 to 1 on the order violation,
the rare one among ten and the lock held across a sleep, from 5 to 1 on the task that must run last and from 6.5
to 5.5 on the three locks, and stayed the same on the other eight.

The choice points form a tree kept alive from those with a thread left to try, and each run takes one of them at
random (seeded by the run's seed) rather than the deepest: a program whose threads share a counter (a log line
count, say) races on it at every line, and a depth-first order spends its runs reordering the last few of those
before it reaches an early race. Measured on the classic thread bugs (4 roots, 200 runs each): depth-first left
the check-then-act at 16 runs and the task that must run last unfound, the random pick found them in 2 and 23
runs (medians). Random priorities from the first run on find the rare-among-ten bug in run 1 but took 8 runs on
the bounded buffer, which a serial first run finds in run 1 in either order; the kernel's order in every run
left the rare one among ten unfound; a random-walk continuation left both it and the task that must run last
unfound.

An int counter's increment (`count += 1`, a line that reads and writes it back) commutes with another
increment, so threads that bump a shared counter are not ordered by it (only a read or a write of it orders
them). The pool's choice points filed for a data race are drawn before those filed only for a race of lock
acquires (`ACQUIRE`). Measured on the task that must run last (5 roots, 200 runs), DPOR alone took 41 runs at
the median before, 5 with both.

Objects are known by the order a run first touched them, which is the same in every run up to the point where
the runs part; past it an object is only "new", and two new objects are taken to be the same (see `_conflict`).
Random draws answer from streams seeded by the search's first seed, so a replayed prefix draws the same
numbers. A run whose steps nobody reported (an async program, or a thread program traced at sync points only)
counts each step as touching everything: then the search is a plain exhaustive one, sound if large.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contract.streams import derive_seed
from sim.kernel.errors import DivergenceError
from sim.strategies.random_walk import NOT_BEGUN, Streams
from sim.strategies.strategy import Strategy

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task

# An access key: (object number, part): part None is the whole object (a method that reads or changes it all).
Key = tuple[int, Any]
# What a step did to a key. ADD is an int counter's increment (`count += 1`, read and written back in one
# line): two increments commute, whatever their order the counter ends the same, so only a read or a write of
# it orders them; without it a log-line counter every thread bumps orders all their steps. A step that does
# two different things to one key wrote it.
READ, WRITE, ADD = 0, 1, 2
Accesses = dict[Key, int]  # key -> what the step did to it
WILDCARD: Key = (-1, None)  # a step whose accesses the runtime could not tell: it conflicts with every step
# The part of an object that only orders steps, never races: a thread's start before its first step, its end
# before a join returns, a lock's release before the next acquire. None of these can be reversed (the later
# step cannot run first), so they make happens-before and are never filed as races; acquires race each other.
ORDER = "happens-before"
# The part of a lock its acquires write (a failed try reads it): acquires race each other, so their orders are
# reversed, but a choice point filed only by such a race waits until no reversal of a data race is pending.
# Threads that take one lock to set an Event or log a line reverse their acquires in every order, and what
# they guard is hidden in the standard library; a data race is where a bug of the program's own code shows.
ACQUIRE = "acquire"
_WHOLE = (None, ACQUIRE)  # parts that meet every part of their object (an acquire is ordered after a release)


@dataclass(slots=True, eq=False)
class _Node:
    """One choice point: the tasks that could run (tids, in the kernel's order), and what the search did there.

    Nodes form a tree through `parent` (the choice point before, where `via` ran): a node stays alive while a
    choice point below it, or it, has a thread left to try, so the search may take its pending choice points
    in any order without losing one.
    """

    tids: tuple[int, ...]
    parent: _Node | None
    via: int  # the thread chosen at the parent to get here
    seen: int  # objects numbered before this point: numbers at or above it are "new" here
    done: list[int] = field(default_factory=list)
    backtrack: list[int] = field(default_factory=list)
    deferred: set[int] = field(default_factory=set)  # threads in `backtrack` only for a race of lock acquires
    sleep: dict[int, tuple[Accesses, int]] = field(default_factory=dict)  # tid -> its step, and the `seen` it was made under
    explored: dict[int, Accesses] = field(default_factory=dict)  # tid -> its step when run here
    queued: bool = False  # whether it is in the search's pool of choice points with a thread left to try

    def pending(self, data_races_only: bool = False) -> int | None:
        """The next thread to try here: in the backtrack set, not yet run, not asleep (kernel order); with
        `data_races_only`, not one filed for a race of lock acquires alone."""
        for tid in self.tids:
            if tid in self.backtrack and tid not in self.done and tid not in self.sleep:
                if not (data_races_only and tid in self.deferred):
                    return tid
        return None

    def path(self) -> list[_Node]:
        """The choice points from the first down to this one."""
        nodes: list[_Node] = []
        node: _Node | None = self
        while node is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]


@dataclass(slots=True)
class _Step:
    tid: int
    node: int  # the depth of the choice point that began it, or -1 (the task was the only one runnable)
    accesses: Accesses = field(default_factory=dict)
    clock: dict[int, int] = field(default_factory=dict)  # tid -> its latest step that happens before this one


class SourceDPOR(Strategy):
    """Every schedule up to the reordering of independent steps, each class once; see the module docstring."""

    name = "dpor"
    systematic = True

    def __init__(self) -> None:
        self.executions = 0
        self._pool: list[_Node] = []
        self._path: list[_Node] = []  # this run's choice points so far
        self._chosen: list[int] = []  # the thread chosen at each
        self._began: list[int] = []  # the step each began
        self._prefix = 0  # choice points this run replays before its new branch
        self._branch = -1  # the thread the new branch tries
        self._depth = 0
        self._steps: list[_Step] = []
        self._cut = False  # a scheduling point passed without a choice: the next access begins a step
        self._numbers: dict[int, int] = {}
        self._pinned: list[Any] = []  # every numbered object, alive for the run so that no id is reused in it
        self._draws = Streams()
        self._uniform: Callable[[], float] = NOT_BEGUN.random  # a run's, from its seed: the first run draws nothing
        self._first_seed: int | None = None
        self._replayed = 0  # steps of the current run that an earlier run made already (its replayed prefix)
        self._observing = False  # whether the runtime reports what this run's steps touch
        self._priorities: dict[int, float] = {}  # tid -> its priority in this run, for the serial continuation
        self._unfiled = False  # the last run's races are still to be filed (`end`)

    # ---- the search ---------------------------------------------------------------------------------

    @property
    def exhausted(self) -> bool:
        return self.executions > 0 and not self._live_pool()

    def begin(self, seed: int) -> None:
        if self._first_seed is None:
            self._first_seed = seed
        self._draws.begin(self._first_seed)
        if self.executions:
            self._uniform = random.Random(derive_seed(seed, "dpor")).random
        pool = self._live_pool() if self.executions else []  # before the last run's path is let go: it files its races
        self._path, self._chosen, self._began = [], [], []
        if self.executions:
            if not pool:
                raise ValueError(f"all {self.executions} schedules of this search have run")
            urgent = [node for node in pool if node.pending(data_races_only=True) is not None]
            drawn = urgent or pool
            node = drawn[int(self._uniform() * len(drawn))]
            self._path = node.path()
            self._branch = node.pending(data_races_only=bool(urgent))  # type: ignore[assignment]  # a live node has one
            node.done.append(self._branch)
        self._prefix = len(self._path)
        self.executions += 1
        self._depth = 0
        self._steps = []
        self._cut = False
        self._numbers = {}
        self._pinned = []
        self._replayed = 0
        self._observing = False
        self._priorities = {}

    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        depth = self._depth
        self._depth += 1
        tids = tuple(task.tid for task in runnable)
        if depth < self._prefix:
            node = self._path[depth]
            if node.tids != tids:
                raise DivergenceError(f"decision {depth}: an earlier run offered tasks {list(node.tids)} here, this one "
                                      f"offers {list(tids)}: the program is not deterministic under its schedule")
            chosen = self._path[depth + 1].via if depth + 1 < self._prefix else self._branch
            self._replayed = len(self._steps)
        else:
            node, chosen = self._new_node(tids, previous)
            self._path.append(node)
        self._chosen.append(chosen)
        self._began.append(len(self._steps))
        self._steps.append(_Step(chosen, depth))
        self._cut = False
        return tids.index(chosen)

    def draw(self, stream: str, bound: int) -> int:
        return self._draws.draw(stream, bound)

    def end(self) -> None:
        """File each choice point's step for its later siblings' sleep sets; this run's races are filed when the
        search asks for more (`_live_pool`): a search that stops at this run, its first failure, never needs them."""
        if not self._observing:  # nobody said what the steps touched: each may conflict with any other
            for step in self._steps:
                step.accesses = {WILDCARD: True}
        for step in self._steps:
            if step.node >= 0:
                self._path[step.node].explored[step.tid] = step.accesses
        self._unfiled = True
        self._pinned = []

    def _live_pool(self) -> list[_Node]:
        """The pool without the choice points that have nothing left to try, once the last run's races are in it."""
        if self._unfiled:
            self._unfiled = False
            self._file_races()
        live = [node for node in self._pool if node.pending() is not None]
        for node in self._pool:
            node.queued = node.pending() is not None
        self._pool = live
        return live

    # ---- what the runtime reports -------------------------------------------------------------------

    def observe_threads(self) -> SourceDPOR:
        self._observing = True
        return self

    def boundary(self) -> None:
        """A thread passed a scheduling point with nothing to choose: what it touches next is a new step."""
        self._cut = True

    def access(self, tid: int, target: Any, part: Any, kind: int) -> None:
        """The task `tid`, running, read, wrote or added to `part` of `target` (None: all of it); `kind` is
        READ, WRITE or ADD (a bool says whether it wrote)."""
        number = self._numbers.get(id(target))
        if number is None:
            number = self._numbers[id(target)] = len(self._pinned)
            self._pinned.append(target)
        self.record(tid, (number, part), kind)

    def record(self, tid: int, key: Key, kind: int) -> None:
        steps = self._steps
        if self._cut or not steps or steps[-1].tid != tid:
            steps.append(_Step(tid, -1))
            self._cut = False
        accesses = steps[-1].accesses
        before = accesses.get(key)
        accesses[key] = int(kind) if before is None or before == kind else WRITE

    # ---- choice points ------------------------------------------------------------------------------

    def _new_node(self, tids: tuple[int, ...], previous: Task | None) -> tuple[_Node, int]:
        parent = self._path[-1] if self._path else None
        via = self._chosen[-1] if self._path else -1
        node = _Node(tids, parent, via, len(self._pinned))
        if parent is not None:
            node.sleep = self._inherited_sleep(parent, via, self._began[-1], tids)
        awake = [tid for tid in tids if tid not in node.sleep] or list(tids)  # all asleep: a redundant run goes on
        if previous is not None and previous.tid in awake:
            chosen = previous.tid
        elif self.executions == 1:
            chosen = max(awake)  # the first run: the thread started last (tids count up) first
        else:
            chosen = max(awake, key=self._priority)
        node.done.append(chosen)
        return node, chosen

    def _priority(self, tid: int) -> float:
        """The thread's random priority in this run, drawn when first asked (threads in the order they are asked)."""
        priority = self._priorities.get(tid)
        if priority is None:
            priority = self._priorities[tid] = self._uniform()
        return priority

    def _inherited_sleep(self, parent: _Node, via: int, began: int, tids: tuple[int, ...]) -> dict[int, tuple[Accesses, int]]:
        """The parent's sleepers and earlier-tried siblings whose step commutes with every step since the parent."""
        if not parent.sleep and len(parent.done) < 2:
            return {}  # no sleeper, and no sibling tried but `via`: the usual case in a run's new stretch
        candidates = dict(parent.sleep)
        for tid in parent.done:
            if tid != via and tid in parent.explored:
                candidates[tid] = (parent.explored[tid], parent.seen)
        since = self._steps[began:]
        return {tid: entry for tid, entry in candidates.items()
                if tid in tids and not any(_conflict(entry[0], step.accesses, entry[1]) for step in since)}

    # ---- races --------------------------------------------------------------------------------------

    def _file_races(self) -> None:
        """Happens-before by vector clocks over the run's steps; each race (two steps of different threads that
        conflict, the first not already ordered before the second's thread) files a reversal at the first's choice point."""
        last_of: dict[int, int] = {}  # tid -> its latest step
        history: History = {}
        steps = self._steps
        replayed = self._replayed
        for index, step in enumerate(steps):
            tid = step.tid
            previous = last_of.get(tid)
            before = steps[previous].clock if previous is not None else {}
            clock = dict(before)
            for key, kind in step.accesses.items():
                for other, racy in _conflicting(history, key, kind):
                    other_step = steps[other]
                    if other_step.tid == tid:
                        continue
                    if racy and index >= replayed and other > before.get(other_step.tid, -1):
                        self._reverse(other, index, deferred=key[1] == ACQUIRE)
                    for other_tid, at in other_step.clock.items():
                        if clock.get(other_tid, -1) < at:
                            clock[other_tid] = at
                _remember(history, key, kind, index, tid)
            clock[tid] = index
            step.clock = clock
            last_of[tid] = index

    def _reverse(self, first: int, second: int, deferred: bool) -> None:
        """Make sure the choice point of step `first` tries a thread that can start the race's reversal (last,
        if `deferred`: a race of lock acquires)."""
        steps = self._steps
        node_index = steps[first].node
        if node_index < 0:
            return  # nothing else could run there
        node = self._path[node_index]
        initials = _initials(steps, first, second)
        tried = set(node.backtrack) | set(node.done)
        if tried & initials:
            if not deferred:
                node.deferred -= initials  # a data race wants what a race of acquires filed: no longer last
            return
        racer = steps[second].tid
        enabled = [tid for tid in node.tids if tid in initials]
        if racer in enabled:
            added = [racer]
        elif enabled:
            added = [enabled[0]]
        else:
            added = [tid for tid in node.tids if tid not in tried]
        node.backtrack.extend(added)
        if deferred:
            node.deferred.update(added)
        if not node.queued and node.pending() is not None:
            node.queued = True
            self._pool.append(node)


def _initials(steps: list[_Step], first: int, second: int) -> set[int]:
    """Threads that can begin the reversal: those whose first step after `first` that is not ordered after it
    depends on nothing else in that stretch (with `second` itself at its end)."""
    first_tid = steps[first].tid
    found: set[int] = set()
    seen: set[int] = set()
    for index in range(first + 1, second + 1):
        step = steps[index]
        if index != second and step.clock.get(first_tid, -1) >= first:
            continue  # ordered after `first`: not part of the reversal's prefix
        if step.tid in seen:
            continue
        seen.add(step.tid)
        clock = step.clock if index != second else _clock_without(steps, second)
        if all(at <= first for tid, at in clock.items() if tid != step.tid):
            found.add(step.tid)
    return found


def _clock_without(steps: list[_Step], index: int) -> dict[int, int]:
    """A step's clock before the race with `first` joined it in: its own thread's previous clock is the best bound."""
    tid = steps[index].tid
    for earlier in range(index - 1, -1, -1):
        if steps[earlier].tid == tid:
            return steps[earlier].clock
    return {}


# object -> part -> [its last write, {tid: its latest read since that write}, {tid: its latest add since it}]
History = dict[int, dict[Any, list[Any]]]


def _conflicting(history: History, key: Key, kind: int) -> list[tuple[int, bool]]:
    """The latest earlier steps that conflict with an access, each with whether it may race (not ORDER): the last
    write of the part, the reads since it unless this reads too, the adds since it unless this adds too; a
    whole-object access meets every part, a part the whole."""
    number, part = key
    if number == WILDCARD[0]:
        entries = [(name, entry) for table in history.values() for name, entry in table.items()]
    else:
        table = history.get(number)
        if table is None:
            entries = []
        elif part is None or part == ACQUIRE:
            entries = list(table.items())
        else:
            entries = [(name, table[name]) for name in (part, None, ACQUIRE) if name in table]
        wild = history.get(WILDCARD[0])
        if wild is not None:
            entries += wild.items()
    found = []
    for name, (last_write, reads, adds) in entries:
        racy = name != ORDER and part != ORDER
        if last_write >= 0:
            found.append((last_write, racy))
        if kind != READ:
            found.extend((read, racy) for read in reads.values())
        if kind != ADD:
            found.extend((add, racy) for add in adds.values())
    return found


def _remember(history: History, key: Key, kind: int, index: int, tid: int) -> None:
    number, part = key
    table = history.get(number)
    if table is None:
        table = history[number] = {}
    if kind == WRITE:
        table[part] = [index, {}, {}]
        return
    entry = table.get(part)
    if entry is None:
        entry = table[part] = [-1, {}, {}]
    entry[1 if kind == READ else 2][tid] = index


def _kinds_conflict(kind: int, other: int) -> bool:
    """Two accesses to one key conflict unless both read it or both add to it."""
    return kind == WRITE or other == WRITE or kind != other


def _conflict(sleeper: Accesses, step: Accesses, seen: int) -> bool:
    """Whether a sleeping thread's step (recorded in an earlier run) conflicts with a step of this run.

    Objects numbered below `seen` are the same objects in both runs; a "new" number on both sides may be one
    object under two numbers, so two new objects are taken to be the same (sound, if less precise).
    """
    if WILDCARD in sleeper or WILDCARD in step:
        return bool(sleeper) and bool(step)
    for (number, part), kind in step.items():
        for (other, other_part), other_kind in sleeper.items():
            if not _kinds_conflict(kind, other_kind):
                continue
            same = number == other if number < seen or other < seen else True
            if same and (part in _WHOLE or other_part in _WHOLE or part == other_part):
                return True
    return False
