"""The collector and a batch of runs: what lives for the whole batch is kept out of the collector's scans.

A process that runs thousands of scenarios holds the same long-lived objects throughout (imported code, the
registry, loaded workloads and scenarios), and every full collection walked all of them again: about 3% of a
generated run's cost. Freezing them (`gc.freeze`) leaves the collector only what the runs themselves
allocate. Traces do not depend on it: nothing in a run relies on when the collector runs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_long_lived() -> None:
    """Collect once, then move everything still alive out of the collector's reach for the rest of the process."""
    gc.collect()
    gc.freeze()


@contextmanager
def frozen_for_batch() -> Iterator[None]:
    """Keep what is alive as a batch of thread runs starts out of the collector's scans for the batch's length:
    a full collection then walks what the batch made, not the whole process (the test suite's or a benchmark's
    modules and objects). A run is tens of objects to collect, a full collection of a loaded process 13-20 ms:
    one landing among a search's few runs cost more than the runs. Nothing is collected less: what was frozen
    goes back to the oldest generation at the end. A process that froze objects itself is left as it is."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
