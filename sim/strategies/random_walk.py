"""A seeded random walk: every runnable task is equally likely at every step."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from contract.streams import derive_seed
from sim.strategies.strategy import Strategy

if TYPE_CHECKING:
    from sim.kernel.scheduler import Task


class RandomWalk(Strategy):
    name = "random"

    def __init__(self) -> None:
        self._uniform = random.Random(0).random
        self._streams: dict[str, random.Random] = {}
        self._seed = 0

    def begin(self, seed: int) -> None:
        self._seed = seed
        self._uniform = random.Random(derive_seed(seed, "schedule")).random
        self._streams = {}

    def choose_task(self, runnable: Sequence[Task], previous: Task | None) -> int:
        return int(self._uniform() * len(runnable))

    def draw(self, stream: str, bound: int) -> int:
        generator = self._streams.get(stream)
        if generator is None:
            generator = self._streams[stream] = random.Random(derive_seed(self._seed, stream))
        return generator.randrange(bound)
