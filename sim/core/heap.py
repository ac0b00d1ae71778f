"""The collector and a batch of runs: what lives for the whole batch is kept out of the collector's scans.

A process that runs thousands of scenarios holds the same long-lived objects throughout (imported code, the
registry, loaded workloads and scenarios), and every full collection walked all of them again: about 3% of a
generated run's cost. Freezing them (`gc.freeze`) leaves the collector only what the runs themselves
allocate. Traces do not depend on it: nothing in a run relies on when the collector runs.
"""

from __future__ import annotations

import gc


def freeze_long_lived() -> None:
    """Collect once, then move everything still alive out of the collector's reach for the rest of the process."""
    gc.collect()
    gc.freeze()
