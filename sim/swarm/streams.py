"""Named random streams for generating one run: each decision draws from its own stream, derived by name.

A stream's seed is `derive_seed(root, "swarm.<run>.<name>")` (SHA-256, never `hash()`), and its n-th number
is SHA-256 of (seed, n): stable across processes and Python versions, and independent of every other
stream, so adding a fault kind to a workload does not change the world, the actions or the other kinds'
faults that the same root seed and run index draw.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import TypeVar

from contract.streams import derive_seed
from sim.swarm.ranges import Span, ValuePick

T = TypeVar("T")
_UNIT = float(1 << 53)


class Stream:
    """One named stream of draws."""

    def __init__(self, root_seed: int, run_index: int, name: str) -> None:
        self._seed = derive_seed(root_seed, f"swarm.{run_index}.{name}")
        self._drawn = 0

    def unit(self) -> float:
        """A float in [0, 1)."""
        digest = hashlib.sha256(f"{self._seed}:{self._drawn}".encode()).digest()
        self._drawn += 1
        return (int.from_bytes(digest[:8], "big") >> 11) / _UNIT

    def chance(self, probability: float) -> bool:
        return self.unit() < probability

    def below(self, bound: int) -> int:
        return min(int(self.unit() * bound), bound - 1)

    def pick(self, values: Sequence[T]) -> T:
        return values[self.below(len(values))]

    def weighted(self, values: Sequence[T], weights: Sequence[float]) -> T:
        """One of `values`, each with a chance proportional to its weight (one draw, as `pick` takes)."""
        target, total = self.unit() * sum(weights), 0.0
        for value, weight in zip(values, weights):
            total += weight
            if target < total:
                return value
        return values[-1]

    def span(self, span: Span) -> int | float:
        """A value of a range: an integer range draws integers, anything else a float."""
        if isinstance(span.low, int) and isinstance(span.high, int):
            return span.low + self.below(span.high - span.low + 1)
        return span.low + (span.high - span.low) * self.unit()

    def value(self, draw: Span | ValuePick) -> object:
        return self.span(draw) if isinstance(draw, Span) else self.pick(draw.values)

    def poisson(self, mean: float) -> int:
        """How many events a Poisson process with this mean produces (Knuth's method, fine for small means)."""
        limit, count, product = math.exp(-mean), 0, self.unit()
        while product > limit:
            count += 1
            product *= self.unit()
        return count


class Streams:
    """The streams of one run, made on first use."""

    def __init__(self, root_seed: int, run_index: int) -> None:
        self.root_seed = root_seed
        self.run_index = run_index
        self._streams: dict[str, Stream] = {}

    def __call__(self, name: str) -> Stream:
        if name not in self._streams:
            self._streams[name] = Stream(self.root_seed, self.run_index, name)
        return self._streams[name]
