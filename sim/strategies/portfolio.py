"""The default strategy: the random walk every other run, PCT at depths 3 and 10 in between, in turn.

Why a portfolio: no single strategy is best on every race. Rotating run by run gives each member a fixed
share of the runs, so the portfolio needs at most about the runs its best member needs divided by that
member's share: twice the random walk's, four times a PCT member's. The members and shares come from
measurement (`python -m sim bench detection`) on the catalogue, whose runs are short (tens to a few
hundred choices). On the races that take more than one run there, the random walk detects first; PCT at
depth 10 (a change point every few choices of a short run) comes close; PCT at depth 3, the classic depth
for ordering bugs in long runs, trails; PCT at depth 1 (one fixed priority order per run) did not catch
them in 200 runs. So half the runs are the random walk's, and PCT keeps a share for races that need a
task held back over a long stretch, which a walk rarely produces.

Run i of this object uses member i mod len(members), seeded with the run's seed; the PCT members keep
their own horizon estimates across their runs. A run is reproduced from its recorded decisions, as any run is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from sim.strategies.base import Strategy
from sim.strategies.pct import PCT
from sim.strategies.random_walk import RandomWalk

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task


def default_members() -> list[Strategy]:
    return [RandomWalk(), PCT(depth=3), RandomWalk(), PCT(depth=10)]


class Portfolio:
    """Delegates each run to the next member in turn; `name` says which member ran the current run."""

    def __init__(self, members: Sequence[Strategy] | None = None) -> None:
        self.members = list(members) if members is not None else default_members()
        if not self.members:
            raise ValueError("a portfolio needs at least one member")
        self.runs = 0
        self.current = self.members[0]
        self.name = "portfolio"

    def begin(self, seed: int) -> None:
        self.current = self.members[self.runs % len(self.members)]
        self.runs += 1
        self.name = f"portfolio/{self.current.name}"
        self.current.begin(seed)

    def choose_task(self, runnable: Sequence["Task"]) -> int:
        return self.current.choose_task(runnable)

    def draw(self, stream: str, bound: int) -> int:
        return self.current.draw(stream, bound)
