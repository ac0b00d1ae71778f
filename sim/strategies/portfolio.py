"""The default strategy: runs rotate through a random walk, PCT depth 1 and task-relative PCT depth 10.

Why a portfolio: no single strategy is best on every bug. Rotating run by run gives each member a fixed
share of the runs, so the portfolio needs about the runs its best member needs divided by that member's
share. The members and shares come from measuring each member's chance to hit a bug in one run (3,000
runs per classic bug, 600 for the easy ones), then checking the rotation on `bench classic` and `bench
detection`:

- PCT depth 1 (one random priority order per run, no change point) is the best member on a task that must
  run last among five (0.19 per run; task-PCT-d10 0.03, random walk 0), on an order violation, and runs
  one of ten tasks to completion first in 0.88 of runs, but never finds a bug that needs a task preempted
  while it could go on (lost update: 0).
- The random walk is the best member on the catalogue's hardest pair (lock-setup-spans-acquire under
  stale_compaction_job_runs_after_timeout: 0.27 per run) and on the depth-3 atomicity bug (0.084;
  task-PCT-d10 0.035), and it finds what needs no order at all as well as any.
- Task-relative PCT depth 10 (`task_pct.py`) is the best member on the three-lock deadlock, check-then-act,
  the ABA free list and the depth-3 stale copy, the bug of a long run where one short task must be held
  while the others take tens of steps (0.013 per run; PCT-d10 0.0013, PCT-d3 0.0007, random walk and
  PCT-d1 0). It replaced PCT-d10 and PCT-d3: it is at least as good as PCT-d10 on every classic bug but
  the order violation, where PCT-d1 covers it.

Equal thirds keep every classic bug within three times of its best member's runs: the tightest are the
task that must run last (2.6 times PCT-d1's) and the stale copy (3 times task-PCT-d10's, 10 times better
than the former rotation of random walk, PCT-d1, PCT-d10, PCT-d1, random walk and PCT-d3, which left a
stale copy undetected after 2,000 runs from 4 root seeds of 20).

A thread program traced by lines adds source-DPOR (`dpor.py`), which reverses only races between threads:
as its first run begins (`observe_threads`, before any choice) the rotation becomes DPOR, DPOR, DPOR, PCT-d1,
DPOR, DPOR, random walk, DPOR, task-PCT-d10. DPOR finds most classic thread bugs in its second run, and since
an int counter's increments commute and data races are reversed before races of lock acquires it matches or
beats the former rotation (four runs in seven) alone on every classic thread bug (5 roots, 200 runs: the task
that must run last 5 runs at the median against 10, the three locks 4 against 6); the other members stay for
what DPOR cannot see (a step it must take to touch everything). Measured on `bench classic --threads` (20 roots,
2,000 runs): the portfolio's median is 1 on the task that must run last, 6 on the three locks, 5 on the depth-3
atomicity, and at most 2 on the other ten. DPOR drops out once exhausted.

The members learn from each other's runs: every run's steps per task go into the lengths the task-PCT
member draws its change points over, so its first run (the third) already has them. Run i of this object
uses the next member in turn, seeded with the run's seed; a member that is a systematic search drops out of the
rotation once it is exhausted. A run is reproduced from its recorded decisions, as any run is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sim.strategies.dpor import SourceDPOR
from sim.strategies.pct import PCT
from sim.strategies.random_walk import RandomWalk
from sim.strategies.strategy import AccessObserver, Strategy
from sim.strategies.task_pct import TaskLengths, TaskPCT

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task


def default_members(lengths: TaskLengths) -> list[Strategy]:
    return [RandomWalk(), PCT(1), TaskPCT(10, lengths=lengths)]


def thread_members(members: Sequence[Strategy]) -> list[Strategy]:
    """The rotation for a thread program: one DPOR search takes six runs in nine, the first three among them."""
    random_walk, pct_d1, task_pct = members
    dpor = SourceDPOR()
    return [dpor, dpor, dpor, pct_d1, dpor, dpor, random_walk, dpor, task_pct]


class Portfolio(Strategy):
    """Delegates each run to the next member in turn; `run_name` says which member ran the current run."""

    def __init__(self, members: Sequence[Strategy] | None = None) -> None:
        self.lengths = TaskLengths()  # the default members' runs teach the task-PCT member how long each task is
        self.members = list(members) if members is not None else default_members(self.lengths)
        self._teaching = members is None
        if not self.members:
            raise ValueError("a portfolio needs at least one member")
        self.runs = 0
        self.current = self.members[0]
        self.name = "portfolio"
        self._steps: dict[int, int] = {}
        self._counting = False  # whether this run's steps go into `lengths` (a task-PCT run counts its own)
        self._seed = 0

    @property
    def exhausted(self) -> bool:
        return all(member.exhausted for member in self.members)

    def observe_threads(self) -> AccessObserver | None:
        """A thread program: DPOR joins the default members, first, as this first run begins (no choice made yet)."""
        if self._teaching and self.runs == 1 and not isinstance(self.members[0], SourceDPOR):
            self.members = thread_members(self.members)
            self.runs = 0
            self.begin(self._seed)
        return self.current.observe_threads()

    def begin(self, seed: int) -> None:
        self._seed = seed
        if self.exhausted:
            raise ValueError("every member of this portfolio is an exhausted search")
        while True:
            self.current = self.members[self.runs % len(self.members)]
            self.runs += 1
            if not self.current.exhausted:
                break
        self._steps = {}
        self._counting = self._teaching and not isinstance(self.current, TaskPCT)
        self.current.begin(seed)

    @property
    def run_name(self) -> str:
        return f"{self.name}/{self.current.name}"

    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        index = self.current.choose_task(runnable, previous)
        if self._counting:
            tid = runnable[index].tid
            self._steps[tid] = self._steps.get(tid, 0) + 1
        return index

    def draw(self, stream: str, bound: int) -> int:
        return self.current.draw(stream, bound)

    def end(self) -> None:
        self.current.end()
        if self._counting:
            self.lengths.observe(self._steps)
