"""A loaded scenario: plain frozen values, checked once by the loader, so the harness never re-validates.

Sequences are tuples and every default is filled in, so two loads of the same file compare equal and a
scenario can be handed to worker processes as is. Durations are float seconds of virtual time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SessionSpec:
    """A session that exists before the run starts, with `messages` already in it."""

    id: str
    messages: int
    parent: str | None
    end_reason: str | None
    model_config: dict[str, Any]
    title: str | None
    title_source: str | None


@dataclass(frozen=True)
class AgentSpec:
    """An agent (turn loop plus compactor) living in `process`, starting on `session`, reached through a
    terminal (`frontend == "cli"`) or the gateway ("gateway")."""

    name: str
    process: str
    session: str
    frontend: str


@dataclass(frozen=True)
class WorldSpec:
    """What to build before the run: sessions, config overrides of the reference, and the agents."""

    sessions: tuple[SessionSpec, ...]
    config: dict[str, Any]
    agents: tuple[AgentSpec, ...]


@dataclass(frozen=True)
class TriggerSpec:
    """When a drive or fault fires; exactly one of `at`, `after_event`, `nth`, `probability` is set.

    `at` arms at a virtual time; `after_event` at the first event of that kind; `nth` at the nth hit of
    `point`; `probability` arms the trigger for the whole run with that chance (one draw), after which it
    fires at hits of `point`, each with chance `per_hit` (None: every hit). `point` also says where a
    point fault acts. `delay` is added after the trigger arms.
    """

    at: float | None
    after_event: str | None
    nth: int | None
    point: str | None
    probability: float | None
    per_hit: float | None
    delay: float


@dataclass(frozen=True)
class DriveSpec:
    """The user's side: `agent` gets a turn (`action == "turn"`, with `text`), a platform message ("message",
    through the gateway, from `platform`), a title ("title", set by `title_source`) or a command.

    `session` None means the agent's current session; `end_reason` is only set for "end_session".
    """

    trigger: TriggerSpec
    agent: str
    action: str
    text: str | None
    session: str | None
    end_reason: str | None
    platform: str
    title_source: str


@dataclass(frozen=True)
class FaultSpec:
    """One injected fault: its kind, when it fires, and the kind's parameters with defaults filled in."""

    kind: str
    trigger: TriggerSpec
    params: dict[str, Any]


@dataclass(frozen=True)
class ExpectSpec:
    """What the runs must show: the invariants checked ("all" or names), the outcome, and proof of detection.

    `must_fail_under` names mutants under which the scenario must report a violation; `coverage` names marks
    that exploration must reach at least once.
    """

    invariants: str | tuple[str, ...]
    outcome: str
    must_fail_under: tuple[str, ...]
    coverage: tuple[str, ...]


@dataclass(frozen=True)
class ExploreSpec:
    """How much to explore: runs from `seed` on, with one strategy, each within step and virtual-time budgets."""

    runs: int
    seed: int
    strategy: str
    max_steps: int
    max_time: float


@dataclass(frozen=True)
class Scenario:
    """One scenario file, loaded and validated."""

    path: str
    name: str
    race: str | None
    reported: str | None
    source: str | None
    description: str | None
    world: WorldSpec
    drives: tuple[DriveSpec, ...]
    faults: tuple[FaultSpec, ...]
    expect: ExpectSpec
    explore: ExploreSpec
