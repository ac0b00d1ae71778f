"""The default strategy: runs rotate through a fixed list of member strategies.

Why a portfolio: no single strategy is best on every bug. Rotating run by run gives each member a fixed
share of the runs, so the portfolio needs at most about the runs its best member needs divided by that
member's share. The members and shares come from measurement; see `default_members`.

Run i of this object uses the next member in turn, seeded with the run's seed; a member that is a
systematic search drops out of the rotation once it is exhausted. Members keep their own state across
their runs (PCT its horizon estimate). A run is reproduced from its recorded decisions, as any run is.
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


class Portfolio(Strategy):
    """Delegates each run to the next member in turn; `name` says which member ran the current run."""

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
        self.name = f"portfolio/{self.current.name}"
        self.current.begin(seed)

    def choose_task(self, runnable: Sequence["Task"], running: "Task | None") -> int:
        return self.current.choose_task(runnable, running)

    def draw(self, stream: str, bound: int) -> int:
        return self.current.draw(stream, bound)

    def end(self) -> None:
        self.current.end()
