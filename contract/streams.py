"""Named random streams derived from one root seed with a stable hash, the same on both runtimes.

Python's `hash()` changes with PYTHONHASHSEED, so streams are keyed by SHA-256 of (seed, name): adding a
stream or a fault kind never reshuffles the others, and every process derives the same numbers.
"""

from __future__ import annotations

import hashlib


def derive_seed(root_seed: int, name: str) -> int:
    """A 64-bit seed for stream `name`, stable across processes and Python versions."""
    digest = hashlib.sha256(f"{root_seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")

