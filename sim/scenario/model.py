"""A loaded scenario, and the keys of a scenario file: each field declares the key it is read from.

The dataclasses are plain frozen values, checked once by the loader, so the harness never re-validates:
sequences are tuples and every default is filled in, so two loads of the same file compare equal and a
scenario can be handed to worker processes as is. Durations are float seconds of virtual time. Each field
that a file writes names its key and the spec that checks it (`sim.scenario.declare`); the tables below are
derived from the dataclasses, and `scenarios/README.md` renders them (`sim.scenario.docs`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from contract.vocabulary import TITLE_SOURCES
from sim.scenario.declare import inline, key, table_of, tagged_table_of
from sim.scenario.schema import (
    Choice,
    ConfigOverrides,
    Declared,
    Derived,
    Duration,
    Either,
    ExactlyOne,
    Float,
    Int,
    JsonTable,
    ListOf,
    Probability,
    Reference,
    Registered,
    Str,
)

NAME_PATTERN = re.compile(r"[a-z0-9_]+")
NAME_TEXT = "a name of lowercase letters, digits and _"
FRONTENDS = ("cli", "gateway")


@dataclass(frozen=True)
class TriggerSpec:
    """When a drive or fault fires; exactly one of `at`, `after_event`, `nth`, `probability` is set.

    `at` arms at a virtual time; `after_event` at the first event of that kind; `nth` at the nth hit of
    `point`; `probability` arms the trigger for the whole run with that chance (one draw), after which it
    fires at hits of `point`, each with chance `per_hit` (None: every hit). `point` also says where a
    point fault acts. `delay` is added after the trigger arms; past `until`, the trigger never fires.
    """

    at: float | None = key(Duration("Arm at this virtual time after the run starts.", default=None, example='"0s"'))
    after_event: str | None = key(Registered(
        "Arm when the first event of this kind is recorded.",
        source="events", noun="an event kind", default=None, example='"compaction.summary_started"',
    ))
    nth: int | None = key(Int("Fire at the nth hit of `point` (1 is the first).", min=1, default=None, example="3"))
    point: str | None = key(Registered(
        "A named point in the reference: where `nth` and `probability` count hits, and where a point fault "
        "(a stall, a DB error) acts. A trailing * selects every point with that prefix.",
        source="points", noun="a named point", glob=True, default=None, example='"provider.summary"',
    ))
    probability: float | None = key(Probability(
        "BUGGIFY-style: one draw per run arms the trigger with this chance; armed, it fires at hits of `point`.",
        default=None, example="0.25",
    ))
    per_hit: float | None = key(Probability(
        "With `probability`: the chance that an armed trigger fires at each hit of `point`; absent, every hit.",
        default=None, example="0.5",
    ))
    delay: float = key(Duration("Wait this long after the trigger arms before acting.", default="0s", example='"1s"'))
    until: float | None = key(Duration(
        "Act only up to this virtual time: a hit, moment or event after it does nothing (a generated run's quiet "
        "phase).", default=None, example='"5m"'))


TRIGGER = table_of(
    TriggerSpec, "When a drive or fault fires.",
    title="Trigger keys, in every `[[drive]]` and `[[fault]]`",
    one_of=(ExactlyOne("the trigger", ("at", "after_event", "nth", "probability")),),
    requires={"nth": ("point",), "probability": ("point",), "per_hit": ("probability",)},
)


@dataclass(frozen=True)
class SessionSpec:
    """A session that exists before the run starts, with `messages` already in it."""

    id: str = key(Declared(
        "Names the session for parents, agents, drives and faults.", namespace="session", noun="a session id", example='"s1"',
    ))
    messages: int = key(Int(
        "Messages already in the session, alternately user and assistant, 160 characters (41 tokens) each.",
        min=0, default=0, example="40",
    ))
    parent: str | None = key(Reference(
        "The session this one continues (its compression parent); it must come earlier in the list.",
        namespace="session", default=None, example='"s0"',
    ))
    end_reason: str | None = key(Str(
        "Marks the session as already ended, for this reason.",
        pattern=r"[a-z_]+", pattern_text='an end reason like "idle" (lowercase letters and _)', default=None, example='"idle"',
    ))
    model_config: dict[str, Any] = key(JsonTable("The model settings stored with the session.", default={}, example='{ model = "m1" }'))
    title: str | None = key(Str("The session's title.", default=None, example='"trip planning"'))
    title_source: str | None = key(Choice(
        "Who gave the title: the auto-titler (derived, llm) or the user; absent, a legacy title (ranks as the user's).",
        values=TITLE_SOURCES, default=None, example='"derived"',
    ))


SESSION = table_of(SessionSpec, "A session that exists when the run starts.")


@dataclass(frozen=True)
class AgentSpec:
    """An agent (turn loop plus compactor) living in `process`, starting on `session`, reached through a
    terminal (`frontend == "cli"`) or the gateway ("gateway")."""

    name: str = key(Declared("Names the agent for drives and faults.", namespace="agent", noun="an agent name", example='"main"'))
    process: str = key(Declared(
        "The process the agent runs in; agents may share one.",
        namespace="process", noun="a process name", unique=False, default="p1", example='"p2"',
    ))
    session: str = key(Reference("The session the agent starts on.", namespace="session", default=Derived("the first session"),
                                 example='"s1"'))
    frontend: str = key(Choice(
        'How the user reaches it: a terminal ("cli": turns, Ctrl+C) or a chat platform through the gateway '
        '("gateway": `message` drives, queued while its turns run).',
        values=FRONTENDS, default="cli", example='"gateway"',
    ))


AGENT = table_of(AgentSpec, "An agent: a turn loop with its compactor, in a process, starting on a session.")


@dataclass(frozen=True)
class WorldSpec:
    """What to build before the run: sessions, config overrides of the reference, and the agents."""

    sessions: tuple[SessionSpec, ...] = key(ListOf(
        "The sessions, parents before their continuations.",
        item=SESSION, plural="sessions", non_empty=True, default=[{"id": "s1"}], example='[{ id = "s1", messages = 40 }]',
    ))
    config: dict[str, Any] = key(ConfigOverrides(
        "Overrides of the reference's configuration; field names and types come from the reference "
        "(`python -m sim list config`).",
        default={}, example="{ threshold_tokens = 2000, ctrl_c_grace_s = 2.0 }",
    ))
    agents: tuple[AgentSpec, ...] = key(ListOf(
        "The agents.", item=AGENT, plural="agents", non_empty=True, default=[{"name": "main"}],
        example='[{ name = "main" }, { name = "other", process = "p2" }]',
    ))


WORLD = table_of(WorldSpec, "What exists when the run starts.", default={})


TARGET_PATTERN = r"reference|[a-z]+==[0-9]+\.[0-9]+\.[0-9]+"  # what `sim.scenario.targets.parse` then checks
TARGET_TEXT = '"reference" or a release like "hermes==0.19.0"'


class DriveAction(StrEnum):
    """What a drive does: a user turn, a platform message, a title, or one of the commands."""

    TURN = "turn"
    MESSAGE = "message"
    TITLE = "title"
    COMPRESS = "compress"
    CTRL_C = "ctrl_c"
    END_SESSION = "end_session"
    RESTART = "restart"
    STOP = "stop"


# The actions a drive writes as their own key (with their text); every other action is a `command`.
KEYED_ACTIONS = (DriveAction.TURN, DriveAction.MESSAGE, DriveAction.TITLE)
COMMANDS = tuple(action for action in DriveAction if action not in KEYED_ACTIONS)
DRIVE_KEYS = (*(str(action) for action in KEYED_ACTIONS), "command")  # the keys of which a drive sets exactly one


@dataclass(frozen=True)
class DriveSpec:
    """The user's side: `agent` gets a `turn` (its text), a platform `message` (through the gateway, from
    `platform`), a `title` (set by `title_source`) or a `command` when the trigger fires.

    `session` None means the agent's current session; `end_reason` is only set for "end_session".
    """

    turn: str | None = key(Str("Send a user turn with this text.", default=None, example='"the next question"'))
    message: str | None = key(Str(
        'Deliver this platform message to a gateway agent (frontend = "gateway"); it waits in the agent\'s queue '
        "while an earlier turn runs.", default=None, example='"are you there?"',
    ))
    platform: str = key(Str(
        "With `message`: the platform it comes from; its id is `<platform>:<n>`.",
        pattern=NAME_PATTERN.pattern, pattern_text=NAME_TEXT, default="telegram", example='"slack"',
    ))
    title: str | None = key(Str("Set the session's title (a /title, or the auto-titler).", default=None, example='"trip planning"'))
    title_source: str = key(Choice(
        "With `title`: who sets it; an automatic title replaces only a lower-ranked one (derived < llm < user).",
        values=TITLE_SOURCES, default="user", example='"llm"',
    ))
    command: DriveAction | None = key(Choice(
        "Send this command instead of a turn: `compress` forces a compaction, `ctrl_c` presses Ctrl+C, "
        "`end_session` ends the session, `restart` kills the agent's process and starts it again, `stop` tells it to "
        "stop (SIGTERM: its work is cancelled and unwinds through its own cleanup) and starts it again.",
        values=COMMANDS, default=None, example='"ctrl_c"',
    ))
    agent: str = key(Reference("The agent that receives it.", namespace="agent", default=Derived("the first agent"), example='"main"'))
    session: str | None = key(Reference(
        "The session it targets; absent, the agent's current session.", namespace="session", default=None, example='"s1"',
    ))
    typed: str | None = key(Str(
        'With command = "ctrl_c": what the user types with it. The terminal interrupts the running turn with it and, '
        'once its grace period is over, runs it as the next turn (hermes-agent interrupts with the typed message '
        'itself; the reference presses Ctrl+C, then sends it).',
        default=None, example='"the next question"',
    ))
    end_reason: str | None = key(Str(
        'With command = "end_session": the reason stamped on the session.',
        pattern=r"[a-z_]+", pattern_text='an end reason like "session_reset" (lowercase letters and _)',
        default=None, example='"session_reset"',
    ))
    trigger: TriggerSpec = inline(TRIGGER)

    @property
    def action(self) -> DriveAction:
        """What the drive does: the key it sets (`turn`, `message`, `title`), or its command."""
        for action in KEYED_ACTIONS:
            if getattr(self, action) is not None:
                return action
        assert self.command is not None, "a loaded drive sets exactly one action"
        return self.command

    @property
    def text(self) -> str | None:
        """The text of a turn, a message or a title; None for a command."""
        return self.turn if self.turn is not None else self.message if self.message is not None else self.title


DRIVE = table_of(
    DriveSpec, "The user's side: a turn or a command, sent to an agent when the trigger fires.",
    one_of=(ExactlyOne("the action", DRIVE_KEYS),),
)


@dataclass(frozen=True)
class FaultSpec:
    """One injected fault: its kind, when it fires, and the kind's parameters with defaults filled in."""

    kind: str = key(Registered("The fault kind: a module under faults/.", source="fault_kinds", noun="a fault kind", example='"stall"'))
    trigger: TriggerSpec = inline(TRIGGER)
    # the keys the kind declares (`faults/<kind>.py`), checked against the registry
    params: dict[str, Any]  # type: ignore[misc]  # key() and inline() fields have no default either: the checker takes their call for one


FAULT = tagged_table_of(
    FaultSpec, "A fault injected when its trigger fires.",
    tag="kind", variants_text="the parameters of its kind, documented in the kind's module under faults/",
)


@dataclass(frozen=True)
class ExpectSpec:
    """What the runs must show: the invariants checked ("all" or names), the outcome, and proof of detection.

    `must_fail_under` names mutants under which the scenario must report a violation; `coverage` names marks
    that exploration must reach at least once.
    """

    invariants: str | tuple[str, ...] = key(Either(
        "The invariants checked after every step and at the end of each run.",
        alternatives=(
            Choice(values=("all",)),
            ListOf(item=Registered(source="invariants", noun="an invariant"), plural="invariant names"),
        ),
        default="all", example='["single_live_head"]',
    ))
    outcome: str = key(Choice(
        '"pass": every run keeps every invariant; "violation": some run must break one.',
        values=("pass", "violation"), default="pass", example='"violation"',
    ))
    must_fail_under: tuple[str, ...] = key(ListOf(
        "Mutants (each reverts one fix) under which this scenario must report a violation: the proof that it "
        "detects its race (`python -m sim list mutants`).",
        item=Registered(source="mutants", noun="a mutant"), plural="mutant names", default=[],
        example='["hard-cancel-through-fence"]',
    ))
    coverage: tuple[str, ...] = key(ListOf(
        "Coverage marks that exploration must reach at least once: event kinds (`python -m sim list marks`).",
        item=Registered(source="coverage_marks", noun="a coverage mark"), plural="coverage marks", default=[],
        example='["fence.cancel_won"]',
    ))


EXPECT = table_of(ExpectSpec, "What every run must show.", default={})


MAX_STORE_TEXT = ("Megabytes the store may grow to: a run's memory bound (its history, its agents' transcripts and "
                  "the invariants' reads grow with what the store holds); past it the run ends as a budget overrun.")


@dataclass(frozen=True)
class ExploreSpec:
    """How much to explore: runs from `seed` on, with one strategy, each within step and virtual-time budgets."""

    runs: int = key(Int("Runs, one per root seed from `seed` on.", min=1, default=50, example="200"))
    seed: int = key(Int("The first root seed.", min=0, default=0, example="7"))
    strategy: str = key(Registered(
        "The strategy that picks the next task.", source="strategies", noun="a strategy", default="portfolio", example='"pct"',
    ))
    max_steps: int = key(Int("Scheduler steps allowed per run.", min=1, default=200_000, example="1000000"))
    max_time_s: float = key(Duration("Virtual time allowed per run.", default="6h", example='"30m"'), name="max_time")
    max_store_mb: float = key(Float(MAX_STORE_TEXT, min=0.01, default=64, example="256"))


EXPLORE = table_of(ExploreSpec, "How much to explore.", default={})


@dataclass(frozen=True)
class Scenario:
    """One scenario file, loaded and validated."""

    path: str  # the file it was loaded from
    name: str = key(Str(
        "The scenario's name in reports, verdict tables and repro commands; unique among loaded scenarios.",
        pattern=NAME_PATTERN.pattern, pattern_text=NAME_TEXT,
        default=Derived("the file name without .toml"), example='"ctrl_c_during_summary_blocks_next_turn"',
    ))
    race: str | None = key(Str(
        "The catalogue race this scenario reproduces, or a finding of a target's own (hermes-agent's H1-H9, "
        "targets/hermes/races.py).",
        pattern=r"R([1-9]|1[0-9]|2[0-6])|H[1-9]", pattern_text='a race id from "R1" to "R26", or a finding from "H1" to "H9"',
        default=None, example='"R1"',
    ))
    reported: str | None = key(Str("What the user saw when the race struck.", default=None, example='"session storage could not be written"'))
    source: str | None = key(Str(
        "The peer project's regression test(s) this scenario ports: the project and the row(s) of its port "
        "table in docs/peers.md (the file's header comment names the tests).",
        pattern=r"[a-z0-9][a-z0-9_.-]* #[1-9][0-9]*(, #[1-9][0-9]*)*",
        pattern_text='a project and row numbers like "hermes-agent #14" or "hermes-agent #15, #46"',
        default=None, example='"hermes-agent #14"',
    ))
    description: str | None = key(Str("What the scenario does and why.", default=None, example='"Ctrl+C while the summary stalls."'))
    target: str = key(Str(
        "The system the scenario runs on: the reference, or a released program the harness runs "
        "(`hermes==0.16.0` ... `hermes==0.19.0`, hermes-agent as published, in a process of its own).",
        pattern=TARGET_PATTERN, pattern_text=TARGET_TEXT, default="reference", example='"hermes==0.19.0"',
    ))
    world: WorldSpec = key(WORLD)
    drives: tuple[DriveSpec, ...] = key(ListOf(DRIVE.description, item=DRIVE, plural="drives", default=[]), name="drive")
    faults: tuple[FaultSpec, ...] = key(ListOf(FAULT.description, item=FAULT, plural="faults", default=[]), name="fault")
    expect: ExpectSpec = key(EXPECT)
    explore: ExploreSpec = key(EXPLORE)


SCENARIO = table_of(Scenario, "A scenario file.", title="Top level")
