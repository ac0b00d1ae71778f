"""A workload file (`scenarios/swarm/*.toml`): ranges and rates a generator draws concrete runs from.

A scripted scenario places every fault; a workload only says what MAY happen: the world's shape as ranges
(`[swarm.world]`), user actions as rates over an active phase (`[swarm.actions]`), and each fault kind with
the chance it is enabled in a run, how many of it, where, and its parameters as ranges
(`[swarm.faults.<kind>]`). Each run enables a random subset of the action and fault kinds (swarm testing:
a run without Ctrl+C lets a stall reach states a Ctrl+C would have cut short). The keys are declared on the
dataclasses, as for scripted scenarios (`sim.scenario.declare`), and checked with the same specs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from contract.params import REQUIRED
from contract.vocabulary import TITLE_SOURCES
from sim.scenario.declare import key, table_of
from sim.scenario.model import EXPECT, MAX_STORE_TEXT, NAME_PATTERN, NAME_TEXT, TARGET_PATTERN, TARGET_TEXT, ExpectSpec
from sim.scenario.schema import Choice, Context, Derived, Duration, Float, Int, ListOf, Location, Probability, Reference, Registered, Spec, Str, Table
from sim.swarm.ranges import ConfigRanges, PickOf, RangeOf, Span, ValuePick


class ActionKind(StrEnum):
    """What the user side may do during the active phase (each becomes scripted drives)."""

    TURN = "turn"  # a user turn at a terminal (cli agents)
    MESSAGE = "message"  # a platform message through the gateway (gateway agents)
    COMPRESS = "compress"  # /compress
    CTRL_C = "ctrl_c"  # one Ctrl+C (cli agents)
    CTRL_C_REPEAT = "ctrl_c_repeat"  # two or three Ctrl+C within a second (cli agents)
    CTRL_C_TYPED = "ctrl_c_typed"  # Ctrl+C with the next question typed: it runs once the grace is over (cli agents)
    END_SESSION = "end_session"  # the frontend ends the agent's session
    RESTART = "restart"  # the agent's process crashes and starts again
    TITLE = "title"  # a /title or the auto-titler


@dataclass(frozen=True)
class ActionRate:
    """How often one action kind happens while it is enabled, and how often it is enabled."""

    rate: float = key(Float("Expected actions per minute of the active phase, per agent it applies to.", min=0,
                            default=0.0, example="2.0"), name="per_minute")
    probability: float | None = key(Probability(
        "The chance this kind is enabled in a run; absent, swarm.enable.", default=None, example="0.5"))


ACTION = table_of(ActionRate, "One action kind's rate.", default={})


@dataclass(frozen=True)
class ActionRates:
    """Every action kind's rate; a kind left out never happens."""

    turn: ActionRate = key(ACTION)
    message: ActionRate = key(ACTION)
    compress: ActionRate = key(ACTION)
    ctrl_c: ActionRate = key(ACTION)
    ctrl_c_repeat: ActionRate = key(ACTION)
    ctrl_c_typed: ActionRate = key(ACTION)
    end_session: ActionRate = key(ACTION)
    restart: ActionRate = key(ACTION)
    title: ActionRate = key(ACTION)

    def of(self, kind: ActionKind) -> ActionRate:
        return getattr(self, kind)


ACTIONS = table_of(ActionRates, "User actions during the active phase, each kind a table of its rate.", default={})


@dataclass(frozen=True)
class WorldRanges:
    """The world's shape, drawn per run."""

    sessions: Span = key(RangeOf("Sessions when the run starts.", item=Int(min=1, max=20), default=1, example="[1, 3]"))
    lineage: float = key(Probability(
        "The chance that a session after the first continues the previous one (its compression child; the "
        "parent ended).", default=0.0, example="0.3"))
    fork: float = key(Probability(
        "The chance that a session after the first, if not a continuation, is a fork of the previous one (a branch, "
        "delegate or reset child naming it in a marker; the parent stays live).", default=0.0, example="0.3"))
    orphan: float = key(Probability(
        "The chance that a session nothing continues was closed by compression all the same (a legacy rotation "
        "that died before it published its child).", default=0.0, example="0.1"))
    messages: Span = key(RangeOf("Messages already in each session.", item=Int(min=0, max=400), default=[0, 20],
                                 example="[0, 40]"))
    agents: Span = key(RangeOf("Agents.", item=Int(min=1, max=12), default=1, example="[1, 3]"))
    processes: Span = key(RangeOf("Processes the agents live in (at most one per agent).", item=Int(min=1, max=12),
                                  default=1, example="[1, 2]"))
    gateway: float = key(Probability("The chance that an agent is reached through the gateway rather than a terminal.",
                                     default=0.0, example="0.3"))
    config: dict[str, Span | ValuePick] = key(ConfigRanges(
        "Reference config fields (`python -m sim list config`), each a value, a range [low, high] (numbers) or a "
        "list to pick from.", default={}, example="{ threshold_tokens = [300, 2000], in_place = [true, false] }"))


WORLD_RANGES = table_of(WorldRanges, "The world's shape, drawn per run.", default={})

TRIGGER_FORMS = ("nth", "at", "per_hit")  # the forms a fault kind draws from unless its table names others
AFTER_EVENT = "after_event"  # a further form: the first hit after a protocol step (needs `after_events`)

# The keys every fault kind's table takes besides its parameters.
FAULT_KEYS: dict[str, Spec] = {
    "probability": Probability("The chance the kind is enabled in a run; absent, swarm.enable.", default=None,
                               example="0.5"),
    "count": RangeOf("Faults of this kind in a run where it is enabled.", item=Int(min=1, max=50), default=[1, 2],
                     example="[1, 3]"),
    "points": ListOf(
        "Named points where it may fire (a trailing * selects a prefix); one is drawn per fault. Required for "
        "kinds that act at a point; an action kind with points fires at the nth hit of one instead of at a time.",
        item=Registered(source="points", noun="a named point", glob=True), plural="named points", default=None,
        example='["provider.*", "db.append_messages"]'),
    "triggers": PickOf(
        'How a fault with points is triggered, one drawn per fault: "nth" (the nth hit of its point), "at" (the '
        'first hit after a time in the active phase), "per_hit" (every hit fires with a drawn chance, '
        'BUGGIFY-style, up to its times) or "after_event" (the first hit after the run\'s first event of a kind '
        'drawn from `after_events`: a step of the protocol, wherever in time it falls).',
        item=Choice(values=(*TRIGGER_FORMS, AFTER_EVENT)), default=list(TRIGGER_FORMS),
        example='["nth", "per_hit", "after_event"]'),
    "after_events": ListOf(
        'With the "after_event" trigger: the event kinds (python -m sim list events) one is drawn from.',
        item=Registered(source="events", noun="an event kind"), plural="event kinds", default=None,
        example='["fence.begin_ok", "compaction.summary_started"]'),
    "nth": RangeOf('With the "nth" trigger: the hit of the point it fires at.', item=Int(min=1, max=1000),
                   default=[1, 3], example="[1, 5]"),
    "per_hit": RangeOf('With the "per_hit" trigger: the chance each hit fires.', item=Probability(),
                       default=[0.05, 0.5], example="[0.1, 1.0]"),
}


@dataclass(frozen=True)
class FaultDraw:
    """One fault kind as a workload declares it: when it is on, how many, where, its parameters' ranges."""

    kind: str
    probability: float | None
    count: Span
    points: tuple[str, ...] | None  # concrete point names, globs expanded
    triggers: tuple[str, ...]
    after_events: tuple[str, ...]  # what an "after_event" trigger waits for (empty: the form is not drawn)
    nth: Span
    per_hit: Span
    params: dict[str, Span | ValuePick]  # the kind's parameters the workload draws; the rest take their defaults
    world_params: dict[str, str]  # parameters naming something of the world -> its namespace (drawn from the world)
    texts: tuple[str, ...]  # text parameters the workload leaves to the generator (each fault gets its own text)
    at_point: bool  # the kind acts at a point, so it needs one
    written: tuple[str, ...] = ()  # its points as the workload wrote them (names, and prefixes ending in *)


class FaultKinds(Spec):
    """`[swarm.faults.<kind>]` tables: the keys are fault kinds, each table FAULT_KEYS plus the kind's parameters.

    A parameter is a range (numbers, durations) or a list to pick from (choices, texts); a parameter that
    names a session, agent or process is drawn from the run's world and cannot be written here.
    """

    type_name = "a table of fault kinds (python -m sim list faults), each a table of its settings"

    def check(self, value: Any, where: Location, ctx: Context) -> dict[str, FaultDraw]:
        if not isinstance(value, dict):
            raise self.reject(value, where, ctx)
        kinds = Registered(source="fault_kinds", noun="a fault kind")
        return {kind: _fault_draw(kinds.check(kind, where.key(kind), ctx), table, where.key(kind), ctx)
                for kind, table in value.items()}


def _fault_draw(kind: str, value: Any, where: Location, ctx: Context) -> FaultDraw:
    params: Mapping[str, Spec] = ctx.registry.fault_kinds[kind]
    at_point = "point" in params
    world_params = {name: spec.namespace for name, spec in params.items() if isinstance(spec, Reference)}
    drawn = {name: _drawn(spec) for name, spec in params.items() if name != "point" and name not in world_params}
    checked = Table(f"the fault kind {kind}", fields={**FAULT_KEYS, **drawn}).check(value, where, ctx)
    if at_point and checked["points"] is None:
        raise where.key("points").error(f"the points where {kind} may act (it acts at a named point)", "none")
    for name in drawn:
        if params[name].default is REQUIRED and checked[name] is None:
            raise where.key(name).error(f"a value or range for {kind}'s {name} (it has no default)", "none")
    triggers, after_events = checked["triggers"].values, checked["after_events"] or ()
    if (AFTER_EVENT in triggers) != bool(after_events):
        found = {None: "none", (): "an empty list"}.get(checked["after_events"], 'event kinds, but no "after_event" trigger')
        raise where.key("after_events").error('event kinds exactly when "after_event" is one of the triggers', found)
    points = None if checked["points"] is None else _expand(checked["points"], ctx)
    given = {name: checked[name] for name in drawn if checked[name] is not None}
    texts = tuple(name for name, spec in params.items() if type(spec) is Str and name not in given)
    return FaultDraw(kind, checked["probability"], checked["count"], points, triggers, after_events, checked["nth"],
                     checked["per_hit"], given, world_params, texts, at_point, tuple(checked["points"] or ()))


def _drawn(spec: Spec) -> Spec:
    """A parameter's spec as a workload writes it: a range of numbers, or values to pick from."""
    if isinstance(spec, (Duration, Int)):
        return RangeOf(spec.description, item=spec, default=None)
    if isinstance(spec, (Choice, Str)):
        return PickOf(spec.description, item=spec, default=None)
    raise TypeError(f"no workload form for a {type(spec).__name__} parameter")


def _expand(points: tuple[str, ...], ctx: Context) -> tuple[str, ...]:
    """Globs as the concrete points they select, in the registry's order, each once."""
    names = list(ctx.registry.points)
    chosen = [name for point in points for name in names
              if name == point or (point.endswith("*") and name.startswith(point[:-1]))]
    return tuple(dict.fromkeys(chosen))


@dataclass(frozen=True)
class SwarmSpec:
    """The `[swarm]` table: the phases, the exploration budget, and the world, actions and faults."""

    active_s: float = key(Duration("How long actions and faults happen.", default="5m", example='"10m"'), name="active")
    quiet_s: float = key(Duration(
        "After the active phase, how long nothing happens before the probe turns (longer if a drawn stall, "
        "timeout or restart needs it).", default="15m", example='"30m"'), name="quiet")
    enable: float = key(Probability("The chance each action and fault kind is enabled in a run (swarm testing), "
                                    "unless its own probability says otherwise.", default=0.5, example="0.7"))
    strategies: tuple[str, ...] = key(ListOf(
        "Strategies a run's scheduler is drawn from.", item=Registered(source="strategies", noun="a strategy"),
        plural="strategy names", non_empty=True, default=["random", "pct", "pct-d10"], example='["random", "pct"]'))
    runs: int = key(Int("Runs of a campaign when no --runs or --time-budget is given.", min=1, default=50, example="200"))
    max_steps: int = key(Int("Scheduler steps allowed per run.", min=1, default=400_000, example="1000000"))
    max_store_mb: float = key(Float(MAX_STORE_TEXT, min=0.01, default=64, example="256"))
    world: WorldRanges = key(WORLD_RANGES)
    actions: ActionRates = key(ACTIONS)
    faults: dict[str, FaultDraw] = key(FaultKinds("Fault kinds that may happen, each with its settings.", default={},
                                                  example='{ stall = { points = ["provider.*"], duration = ["1s", "10m"] } }'))


SWARM = table_of(SwarmSpec, "A generated workload: ranges and rates to draw runs from.")


@dataclass(frozen=True)
class Workload:
    """One workload file, loaded and validated."""

    path: str
    name: str = key(Str("The workload's name in reports and generated scenario names.", pattern=NAME_PATTERN.pattern,
                        pattern_text=NAME_TEXT, default=Derived("the file name without .toml"), example='"single_agent"'))
    description: str | None = key(Str("What the workload exercises.", default=None, example='"one agent, every fault"'))
    target: str = key(Str(
        "The system its runs run on (`--target` overrides it): the reference, or a release like `hermes==0.19.0`. "
        "A workload that names a release may ask only what the release can take (bad input otherwise); given "
        "`--target`, a workload is cut to what that target can take.",
        pattern=TARGET_PATTERN, pattern_text=TARGET_TEXT, default="reference", example='"hermes==0.19.0"'))
    swarm: SwarmSpec = key(SWARM)
    expect: ExpectSpec = key(EXPECT)
    cuts: tuple[Any, ...] = ()  # what its target could not take (`sim.swarm.targeted.Cut`), given --target
    title_sources: tuple[str, ...] = TITLE_SOURCES  # who a generated title may come from: the sources its target takes


WORKLOAD = table_of(Workload, "A workload file.", title="Top level of a workload")
