"""A seeded random walk: every runnable task is equally likely at every step."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from contract.streams import derive_seed
from sim.strategies.strategy import Strategy

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task


class Streams:
    """The named random streams of a run (`Strategy.draw`): each is seeded from the run's seed and its name when
    first drawn from, so a run that draws from none seeds nothing (seeding a generator costs about 4 us)."""

    def __init__(self) -> None:
        self._seed = 0
        self._generators: dict[str, random.Random] = {}

    def begin(self, seed: int) -> None:
        self._seed = seed
        self._generators = {}

    def draw(self, stream: str, bound: int) -> int:
        generator = self._generators.get(stream)
        if generator is None:
            generator = self._generators[stream] = random.Random(derive_seed(self._seed, stream))
        return generator.randrange(bound)


class _NotBegun(random.Random):
    """The generator of a strategy before its first run: every draw is an error (a run's is seeded as it begins),
    so that no constructor seeds a generator no run draws from."""

    def random(self) -> float:
        raise RuntimeError("a strategy draws only in a run it has begun")

    def getrandbits(self, k: int) -> int:
        raise RuntimeError("a strategy draws only in a run it has begun")


NOT_BEGUN: random.Random = _NotBegun(0)


class RandomWalk(Strategy):
    name = "random"

    def __init__(self) -> None:
        self._uniform: Callable[[], float] = NOT_BEGUN.random
        self._streams = Streams()

    def begin(self, seed: int) -> None:
        self._uniform = random.Random(derive_seed(seed, "schedule")).random
        self._streams.begin(seed)

    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        return int(self._uniform() * len(runnable))

    def draw(self, stream: str, bound: int) -> int:
        return self._streams.draw(stream, bound)
