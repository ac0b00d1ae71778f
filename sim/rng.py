"""Named random streams (declared in `contract.streams`, so the trio runtime derives them the same way)."""

from contract.streams import derive_seed

__all__ = ["derive_seed"]
