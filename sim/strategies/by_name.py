"""The strategies a scenario file, `--strategy` or `sim.explore(strategy=...)` may name, by name.

Each name makes a fresh strategy object: one object serves one exploration, since strategies that learn
across runs (PCT's horizon, the portfolio's rotation, the search tree of `dfs`) keep what they learnt.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from sim.strategies.dfs import PreemptionBoundedDFS
from sim.strategies.dpor import SourceDPOR
from sim.strategies.fifo import Fifo
from sim.strategies.pct import PCT
from sim.strategies.portfolio import Portfolio
from sim.strategies.random_walk import RandomWalk
from sim.strategies.strategy import Strategy
from sim.strategies.task_pct import TaskPCT

STRATEGIES: dict[str, Callable[[], Strategy]] = {
    "random": RandomWalk,
    "pct": PCT,
    "pct-d1": functools.partial(PCT, depth=1),
    "pct-d10": functools.partial(PCT, depth=10),
    "task-pct-d10": TaskPCT,
    "dfs": PreemptionBoundedDFS,
    "dpor": SourceDPOR,
    "fifo": Fifo,
    "portfolio": Portfolio,
}
DEFAULT_STRATEGY = "portfolio"


def strategy_for(name: str) -> Strategy:
    """A fresh strategy by name; ValueError naming the known ones otherwise."""
    try:
        return STRATEGIES[name]()
    except KeyError:
        raise ValueError(f"no strategy {name!r} (known: {', '.join(STRATEGIES)})") from None
