"""Scenario files in, validated `Scenario` values out; every mistake becomes one `ScenarioError`.

The keys a file may hold are declared once below (`SCENARIO`), with descriptions and examples that
`sim.scenario.docs` renders into `scenarios/README.md`. Names that belong to the reference (fault kinds,
points, events, invariants, config fields, mutants, strategies, coverage marks) come from a registry, so
the loader catches a misspelt point before a run silently never hits it.
"""

from __future__ import annotations

import errno
import re
import tomllib
from pathlib import Path
from typing import Any, Collection, Iterable, Iterator, Mapping, Protocol

from sim.scenario.errors import ScenarioError
from sim.scenario.model import (
    AgentSpec,
    DriveSpec,
    ExpectSpec,
    ExploreSpec,
    FaultSpec,
    Scenario,
    SessionSpec,
    TriggerSpec,
    WorldSpec,
)
from sim.scenario.schema import (
    Choice,
    ConfigOverrides,
    Context,
    Declared,
    Derived,
    Duration,
    Either,
    ExactlyOne,
    Int,
    JsonTable,
    ListOf,
    Location,
    Probability,
    Reference,
    Registered,
    Spec,
    Str,
    Table,
    TaggedTable,
    describe,
    quote,
)


class ScenarioRegistry(Protocol):
    """The names the reference defines, which scenario files may use.

    `fault_kinds` maps each kind to its parameters' specs; `config_fields` maps each config field to its
    Python type (int, float, bool or str). The rest are plain collections of names.
    """

    fault_kinds: Mapping[str, Mapping[str, Spec]]
    invariants: Collection[str]
    points: Collection[str]
    events: Collection[str]
    config_fields: Mapping[str, type]
    mutants: Collection[str]
    strategies: Collection[str]
    coverage_marks: Collection[str]


NAME_PATTERN = re.compile(r"[a-z0-9_]+")
NAME_TEXT = "a name of lowercase letters, digits and _"
COMMANDS = ("compress", "ctrl_c", "end_session", "restart")
END_SESSION = "end_session"
DRIVE_ACTIONS = ("turn", "message", "title", "command")  # the keys of which a drive sets exactly one
FRONTENDS = ("cli", "gateway")
TITLE_SOURCES = ("derived", "llm", "user")

TRIGGER = Table(
    "When a drive or fault fires.",
    title="Trigger keys, in every `[[drive]]` and `[[fault]]`",
    fields={
        "at": Duration("Arm at this virtual time after the run starts.", default=None, example='"0s"'),
        "after_event": Registered(
            "Arm when the first event of this kind is recorded.",
            source="events", noun="an event kind", default=None, example='"compaction.summary_started"',
        ),
        "nth": Int("Fire at the nth hit of `point` (1 is the first).", min=1, default=None, example="3"),
        "point": Registered(
            "A named point in the reference: where `nth` and `probability` count hits, and where a point fault "
            "(a stall, a DB error) acts. A trailing * selects every point with that prefix.",
            source="points", noun="a named point", glob=True, default=None, example='"provider.summary"',
        ),
        "probability": Probability(
            "BUGGIFY-style: one draw per run arms the trigger with this chance; armed, it fires at hits of `point`.",
            default=None, example="0.25",
        ),
        "per_hit": Probability(
            "With `probability`: the chance that an armed trigger fires at each hit of `point`; absent, every hit.",
            default=None, example="0.5",
        ),
        "delay": Duration("Wait this long after the trigger arms before acting.", default="0s", example='"1s"'),
    },
    one_of=(ExactlyOne("the trigger", ("at", "after_event", "nth", "probability")),),
    requires={"nth": ("point",), "probability": ("point",), "per_hit": ("probability",)},
)

SESSION = Table(
    "A session that exists when the run starts.",
    fields={
        "id": Declared(
            "Names the session for parents, agents, drives and faults.",
            namespace="session", noun="a session id", example='"s1"',
        ),
        "messages": Int(
            "Messages already in the session, alternately user and assistant, 160 characters (41 tokens) each.",
            min=0, default=0, example="40",
        ),
        "parent": Reference(
            "The session this one continues (its compression parent); it must come earlier in the list.",
            namespace="session", default=None, example='"s0"',
        ),
        "end_reason": Str(
            "Marks the session as already ended, for this reason.",
            pattern=r"[a-z_]+", pattern_text='an end reason like "idle" (lowercase letters and _)',
            default=None, example='"idle"',
        ),
        "model_config": JsonTable(
            "The model settings stored with the session.", default={}, example='{ model = "m1" }'
        ),
        "title": Str("The session's title.", default=None, example='"trip planning"'),
        "title_source": Choice(
            "Who gave the title: the auto-titler (derived, llm) or the user; absent, a legacy title (ranks as the user's).",
            values=TITLE_SOURCES, default=None, example='"derived"',
        ),
    },
)

AGENT = Table(
    "An agent: a turn loop with its compactor, in a process, starting on a session.",
    fields={
        "name": Declared(
            "Names the agent for drives and faults.", namespace="agent", noun="an agent name", example='"main"'
        ),
        "process": Declared(
            "The process the agent runs in; agents may share one.",
            namespace="process", noun="a process name", unique=False, default="p1", example='"p2"',
        ),
        "session": Reference(
            "The session the agent starts on.",
            namespace="session", default=Derived("the first session"), example='"s1"',
        ),
        "frontend": Choice(
            'How the user reaches it: a terminal ("cli": turns, Ctrl+C) or a chat platform through the gateway '
            '("gateway": `message` drives, queued while its turns run).',
            values=FRONTENDS, default="cli", example='"gateway"',
        ),
    },
)

WORLD = Table(
    "What exists when the run starts.",
    fields={
        "sessions": ListOf(
            "The sessions, parents before their continuations.",
            item=SESSION, plural="sessions", non_empty=True, default=[{"id": "s1"}],
            example='[{ id = "s1", messages = 40 }]',
        ),
        "config": ConfigOverrides(
            "Overrides of the reference's configuration; field names and types come from the reference "
            "(`python -m sim list config`).",
            default={}, example="{ threshold_tokens = 2000, ctrl_c_grace_s = 2.0 }",
        ),
        "agents": ListOf(
            "The agents.",
            item=AGENT, plural="agents", non_empty=True, default=[{"name": "main"}],
            example='[{ name = "main" }, { name = "other", process = "p2" }]',
        ),
    },
    default={},
)

DRIVE = Table(
    "The user's side: a turn or a command, sent to an agent when the trigger fires.",
    fields={
        "turn": Str("Send a user turn with this text.", default=None, example='"the next question"'),
        "message": Str(
            'Deliver this platform message to a gateway agent (frontend = "gateway"); it waits in the agent\'s queue '
            "while an earlier turn runs.", default=None, example='"are you there?"',
        ),
        "platform": Str(
            "With `message`: the platform it comes from; its id is `<platform>:<n>`.",
            pattern=NAME_PATTERN.pattern, pattern_text=NAME_TEXT, default="telegram", example='"slack"',
        ),
        "title": Str("Set the session's title (a /title, or the auto-titler).", default=None, example='"trip planning"'),
        "title_source": Choice(
            "With `title`: who sets it; an automatic title replaces only a lower-ranked one (derived < llm < user).",
            values=TITLE_SOURCES, default="user", example='"llm"',
        ),
        "command": Choice(
            "Send this command instead of a turn: `compress` forces a compaction, `ctrl_c` presses Ctrl+C, "
            "`end_session` ends the session, `restart` kills the agent's process and starts it again.",
            values=COMMANDS, default=None, example='"ctrl_c"',
        ),
        "agent": Reference(
            "The agent that receives it.", namespace="agent", default=Derived("the first agent"), example='"main"'
        ),
        "session": Reference(
            "The session it targets; absent, the agent's current session.",
            namespace="session", default=None, example='"s1"',
        ),
        "end_reason": Str(
            'With command = "end_session": the reason stamped on the session.',
            pattern=r"[a-z_]+", pattern_text='an end reason like "session_reset" (lowercase letters and _)',
            default=None, example='"session_reset"',
        ),
    },
    include=(TRIGGER,),
    one_of=(ExactlyOne("the action", DRIVE_ACTIONS),),
)

FAULT = TaggedTable(
    "A fault injected when its trigger fires.",
    tag="kind",
    tag_spec=Registered(
        "The fault kind: a module under faults/.", source="fault_kinds", noun="a fault kind", example='"stall"'
    ),
    variants_text="the parameters of its kind, documented in the kind's module under faults/",
    fields={},
    include=(TRIGGER,),
)

EXPECT = Table(
    "What every run must show.",
    fields={
        "invariants": Either(
            "The invariants checked after every step and at the end of each run.",
            alternatives=(
                Choice(values=("all",)),
                ListOf(item=Registered(source="invariants", noun="an invariant"), plural="invariant names"),
            ),
            default="all", example='["single_live_head"]',
        ),
        "outcome": Choice(
            '"pass": every run keeps every invariant; "violation": some run must break one.',
            values=("pass", "violation"), default="pass", example='"violation"',
        ),
        "must_fail_under": ListOf(
            "Mutants (each reverts one fix) under which this scenario must report a violation: the proof that it "
            "detects its race (`python -m sim list mutants`).",
            item=Registered(source="mutants", noun="a mutant"), plural="mutant names", default=[],
            example='["hard-cancel-through-fence"]',
        ),
        "coverage": ListOf(
            "Coverage marks that exploration must reach at least once: event kinds (`python -m sim list marks`).",
            item=Registered(source="coverage_marks", noun="a coverage mark"), plural="coverage marks", default=[],
            example='["fence.cancel_won"]',
        ),
    },
    default={},
)

EXPLORE = Table(
    "How much to explore.",
    fields={
        "runs": Int("Runs, one per root seed from `seed` on.", min=1, default=50, example="200"),
        "seed": Int("The first root seed.", min=0, default=0, example="7"),
        "strategy": Registered(
            "The strategy that picks the next task.", source="strategies", noun="a strategy", default="portfolio",
            example='"pct"',
        ),
        "max_steps": Int("Scheduler steps allowed per run.", min=1, default=200_000, example="1000000"),
        "max_time": Duration("Virtual time allowed per run.", default="6h", example='"30m"'),
    },
    default={},
)

SCENARIO = Table(
    "A scenario file.",
    title="Top level",
    fields={
        "name": Str(
            "The scenario's name in reports, verdict tables and repro commands; unique among loaded scenarios.",
            pattern=NAME_PATTERN.pattern, pattern_text=NAME_TEXT,
            default=Derived("the file name without .toml"), example='"ctrl_c_during_summary_blocks_next_turn"',
        ),
        "race": Str(
            "The catalogue race this scenario reproduces.",
            pattern=r"R([1-9]|1[0-9]|2[0-6])", pattern_text='a race id from "R1" to "R26"',
            default=None, example='"R1"',
        ),
        "reported": Str(
            "What the user saw when the race struck.", default=None, example='"session storage could not be written"'
        ),
        "source": Str(
            "The peer project's regression test(s) this scenario ports: the project and the row(s) of its port "
            "table in docs/peers.md (the file's header comment names the tests).",
            pattern=r"[a-z0-9][a-z0-9_.-]* #[1-9][0-9]*(, #[1-9][0-9]*)*",
            pattern_text='a project and row numbers like "hermes-agent #14" or "hermes-agent #15, #46"',
            default=None, example='"hermes-agent #14"',
        ),
        "description": Str(
            "What the scenario does and why.", default=None, example='"Ctrl+C while the summary stalls."'
        ),
        "world": WORLD,
        "drive": ListOf(DRIVE.description, item=DRIVE, plural="drives", default=[]),
        "fault": ListOf(FAULT.description, item=FAULT, plural="faults", default=[]),
        "expect": EXPECT,
        "explore": EXPLORE,
    },
)

_TOML_POSITION = re.compile(r"(?s)(.*) \(at (?:line (\d+), column (\d+)|end of document)\)")
_OS_PROBLEMS = {errno.ENOENT: "no such file", errno.EISDIR: "a directory", errno.EACCES: "a file it may not read"}


def load_scenario(path: str | Path, registry: ScenarioRegistry) -> Scenario:
    """Read, parse and validate one scenario file; any problem with it raises ScenarioError."""
    file = str(path)
    document = _parse_toml(_read_text(Path(path), file), file)
    ctx = Context(registry)
    root = Location(file)
    checked = SCENARIO.check(document, root, ctx)
    ctx.check_references()
    scenario = _scenario(checked, Path(path), root)
    if not scenario.drives:
        # An empty file validates key by key; a run where the user does nothing would pass and prove nothing.
        raise root.key("drive").error("at least one [[drive]] (a turn or a command): a scenario where nothing is driven proves nothing", "none")
    return scenario


def load_paths(paths: Iterable[str | Path], registry: ScenarioRegistry) -> list[Scenario]:
    """Load scenario files and folders (each folder's `*.toml`, sorted, not recursive), in the order given.

    A file named twice is loaded once; two scenarios with the same name are an error, since the name is
    how reports and repro commands refer to a scenario.
    """
    scenarios: list[Scenario] = []
    seen_files: set[Path] = set()
    files_by_name: dict[str, str] = {}
    for file in _scenario_files(paths):
        resolved = file.resolve()
        if resolved in seen_files:
            continue
        seen_files.add(resolved)
        scenario = load_scenario(file, registry)
        if scenario.name in files_by_name:
            raise Location(scenario.path).key("name").error(
                "a name no other loaded scenario uses",
                f"{describe(scenario.name)}, also the name of {files_by_name[scenario.name]}",
            )
        files_by_name[scenario.name] = scenario.path
        scenarios.append(scenario)
    return scenarios


def _scenario_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    for given in paths:
        path = Path(given)
        if path.is_dir():
            # Dot-files are editor leftovers (Emacs lock files end in .toml too), never scenarios.
            files = sorted(file for file in path.glob("*.toml") if not file.name.startswith("."))
            if not files:
                raise ScenarioError(str(given), "", "a folder holding *.toml scenario files", "a folder without any")
            yield from files
        elif path.exists():
            yield path
        else:
            raise ScenarioError(str(given), "", "a scenario file or a folder of them", "nothing at that path")


def _read_text(path: Path, file: str) -> str:
    try:
        data = path.read_bytes()
    except OSError as error:
        problem = _OS_PROBLEMS.get(error.errno or 0, (error.strerror or type(error).__name__).lower())
        raise ScenarioError(file, "", "a readable scenario file", problem) from None
    try:
        # utf-8-sig: a byte-order mark some editors add is not a mistake worth reporting.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line_start = data.rfind(b"\n", 0, error.start) + 1
        column = len(data[line_start : error.start].decode("utf-8", "replace")) + 1
        raise ScenarioError(
            file, "", "UTF-8 text", f"the byte 0x{data[error.start]:02x}",
            line=data.count(b"\n", 0, error.start) + 1, column=column,
        ) from None


def _parse_toml(text: str, file: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message, line, column = _syntax_position(str(error), text)
        raise ScenarioError(file, "", "valid TOML", f"a syntax error: {message}", line=line, column=column) from None
    except ValueError:
        # tomllib lets Python's limit on integer digits (4300) escape as a bare ValueError.
        raise ScenarioError(file, "", "valid TOML", "an integer with too many digits to read") from None
    except RecursionError:
        raise ScenarioError(file, "", "valid TOML", "arrays or tables nested too deeply to read") from None


def _syntax_position(message: str, text: str) -> tuple[str, int | None, int | None]:
    """tomllib's message without its "(at line L, column C)" suffix, and that position as numbers."""
    match = _TOML_POSITION.fullmatch(message)
    if match is None:
        return message, None, None
    reason = match.group(1)
    reason = reason[:1].lower() + reason[1:]
    if match.group(2) is not None:
        return reason, int(match.group(2)), int(match.group(3))
    last_line_start = text.rfind("\n") + 1
    return reason, text.count("\n") + 1, len(text) - last_line_start + 1


def _scenario(checked: dict[str, Any], path: Path, root: Location) -> Scenario:
    world = _world(checked["world"], root.key("world"))
    return Scenario(
        path=str(path),
        name=_name(checked["name"], path, root.key("name")),
        race=checked["race"],
        reported=checked["reported"],
        source=checked["source"],
        description=checked["description"],
        world=world,
        drives=tuple(_drive(drive, world, root.key("drive").index(i)) for i, drive in enumerate(checked["drive"])),
        faults=tuple(_fault(fault) for fault in checked["fault"]),
        expect=ExpectSpec(**checked["expect"]),
        explore=ExploreSpec(**checked["explore"]),
    )


def _name(written: str | None, path: Path, where: Location) -> str:
    """The written name, or the file's stem, which must then be a valid name itself."""
    if written is not None:
        return written
    if not NAME_PATTERN.fullmatch(path.stem):
        raise where.error(NAME_TEXT, f"{describe(path.stem)}, taken from the file name (set name to fix it)")
    return path.stem


def _world(checked: dict[str, Any], where: Location) -> WorldSpec:
    sessions = tuple(SessionSpec(**session) for session in checked["sessions"])
    _check_lineage(sessions, where.key("sessions"))
    first_session = sessions[0].id
    agents = tuple(
        AgentSpec(name=agent["name"], process=agent["process"], session=agent["session"] or first_session,
                  frontend=agent["frontend"])
        for agent in checked["agents"]
    )
    return WorldSpec(sessions=sessions, config=checked["config"], agents=agents)


def _check_lineage(sessions: tuple[SessionSpec, ...], where: Location) -> None:
    """Parents come before their continuations, which also rules out a session being its own ancestor."""
    earlier: set[str] = set()
    for position, session in enumerate(sessions):
        if session.parent is not None and session.parent not in earlier:
            raise where.index(position).key("parent").error(
                "a session listed earlier in world.sessions", describe(session.parent)
            )
        earlier.add(session.id)


def _trigger(checked: dict[str, Any]) -> TriggerSpec:
    return TriggerSpec(**{key: checked[key] for key in TRIGGER.all_fields()})


def _drive(checked: dict[str, Any], world: WorldSpec, where: Location) -> DriveSpec:
    key = next(key for key in DRIVE_ACTIONS if checked[key] is not None)
    action = checked["command"] if key == "command" else key
    if checked["end_reason"] is not None and action != END_SESSION:
        shown = f"command = {quote(action)}" if key == "command" else f"a {key}"
        raise where.key("end_reason").error(f'end_reason only with command = "{END_SESSION}"', f"it with {shown}")
    agent = checked["agent"] or world.agents[0].name
    frontend = next(spec.frontend for spec in world.agents if spec.name == agent)
    if (action == "message") != (frontend == "gateway") and action in ("message", "turn"):
        wanted = 'a gateway agent (frontend = "gateway")' if action == "message" else "a cli agent (a gateway agent takes `message`)"
        raise where.key("agent").error(wanted, f"{quote(agent)}, a {frontend} agent")
    return DriveSpec(
        trigger=_trigger(checked),
        agent=agent,
        action=action,
        text=None if key == "command" else checked[key],
        session=checked["session"],
        end_reason=checked["end_reason"],
        platform=checked["platform"],
        title_source=checked["title_source"],
    )


def _fault(checked: dict[str, Any]) -> FaultSpec:
    trigger_keys = TRIGGER.all_fields()
    params = {key: value for key, value in checked.items() if key != FAULT.tag and key not in trigger_keys}
    return FaultSpec(kind=checked[FAULT.tag], trigger=_trigger(checked), params=params)
