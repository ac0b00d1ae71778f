"""Signal handlers in a run: `signal.signal` and `signal.getsignal` keep the program's handlers per run.

A real program sets its handlers from its main thread, which under the runtime is not the process's main
thread, where CPython insists they be set. So the run's main thread gets what the real one would (the previous
handler back, the real argument errors) and the handler is kept in the run, never installed: no signal arrives
during a run, and delivering one (`os.kill`, `signal.raise_signal`, `alarm`) is refused (`unmodelled.py`).
Any other simulated thread gets CPython's own ValueError, as a thread that is not the main one does.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

from sim.threads.baton import current

_UNCATCHABLE = frozenset(getattr(signal, name) for name in ("SIGKILL", "SIGSTOP") if hasattr(signal, name))


def set_handler(previous: Callable[[int, Any], Any]) -> Callable[[int, Any], Any]:
    """`signal.signal`: for the run's main thread, the handler kept in the run; for any other, `previous`."""

    def signal_(signalnum: int, handler: Any) -> Any:
        sim = current()
        if sim is None or not sim.run.is_main(sim):
            return previous(signalnum, handler)
        number = _checked(signalnum)
        if not callable(handler) and handler not in (signal.SIG_IGN, signal.SIG_DFL):
            raise TypeError("signal handler must be signal.SIG_IGN, signal.SIG_DFL, or a callable object")
        if number in _UNCATCHABLE:
            raise OSError(22, "Invalid argument")
        handlers = sim.run.signal_handlers
        old = handlers.get(number, signal.getsignal(number))
        handlers[number] = handler
        return old

    signal_.__name__ = signal_.__qualname__ = "signal"
    return signal_


def get_handler(previous: Callable[[int], Any]) -> Callable[[int], Any]:
    """`signal.getsignal`: the handler the run set, else the process's."""

    def getsignal(signalnum: int) -> Any:
        sim = current()
        if sim is None:
            return previous(signalnum)
        number = _checked(signalnum)
        handlers = sim.run.signal_handlers
        return handlers[number] if number in handlers else previous(number)

    return getsignal


def _checked(signalnum: int) -> int:
    number = int(signalnum)
    if not 1 <= number < signal.NSIG:
        raise ValueError("signal number out of range")
    return number
