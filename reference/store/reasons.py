"""End-reason taxonomy: which stamps a rotation may heal, which it must respect, which owns lineage."""

from __future__ import annotations

from contract.vocabulary import AUTOMATIC_END_REASONS, COMPRESSION_END, DELIBERATE_END_REASONS, EXPLICIT_CLOSE_REASONS  # noqa: F401  (re-exported: the store's taxonomy is the contract's)

# Every stamp a rotation must not publish over (its pre-flush guard and publication agree on this set).
UNPUBLISHABLE_END_REASONS = DELIBERATE_END_REASONS | EXPLICIT_CLOSE_REASONS

# `compression` is accepted from end_session only to reproduce the legacy non-atomic rotation (R20).
KNOWN_END_REASONS = AUTOMATIC_END_REASONS | UNPUBLISHABLE_END_REASONS | {COMPRESSION_END}
