"""Randomness in a run: the `random` module, `os.urandom` (and so `uuid4` and `secrets`) as recorded draws.

Every value a simulated thread draws goes through the World (`World.draw`), as `rt.rng()` does for async
programs: the strategy answers it, the decision list records it, and replay gives it back, so a run is the
same from its seed or its decisions whatever the program draws. `random.Random()` made without a seed in a
run is seeded by one recorded draw. Any other thread gets the randomness it had before.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from sim.threads.baton import current

_DOUBLE_BITS = 53
_SEED_BITS = 64

# The module-level functions of `random`: methods of one hidden instance, bound at import.
RANDOM_FUNCTIONS = (
    "random", "uniform", "triangular", "randint", "choice", "randrange", "sample", "shuffle", "choices",
    "normalvariate", "lognormvariate", "expovariate", "vonmisesvariate", "gammavariate", "gauss",
    "betavariate", "paretovariate", "weibullvariate", "getrandbits", "randbytes",
)


class RecordedRandom(random.Random):
    """`random.Random` whose two sources of bits are recorded draws (every other method is built on them)."""

    def __init__(self, fallback: random.Random) -> None:
        super().__init__(0)
        self._fallback = fallback

    def random(self) -> float:
        sim = current()
        if sim is None:
            return self._fallback.random()
        return sim.run.world.draw("random", 1 << _DOUBLE_BITS) / (1 << _DOUBLE_BITS)

    def getrandbits(self, k: int) -> int:
        sim = current()
        if sim is None:
            return self._fallback.getrandbits(k)
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        return sim.run.world.draw("random", 1 << k) if k else 0


def recorded_urandom(previous: Callable[[int], bytes]) -> Callable[[int], bytes]:
    """`os.urandom`: one recorded draw of `size` bytes for simulated threads, `previous` for any other."""

    def urandom(size: int) -> bytes:
        sim = current()
        if sim is None:
            return previous(size)
        if size < 0:
            raise ValueError("negative argument not allowed")
        return sim.run.world.draw("urandom", 1 << (8 * size)).to_bytes(size, "big") if size else b""

    return urandom


def recorded_seed(previous: Callable[..., None]) -> Callable[..., None]:
    """`random.Random.seed`: with no seed in a simulated thread, a recorded one instead of the OS's entropy."""

    def seed(self: random.Random, a: Any = None, version: int = 2) -> None:
        sim = current()
        if a is None and sim is not None:
            a = sim.run.world.draw("random.seed", 1 << _SEED_BITS)
        previous(self, a, version)

    return seed
