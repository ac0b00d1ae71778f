"""The default strategy: runs rotate through random walk, PCT depth 1, PCT depth 10, PCT depth 1, random
walk and PCT depth 3, in turn.

Why a portfolio: no single strategy is best on every bug. Rotating run by run gives each member a fixed
share of the runs, so the portfolio needs about the runs its best member needs divided by that member's
share. The members and shares come from measuring each member's chance to hit a bug in one run (600 runs
per classic bug, 300 per catalogue pair whose mutant takes more than one run), then checking candidate
rotations on `bench classic` and `bench detection`:

- PCT depth 1 (one random priority order per run, no change point) is the only member that finds a task
  that must run last among five (0.19 per run; PCT-d3 0.04, random walk 0) and runs one of ten tasks to
  completion first in 0.91 of runs, but never finds a bug that needs a task preempted while it could go
  on (lost update: 0). It needs a third of the runs for the portfolio to stay within three times of it.
- The random walk is the best member on the catalogue's hardest pair (lock-setup-spans-acquire under
  stale_compaction_job_runs_after_timeout: 0.27 per run; PCT-d10 0.18, PCT-d3 0.04, PCT-d1 0), on
  check-then-act and on the depth-3 atomicity bug; it keeps a third, and runs first.
- PCT depth 10 (a change point every few choices of a short run) is best on the three-lock deadlock and
  the ABA free list; PCT depth 3, the classic depth for ordering bugs in long runs, keeps a share.

The price of PCT-d1's third is paid on that catalogue pair: over 200 root seeds the former rotation
(random, PCT-d3, random, PCT-d10) needed 4.8 runs on average and this one 6.2, while another slow pair
(stale-job-skipped) went from 3.2 to 2.7. By the per-run chances, no rotation that keeps the classic
bugs within three times of their best strategy does better than about 6.0 there.

The PCT members share one horizon estimate, so each draws its change points over the run length any of
them saw. Run i of this object uses the next member in turn, seeded with the run's seed; a member that is
a systematic search drops out of the rotation once it is exhausted. A run is reproduced from its
recorded decisions, as any run is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from sim.strategies.base import Strategy
from sim.strategies.pct import PCT, HorizonEstimate
from sim.strategies.random_walk import RandomWalk

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task


def default_members() -> list[Strategy]:
    horizon = HorizonEstimate()
    return [RandomWalk(), PCT(1, estimate=horizon), PCT(10, estimate=horizon), PCT(1, estimate=horizon), RandomWalk(),
            PCT(3, estimate=horizon)]


class Portfolio(Strategy):
    """Delegates each run to the next member in turn; `run_name` says which member ran the current run."""

    def __init__(self, members: Sequence[Strategy] | None = None) -> None:
        self.members = list(members) if members is not None else default_members()
        if not self.members:
            raise ValueError("a portfolio needs at least one member")
        self.runs = 0
        self.current = self.members[0]
        self.name = "portfolio"

    @property
    def exhausted(self) -> bool:
        return all(member.exhausted for member in self.members)

    def begin(self, seed: int) -> None:
        if self.exhausted:
            raise ValueError("every member of this portfolio is an exhausted search")
        while True:
            self.current = self.members[self.runs % len(self.members)]
            self.runs += 1
            if not self.current.exhausted:
                break
        self.current.begin(seed)

    @property
    def run_name(self) -> str:
        return f"{self.name}/{self.current.name}"

    def choose_task(self, runnable: Sequence["Task"], previous: "Task | None") -> int:
        return self.current.choose_task(runnable, previous)

    def draw(self, stream: str, bound: int) -> int:
        return self.current.draw(stream, bound)

    def end(self) -> None:
        self.current.end()
