"""What an invariant is, what it may look at, and what it reports.

An invariant is a small stateful checker for one run. Safety properties are checked as each event is
recorded: every step that changes something observable records an event, so this is "after every step"
without paying for a check on steps that changed nothing. An invariant says which events it reads by
decorating a method per event class with `@handles(...)`; the method gets the typed event and its record
(time, task, sequence number) and may return a violation. Liveness properties, and safety properties of
the final state, are checked once the run is quiescent (`at_end`). What the world starts with (its sessions,
written before anything runs) is read once, before the first event (`at_start`). A violation names the invariant,
explains itself in one line, and lists the events that witness it.
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast, overload

from contract.events import Event
from contract.history import HistoryEvent
from contract.store import StoreView
from sim.invariants.facts import RunFacts

V = TypeVar("V")
Method = TypeVar("Method", bound=Callable[..., Any])


@dataclass(frozen=True)
class Violation:
    invariant: str
    explanation: str
    witnesses: tuple[int, ...]
    time: float

    def as_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "explanation": self.explanation, "witnesses": list(self.witnesses), "time": self.time}


class ConfigView(Protocol):
    """The settings of the system under test the oracle reads (each invariant names its own in `settings`)."""

    @property
    def threshold_tokens(self) -> int: ...
    @property
    def context_limit_tokens(self) -> int: ...
    @property
    def lease_ttl_s(self) -> float: ...
    @property
    def refresh_failure_budget(self) -> int: ...
    @property
    def idle_timeout_s(self) -> float: ...
    @property
    def ceiling_timeout_s(self) -> float: ...
    @property
    def pool_cap(self) -> int: ...
    @property
    def keep_recent(self) -> int: ...
    @property
    def tail_count(self) -> int: ...
    @property
    def summary_failure_cooldown_s(self) -> float: ...
    @property
    def split_failure_cooldown_s(self) -> float: ...
    @property
    def breaker_threshold(self) -> int: ...
    @property
    def commit_overrun_slice_s(self) -> float: ...
    @property
    def cancelled_worker_grace_s(self) -> float: ...
    @property
    def static_fallback_summary(self) -> bool: ...
    @property
    def gateway_writes_on_receipt(self) -> bool: ...

    def timeout_cooldown_s(self, consecutive_timeouts: int) -> float: ...


class AgentView(Protocol):
    """An agent's live transcript, as the oracle compares it with the store."""

    @property
    def session_id(self) -> str: ...
    @property
    def messages(self) -> Sequence[Mapping[str, Any]]: ...  # each a message dict (role, content, `_row_id`, ...)


class AgentSpecView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def process(self) -> str: ...  # the process it runs in (a restart keeps the name)


class AgentSlotView(Protocol):
    """One agent of the run: its spec and the agent itself."""

    @property
    def spec(self) -> AgentSpecView: ...
    @property
    def agent(self) -> AgentView: ...


class SystemView(Protocol):
    """What invariants may read of the system under test besides the history (read-only: a system may answer
    with a subtype, or compute it)."""

    @property
    def store(self) -> StoreView: ...

    @property
    def config(self) -> ConfigView: ...

    @property
    def ctrl_c_grace_s(self) -> float: ...  # the terminal's Ctrl+C grace period (a frontend setting, not the compaction config's)

    @property
    def agents(self) -> Mapping[str, AgentSlotView]: ...  # by name

    def process_of(self, incarnation: str) -> str: ...  # the process (as `.spec.process` names it) an incarnation is

    def holder_is_dead(self, holder: str) -> bool: ...

    def agent_of_task(self, task: str) -> str | None: ...  # the agent whose user a task acts for; None if unknown


class _PerRun(Generic[V]):
    """A piece of state an invariant keeps for its run, declared on its class (`per_run`): each instance makes its
    own when first reading it, and from then on reads it from its own `__dict__` (so at the speed of an attribute
    set in `__init__`, where crash amnesia finds it as before)."""

    def __init__(self, factory: Callable[[], V]) -> None:
        self._factory = factory

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> _PerRun[V]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> V: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> V | _PerRun[V]:
        if instance is None:
            return self
        value = self._factory()
        vars(instance)[self._name] = value
        return value


def per_run(factory: Callable[[], V]) -> V:
    """State kept for one run, declared on the invariant's class rather than made in an `__init__` of its own:
    `_seen: dict[str, float] = per_run(dict)`."""
    return cast(V, _PerRun(factory))  # read through the instance, it is what `factory` makes


def _first_paragraph(docstring: str) -> str:
    """A docstring's first paragraph on one line: what an invariant states, as listings and reports print it."""
    return " ".join(inspect.cleandoc(docstring).split("\n\n")[0].split())


def handles(*classes: type[Event]) -> Callable[[Method], Method]:
    """Make the decorated method the invariant's reaction to events of these classes (subclasses included)."""

    def mark(method: Method) -> Method:
        method.handled_events = classes  # type: ignore[attr-defined]  # a mark read back by __init_subclass__
        return method

    return mark


class Invariant:
    name: ClassVar[str]
    races: ClassVar[tuple[str, ...]]
    description: ClassVar[str]  # the property it judges, for listings and reports; by default its docstring's first paragraph
    # The event kinds it cannot judge without (the mechanism it judges must exist and be observed); None: every
    # kind it reads. The other kinds it reads only refine a judgement, so a target may lack their mechanism.
    needs: ClassVar[frozenset[str] | None] = None
    settings: ClassVar[frozenset[str]] = frozenset()  # the fields of the system's configuration it reads
    holder_names_attempt: ClassVar[bool] = False  # it reads a lease holder's attempt out of the holder id
    learns: ClassVar[tuple[type[Event], ...]] = ()  # the events of the facts it reads (sim/invariants/facts.py)
    _handlers: ClassVar[dict[type[Event], str]] = {}  # event class -> the name of the method that reads it

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "description" not in vars(cls) and vars(cls).get("__doc__"):
            cls.description = _first_paragraph(vars(cls)["__doc__"])  # the property is stated once, in the docstring
        handlers = dict(cls._handlers)  # a subclass keeps its bases' handlers and may override them by name
        for name, member in vars(cls).items():
            for event_class in getattr(member, "handled_events", ()):
                handlers[event_class] = name
        cls._handlers = handlers

    @classmethod
    def reads(cls) -> frozenset[str]:
        """The event kinds it reads: its handlers', and those of the facts it reads."""
        return frozenset(event.kind for event in (*cls._handlers, *cls.learns))

    @classmethod
    def applicability(cls, emits: frozenset[str], absent: frozenset[str], settings: frozenset[str],
                      holders_name_attempts: bool) -> str | None:
        """Why it cannot judge a target that emits `emits`, lacks the mechanisms of `absent`, has the settings
        `settings` and whose lease holder ids do or do not name their attempt (None: it can judge it): every kind
        it needs must be emitted, and every other it reads emitted or impossible there."""
        if cls.holder_names_attempt and not holders_name_attempts:
            return "reads a lease holder's attempt out of its holder id, which the target's holder ids do not name"
        lacking = sorted(cls.settings - settings)
        if lacking:
            return f"reads the setting {', '.join(lacking)}, which the target does not have"
        needed = cls.reads() if cls.needs is None else cls.needs
        missing = sorted(needed - emits)
        if missing:
            return f"needs {', '.join(missing)}, which the target does not emit"
        unknown = sorted(cls.reads() - emits - absent)
        if unknown:
            return f"reads {', '.join(unknown)}, which the target neither emits nor lacks the mechanism of"
        return None

    def __init__(self, system: SystemView) -> None:
        self.system = system
        self._facts: RunFacts | None = None  # its own, made when first read, unless a set hands it the one it shares

    @property
    def facts(self) -> RunFacts:
        """The model of the run it reads (sim/invariants/facts.py)."""
        if self._facts is None:
            self._facts = RunFacts(self.system)
        return self._facts

    @classmethod
    def handler_name(cls, event_class: type[Event]) -> str | None:
        """The method that reads events of `event_class` (the one for its most specific handled class), if any."""
        for klass in event_class.__mro__:
            name = cls._handlers.get(klass)
            if name is not None:
                return name
        return None

    def on_event(self, record: HistoryEvent[Event]) -> Violation | None:
        """Judge one event on its own (outside a set): its facts first, then its handler."""
        self.facts.learn(record)
        name = self.handler_name(type(record.event))
        violation: Violation | None = None if name is None else getattr(self, name)(record.event, record)
        self.facts.settle(record, (self,))
        return violation

    def slot_of_task(self, task: str) -> AgentSlotView | None:
        """The slot (`.agent`, `.spec`) of the agent whose user `task` acts for; None for any other task."""
        return self.system.agents.get(self.system.agent_of_task(task) or "")

    def at_start(self) -> None:
        """Read the world as it starts, once its sessions are written and before anything runs."""

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> Violation | None:
        return None

    def violation(self, explanation: str, *witnesses: HistoryEvent[Event] | None) -> Violation:
        """A violation witnessed by `witnesses` (a None, for a check with no triggering event, is skipped)."""
        present = [record for record in witnesses if record is not None]
        time = max((record.time for record in present), default=0.0)
        return Violation(self.name, explanation, tuple(record.seq for record in present), time)


class Handler(Protocol):
    """An invariant's bound `@handles` method, as the set routes events to it."""

    __self__: Invariant

    def __call__(self, event: Event, record: HistoryEvent[Event], /) -> Violation | None: ...


Plan = dict[type[Event], list[tuple[int, str]]]  # event class -> (invariant's position, its method) that read it


class InvariantSet:
    """The invariants of one run, each event handed only to those that read its class, in their order.

    Which invariants read which class is worked out once per process for each choice of invariants (every run
    of a scenario makes the same choice), so a run only binds the methods of the classes it meets.

    A check that raises is reported as its invariant's violation, naming the exception and where it was raised,
    and is off for the rest of the run. The exception never reaches the task whose event was being judged: the
    reference would take it for an error of its own (a failed commit, a caught programming error) and act on it,
    so a broken check would change the run it judges and read as a bug of the reference.
    """

    _plans: ClassVar[dict[tuple[type[Invariant], ...], Plan]] = {}

    def __init__(self, invariants: Iterable[Invariant]) -> None:
        self.invariants = list(invariants)
        self.facts = RunFacts(self.invariants[0].system) if self.invariants else None  # the one model of the run they read
        for invariant in self.invariants:
            invariant._facts = self.facts
        self._plan = self._plans.setdefault(tuple(type(invariant) for invariant in self.invariants), {})
        self._routes: dict[type[Event], list[Handler]] = {}
        self._off: set[int] = set()  # positions of the invariants whose check raised
        self._raised_at_start: list[Violation] = []

    def _route(self, event_class: type[Event]) -> list[Handler]:
        plan = self._plan.get(event_class)
        if plan is None:
            names = ((position, type(invariant).handler_name(event_class)) for position, invariant in enumerate(self.invariants))
            plan = self._plan[event_class] = [(position, name) for position, name in names if name is not None]
        routes = self._routes[event_class] = [getattr(self.invariants[position], name) for position, name in plan
                                              if position not in self._off]
        return routes

    def on_event(self, record: HistoryEvent[Event]) -> list[Violation]:
        if self.facts is None:
            return []
        self.facts.learn(record)
        event = record.event
        routes = self._routes.get(type(event))
        if routes is None:
            routes = self._route(type(event))
        violations = []
        for handler in routes:
            try:
                violation = handler(event, record)
            except Exception as error:
                violation = self._turn_off(handler.__self__, error, record)
            if violation is not None:
                violations.append(violation)
        self.facts.settle(record, self.invariants)
        return violations

    def at_start(self) -> None:
        """The world as it starts; a check that raises here is reported at the end (it has no event to name)."""
        for invariant in self.invariants:
            try:
                invariant.at_start()
            except Exception as error:
                self._raised_at_start.append(self._turn_off(invariant, error, None))

    def at_end(self, history: Sequence[HistoryEvent[Event]]) -> list[Violation]:
        violations = list(self._raised_at_start)
        for position, invariant in enumerate(self.invariants):
            if position in self._off:
                continue
            try:
                violation = invariant.at_end(history)
            except Exception as error:
                violation = self._turn_off(invariant, error, None)
            if violation is not None:
                violations.append(violation)
        return violations

    def _turn_off(self, invariant: Invariant, error: Exception, record: HistoryEvent[Event] | None) -> Violation:
        """`invariant`'s check raised `error`: off for the rest of the run, and reported as its violation."""
        self._off.add(next(position for position, member in enumerate(self.invariants) if member is invariant))
        self._routes = {event_class: [handler for handler in routes if handler.__self__ is not invariant]
                        for event_class, routes in self._routes.items()}
        frame = traceback.extract_tb(error.__traceback__)[-1]
        return invariant.violation(
            f"the check itself raised {type(error).__name__}: {error} ({Path(frame.filename).name}:{frame.lineno}, in "
            f"{frame.name}): a bug in the check, or a state it was not written for; it is off for the rest of the run",
            record,
        )
