"""Named random streams derived from one root seed with a stable hash.

Python's `hash()` changes with PYTHONHASHSEED, so streams are keyed by SHA-256 of (seed, name): adding a
stream or a fault kind never reshuffles the others, and every process derives the same numbers.
"""

from __future__ import annotations

import hashlib
import random


def derive_seed(root_seed: int, name: str) -> int:
    """A 64-bit seed for stream `name`, stable across processes and Python versions."""
    digest = hashlib.sha256(f"{root_seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def stream(root_seed: int, name: str) -> random.Random:
    """A fresh generator for stream `name` of the run seeded with `root_seed`."""
    return random.Random(derive_seed(root_seed, name))
