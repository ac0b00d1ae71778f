"""Scenario files in, validated `Scenario` values out; every mistake becomes one `ScenarioError`.

The keys a file may hold are declared once, on the fields of the dataclasses in `sim.scenario.model` (the
`SCENARIO` table is derived from them), with descriptions and examples that `sim.scenario.docs` renders into
`scenarios/README.md`. Names that belong to the reference (fault kinds, points, events, invariants, config
fields, mutants, strategies, coverage marks) come from a registry, so the loader catches a misspelt point
before a run silently never hits it. What the loader adds to the checked keys: the defaults derived from
other keys, and the rules that tie keys across tables.
"""

from __future__ import annotations

import dataclasses
import errno
import re
import tomllib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from sim.scenario import targets
from sim.scenario.declare import build
from sim.scenario.model import (
    FAULT,
    NAME_PATTERN,
    NAME_TEXT,
    SCENARIO,
    TRIGGER,
    AgentSpec,
    DriveAction,
    DriveSpec,
    ExpectSpec,
    ExploreSpec,
    FaultSpec,
    Scenario,
    SessionSpec,
    WorldSpec,
)
from sim.scenario.scenario_error import ScenarioError
from sim.scenario.schema import Context, Location, Spec, describe, quote


class ScenarioRegistry(Protocol):
    """The names the reference defines, which scenario files may use.

    `fault_kinds` maps each kind to its parameters' specs; `config_fields` maps each config field to its
    Python type (int, float, bool or str). The rest are plain collections of names. All read-only, so a
    registry may hold them as any mapping or collection.
    """

    @property
    def fault_kinds(self) -> Mapping[str, Mapping[str, Spec]]: ...

    @property
    def invariants(self) -> Collection[str]: ...

    @property
    def points(self) -> Collection[str]: ...

    @property
    def events(self) -> Collection[str]: ...

    @property
    def config_fields(self) -> Mapping[str, type]: ...

    @property
    def mutants(self) -> Collection[str]: ...

    @property
    def strategies(self) -> Collection[str]: ...

    @property
    def coverage_marks(self) -> Collection[str]: ...


_TOML_POSITION = re.compile(r"(?s)(.*) \(at (?:line (\d+), column (\d+)|end of document)\)")
_OS_PROBLEMS = {errno.ENOENT: "no such file", errno.EISDIR: "a directory", errno.EACCES: "a file it may not read"}


SWARM_TABLE = "swarm"


def load_scenario(path: str | Path, registry: ScenarioRegistry) -> Scenario:
    """Read, parse and validate one scenario file; any problem with it raises ScenarioError."""
    document = read_document(path)
    if SWARM_TABLE in document:
        raise Location(str(path)).key(SWARM_TABLE).error(
            "a scripted scenario (a file with a [swarm] table is a generated workload: python -m sim swarm PATH)",
            "a [swarm] table")
    return scenario_from_document(document, path, registry)


def read_document(path: str | Path) -> dict[str, Any]:
    """A TOML file as its document; an unreadable file or a syntax error raises ScenarioError."""
    return _parse_toml(_read_text(Path(path), str(path)), str(path))


def scenario_from_document(document: dict[str, Any], path: str | Path, registry: ScenarioRegistry) -> Scenario:
    """Validate a scenario document as if read from `path` (a generated scenario is checked like a written one)."""
    file = str(path)
    ctx = Context(registry)
    root = Location(file)
    checked = SCENARIO.check(document, root, ctx)
    ctx.check_references()
    scenario = _scenario(checked, Path(path), root)
    if not scenario.drives:
        # An empty file validates key by key; a run where the user does nothing would pass and prove nothing.
        raise root.key("drive").error("at least one [[drive]] (a turn or a command): a scenario where nothing is driven proves nothing", "none")
    return on_target(scenario, scenario.target)


def on_target(scenario: Scenario, target: str) -> Scenario:
    """The scenario on `target`, checked against what that target can do (bad input names the target)."""
    try:
        name = targets.parse(target)
    except ValueError as error:
        raise Location(scenario.path).key("target").error(str(error).partition(": ")[2] or "a known target", repr(target)) from None
    scenario = dataclasses.replace(scenario, target=name)
    from sim.scenario import targeting  # it reads the reference's points: importing the loader imports no reference

    targeting.check(scenario)
    return scenario


def load_paths(paths: Iterable[str | Path], registry: ScenarioRegistry,
               load: Callable[[Path, ScenarioRegistry], Any] = load_scenario) -> list[Any]:
    """Load scenario files and folders (each folder's `*.toml`, sorted, not recursive), in the order given.

    A file named twice is loaded once; two scenarios with the same name are an error, since the name is
    how reports and repro commands refer to a scenario. `load` reads one file (a workload loader reads
    the files of `scenarios/swarm/` this way).
    """
    scenarios: list[Any] = []
    seen_files: set[Path] = set()
    files_by_name: dict[str, str] = {}
    for file in _scenario_files(paths):
        resolved = file.resolve()
        if resolved in seen_files:
            continue
        seen_files.add(resolved)
        scenario = load(file, registry)
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
    return build(
        Scenario, checked,
        path=str(path),
        name=name_or_stem(checked["name"], path, root.key("name")),
        world=world,
        drives=tuple(_drive(drive, world, root.key("drive").index(i)) for i, drive in enumerate(checked["drive"])),
        faults=tuple(_fault(fault) for fault in checked["fault"]),
        expect=build(ExpectSpec, checked["expect"]),
        explore=build(ExploreSpec, checked["explore"]),
    )


def name_or_stem(written: str | None, path: Path, where: Location) -> str:
    """The written name, or the file's stem, which must then be a valid name itself."""
    if written is not None:
        return written
    if not NAME_PATTERN.fullmatch(path.stem):
        raise where.error(NAME_TEXT, f"{describe(path.stem)}, taken from the file name (set name to fix it)")
    return path.stem


def _world(checked: dict[str, Any], where: Location) -> WorldSpec:
    sessions = tuple(build(SessionSpec, session) for session in checked["sessions"])
    _check_lineage(sessions, where.key("sessions"))
    first_session = sessions[0].id
    agents = tuple(build(AgentSpec, agent, session=agent["session"] or first_session) for agent in checked["agents"])
    return build(WorldSpec, checked, sessions=sessions, agents=agents)


def _check_lineage(sessions: tuple[SessionSpec, ...], where: Location) -> None:
    """Parents come before their continuations, which also rules out a session being its own ancestor."""
    earlier: set[str] = set()
    for position, session in enumerate(sessions):
        if session.parent is not None and session.parent not in earlier:
            raise where.index(position).key("parent").error(
                "a session listed earlier in world.sessions", describe(session.parent)
            )
        earlier.add(session.id)


def _drive(checked: dict[str, Any], world: WorldSpec, where: Location) -> DriveSpec:
    command = None if checked["command"] is None else DriveAction(checked["command"])
    drive = build(DriveSpec, checked, command=command, agent=checked["agent"] or world.agents[0].name)
    if drive.end_reason is not None and drive.action is not DriveAction.END_SESSION:
        shown = f"command = {quote(command)}" if command is not None else f"a {drive.action}"
        raise where.key("end_reason").error(f'end_reason only with command = "{DriveAction.END_SESSION}"', f"it with {shown}")
    if drive.typed is not None and drive.action is not DriveAction.CTRL_C:
        shown = f"command = {quote(command)}" if command is not None else f"a {drive.action}"
        raise where.key("typed").error(f'typed only with command = "{DriveAction.CTRL_C}"', f"it with {shown}")
    frontend = next(spec.frontend for spec in world.agents if spec.name == drive.agent)
    if drive.action in (DriveAction.TURN, DriveAction.MESSAGE) and (drive.action is DriveAction.MESSAGE) != (frontend == "gateway"):
        wanted = 'a gateway agent (frontend = "gateway")' if drive.action is DriveAction.MESSAGE else "a cli agent (a gateway agent takes `message`)"
        raise where.key("agent").error(wanted, f"{quote(drive.agent)}, a {frontend} agent")
    return drive


def _fault(checked: dict[str, Any]) -> FaultSpec:
    trigger_keys = TRIGGER.all_fields()
    params = {key: value for key, value in checked.items() if key != FAULT.tag and key not in trigger_keys}
    return build(FaultSpec, checked, params=params)
