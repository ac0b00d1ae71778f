"""The typed history of a run (declared in `contract.history`, shared with the trio runtime)."""

from contract.history import HistoryEvent

__all__ = ["HistoryEvent"]
