"""The default strategy: a rotation of the random walk and PCT at depths 1, 2 and 3, one member per run.

Why a portfolio: no single strategy is best on every race. The random walk is good at shallow races with
many interleavings of equal weight; PCT at depth 1 runs each task as far as it can before the next one (a
race that needs one task to get far ahead), and at depths 2 and 3 finds the ordering bugs of that depth
with a probability that does not shrink with the run's length. Rotating run by run gives each member a
quarter of the runs, so the portfolio is never more than four times slower than its best member.

Run i of this object uses member i mod 4, seeded with the run's seed; the member's PCT objects keep their
own horizon estimates across their runs. A run is reproduced from its recorded decisions, as any run is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from sim.strategies.base import Strategy
from sim.strategies.pct import PCT
from sim.strategies.random_walk import RandomWalk

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task


def default_members() -> list[Strategy]:
    return [RandomWalk(), PCT(depth=1), PCT(depth=2), PCT(depth=3)]


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
