"""Pin the wall clock (`time.time` and `datetime.now`) to virtual time while simulated runs execute.

Starting freezegun scans every loaded module (milliseconds), so a batch of runs shares one freeze and each
run moves the frozen time as its virtual clock advances. The freeze is always undone on exit. Every caller
sees the frozen clock: freezegun would give the real one to calls made from modules on its ignore list
(`threading` and `queue` among them), and a simulated thread's code runs below `threading.Thread.run`.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from contextlib import contextmanager

import freezegun
import freezegun.api

# Virtual time 0 maps to this wall-clock instant for code that reads the wall clock.
EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
# The same instant as the freezer holds it: a naive UTC datetime (its `time_to_freeze`).
_NAIVE_EPOCH = EPOCH.replace(tzinfo=None)

_active: freezegun.api.FrozenDateTimeFactory | None = None


@contextmanager
def frozen_time() -> Iterator[None]:
    """Freeze the wall clock for a batch of runs (re-entrant: an inner batch reuses the outer freeze)."""
    global _active
    if _active is not None:
        yield
        return
    freezer = freezegun.freeze_time(EPOCH, tick=False)
    started = freezer.start()
    assert isinstance(started, freezegun.api.FrozenDateTimeFactory), started  # tick=False: a frozen clock, no ticks
    _active = started
    inspection_limit, freezegun.api.call_stack_inspection_limit = freezegun.api.call_stack_inspection_limit, 0
    try:
        yield
    finally:
        freezegun.api.call_stack_inspection_limit = inspection_limit
        freezer.stop()
        _active = None


def is_frozen() -> bool:
    return _active is not None


def move_to(virtual_s: float) -> None:
    """Set the frozen wall clock to EPOCH + virtual time (a no-op outside a batch).

    The clock moves on every timer a run fires, tens of thousands of times in a batch. The freezer's own
    `move_to` parses its argument, converts it to naive UTC and steps there through `tick` (4% of a generated
    run); the instant it ends at is simply its `time_to_freeze`, so that is set directly, to the same value."""
    if _active is not None:
        _active.time_to_freeze = _NAIVE_EPOCH + datetime.timedelta(seconds=virtual_s)
