"""Randomness in a run: the `random` module, `os.urandom` (and so `uuid4` and `secrets`) as recorded draws.

Every value a simulated thread draws goes through the World (`World.draw`), as `rt.rng()` does for async
programs: the strategy answers it, the decision list records it, and replay gives it back, so a run is the
same from its seed or its decisions whatever the program draws. `random.Random()` made without a seed in a
run is seeded by one recorded draw. A program that seeds the module itself (`random.seed(42)`, `setstate`)
gets the sequence that seed gives for real, for the rest of the run. Any other thread gets the randomness it
had before.
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
    "betavariate", "paretovariate", "weibullvariate", "getrandbits", "randbytes", "seed", "getstate", "setstate",
)


class RecordedRandom(random.Random):
    """`random.Random` whose two sources of bits are recorded draws (every other method is built on them), until
    the program seeds it. What it keeps between calls (the seeding, `gauss`'s second value) is its run's: the
    first call of each run starts afresh, so no run sees what an earlier one left."""

    def __init__(self, fallback: random.Random) -> None:  # not Random.__init__: its seed() would reseed `fallback`
        self._fallback = fallback
        self._run: object = None  # the run whose state the instance holds
        self._seeded = False  # whether that run seeded it: its own generator then answers, as for real
        self.gauss_next = None

    def _enter(self, run: object) -> None:
        """The first call of `run`: the state an earlier run left (a seeding, gauss's spare value) goes."""
        self._run = run
        self._seeded = False
        random.Random.seed(self, 0)

    def random(self) -> float:
        sim = current()
        if sim is None:
            return self._fallback.random()
        if sim.run is not self._run:
            self._enter(sim.run)
        if self._seeded:
            return super().random()
        return sim.run.world.draw("random", 1 << _DOUBLE_BITS) / (1 << _DOUBLE_BITS)

    def getrandbits(self, k: int) -> int:
        sim = current()
        if sim is None:
            return self._fallback.getrandbits(k)
        if sim.run is not self._run:
            self._enter(sim.run)
        if self._seeded:
            return super().getrandbits(k)
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        return sim.run.world.draw("random", 1 << k) if k else 0

    def gauss(self, mu: float = 0.0, sigma: float = 1.0) -> float:
        sim = current()
        if sim is None:
            return self._fallback.gauss(mu, sigma)
        if sim.run is not self._run:
            self._enter(sim.run)
        return super().gauss(mu, sigma)

    def seed(self, a: Any = None, version: int = 2) -> None:
        """`random.seed(a)`: the real sequence of `a` from here on in the run; with no seed, recorded draws again."""
        sim = current()
        if sim is None:
            self._fallback.seed(a, version)
            return
        self._enter(sim.run)
        if a is not None:
            super().seed(a, version)
            self._seeded = True

    def getstate(self) -> Any:
        if current() is None:
            return self._fallback.getstate()
        return super().getstate()

    def setstate(self, state: Any) -> None:
        """`random.setstate`: the real sequence from that state on, as `seed`."""
        sim = current()
        if sim is None:
            self._fallback.setstate(state)
            return
        self._enter(sim.run)
        super().setstate(state)
        self._seeded = True


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
