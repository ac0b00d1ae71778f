"""What `sim.explore` can run, and how one run of it goes: an async program, or a plain one that uses threads.

An async program is `async def main(rt, *args)`, written against the Runtime API. A thread program is a
plain callable `main(*args)` that may use the standard library's threading, time, queue, concurrent.futures,
random and sqlite3, unmodified; the thread runtime (`sim.threads`) schedules its threads. Which one a callable
is, and whether it takes the arguments given, is decided once, before any run: a mistake there is a usage
error, never a failure found in a run.

`Settings` are what a run needs besides its seed and strategy (the budgets, and for threads where they may
be preempted); a failure remembers them, so that it replays the same way.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sim.threads.patching import threads_patched
from sim.threads.program import run_threads
from sim.threads.tracing import GRANULARITIES, Preemption

if TYPE_CHECKING:
    from sim.core.world import RunResult, World

DEFAULT_MAX_STEPS = 1_000_000


@dataclass(frozen=True)
class Settings:
    """Budgets of one run, and where a thread program's threads may be preempted (`sim.threads.tracing`)."""

    max_steps: int = DEFAULT_MAX_STEPS
    max_time_s: float = math.inf
    preemption: str = "lines"

    def __post_init__(self) -> None:
        if not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError(f"max_steps must be a whole number of at least 1, not {self.max_steps!r}")
        if not self.max_time_s > 0:
            raise ValueError(f"max_time_s must be above 0, not {self.max_time_s!r}")
        if self.preemption not in GRANULARITIES:
            raise ValueError(f"preemption {self.preemption!r}: expected one of {', '.join(GRANULARITIES)}")


class Program:
    """A callable checked once as an async or a thread program with its arguments; `run` runs it on a World."""

    def __init__(self, main: Callable[..., Any], args: tuple[Any, ...], settings: Settings) -> None:
        if not callable(main):
            raise TypeError(f"a program is an async function or a plain callable, not {main!r}")
        self.main = main
        self.args = args
        self.settings = settings
        shape = _shape_of(main)
        self.threaded = shape.threaded
        self._preemption = Preemption(settings.preemption, paths=shape.own_file)
        _check_arguments(main, args, shape)

    @property
    def name(self) -> str:
        return program_name(self.main)

    def batch(self) -> AbstractContextManager[Any]:
        return batch()

    def run(self, world: World) -> RunResult:
        if self.threaded:
            return run_threads(world, self.main, *self.args, preemption=self._preemption)
        return world.run(self.main, *self.args)


def batch() -> AbstractContextManager[Any]:
    """What a batch of programs' runs shares: the patched standard library (an async program too: it then
    refuses to start a real thread, which would run outside the schedule)."""
    return threads_patched()


def program_name(main: Callable[..., Any]) -> str:
    return f"{getattr(main, '__module__', '?')}:{getattr(main, '__qualname__', repr(main))}"


@dataclass(frozen=True)
class _Shape:
    """What a program's callable is, found by inspection: the same for every search of it."""

    threaded: bool
    own_file: tuple[str, ...]
    signature: inspect.Signature | None  # None: a builtin without one


def _shape_of(main: Callable[..., Any]) -> _Shape:
    """The callable's shape, remembered for the callables searched most recently (a benchmark or a test suite
    searches one program many times, and inspecting it costs about as much as a run's thread start)."""
    try:
        return _remembered_shape(main)
    except TypeError:  # an unhashable callable object: inspected afresh
        return _inspect_shape(main)


def _inspect_shape(main: Callable[..., Any]) -> _Shape:
    try:
        signature: inspect.Signature | None = inspect.signature(main, follow_wrapped=False)
    except (TypeError, ValueError):
        signature = None
    return _Shape(not _is_async(main), _own_file(main), signature)


_remembered_shape = functools.lru_cache(maxsize=256)(_inspect_shape)


def _own_file(main: Callable[..., Any]) -> tuple[str, ...]:
    """The file that defines the program: its lines are the program's own, wherever it lives."""
    try:
        return (inspect.getfile(inspect.unwrap(main)),)
    except TypeError:
        return ()


def _is_async(main: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(main) or inspect.iscoroutinefunction(getattr(main, "__call__", None))  # noqa: B004  # the call method itself, not whether main is callable


def _check_arguments(main: Callable[..., Any], args: tuple[Any, ...], shape: _Shape) -> None:
    """A usage error now, rather than a TypeError in every run: the program must take what it is given."""
    signature, threaded = shape.signature, shape.threaded
    if signature is None:
        return  # a builtin without a signature: the run will say
    given = args if threaded else (None, *args)
    try:
        signature.bind(*given)
    except TypeError as error:
        name = getattr(main, "__qualname__", repr(main))
        if threaded and next(iter(signature.parameters), None) == "rt":
            raise TypeError(f"{name} takes `rt` but is not async: an async program is `async def {name}(rt, ...)`; "
                            "a thread program is a plain function of the arguments given to explore") from None
        kind = "a thread program (a plain function)" if threaded else "an async program"
        passed = f"{len(args)} argument{'s' if len(args) != 1 else ''}" + ("" if threaded else " after the runtime")
        raise TypeError(f"{name} is {kind} that cannot be called with {passed}: {error}") from None


def resolve(reference: str) -> dict[str, Callable[..., Any]]:
    """Programs named on a command line: `module:function`, or `module:MAPPING` for a dict of name -> program.

    ValueError saying what was wrong (the module, the attribute, or what it holds) for anything else.
    """
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"{reference!r}: expected MODULE:FUNCTION or MODULE:MAPPING (like sim.bench.classic_threads:PROGRAMS)")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{reference!r}: cannot import {module_name} ({error})") from None
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ValueError(f"{reference!r}: {module_name} has no {attribute}")
        found = getattr(found, part)
    if isinstance(found, dict) and found and all(callable(program) for program in found.values()):
        return {str(name): program for name, program in found.items()}
    if callable(found):
        return {attribute: found}
    raise ValueError(f"{reference!r}: expected a program or a dict of programs, found {type(found).__name__}")
