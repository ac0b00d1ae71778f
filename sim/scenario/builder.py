"""Building the reference system a scenario describes: the store and its sessions, the processes, the agents.

`world.config` keys go to the reference's `CompactionConfig`, to the scripted provider (`provider_*`) or to the
frontend (`ctrl_c_grace_s`). Processes start (and restart) as new incarnations with new pids, so their attempt
ids are new too; each agent runs in its process and is reached through a terminal frontend, or through its
process's gateway (`gateways.py` serves those).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from reference.agent import Agent
from reference.config import CompactionConfig
from reference.frontends import CliFrontend, GatewayFrontend
from reference.lease import ProcessTable
from reference.pool import CompressionPool
from reference.provider import ProviderScript, ScriptedProvider
from reference.store import SessionStore
from reference.transcript import new_message
from sim.core.world import World
from sim.scenario.gateways import Gateways
from sim.scenario.model import AgentSpec, Scenario
from sim.scenario.processes import ProcessConnection, ProcessRuntime, SimProcess

PROVIDER_PREFIX = "provider_"
FRONTEND_KEYS = {"ctrl_c_grace_s": 2.0}
SEED_MESSAGE_CHARS = 160


@dataclass
class AgentSlot:
    spec: AgentSpec
    agent: Agent
    frontend: CliFrontend
    proc: SimProcess  # the incarnation it runs in: a drive to the agent of a dead incarnation dies with it


def split_overrides(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """world.config keys go to the compaction config, the provider script (`provider_*`) or the frontend."""
    config = {k: v for k, v in overrides.items() if not k.startswith(PROVIDER_PREFIX) and k not in FRONTEND_KEYS}
    provider = {k[len(PROVIDER_PREFIX):]: v for k, v in overrides.items() if k.startswith(PROVIDER_PREFIX)}
    frontend = {**FRONTEND_KEYS, **{k: v for k, v in overrides.items() if k in FRONTEND_KEYS}}
    return config, provider, frontend


_SIMPLE_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "str | None": str}


def config_fields() -> dict[str, type]:
    """Every key world.config accepts, with its type (the loader checks scenario files against this).

    Fields of the config and the provider script whose annotation is a plain scalar are settable; tuples
    (the cooldown ladder) are not settable from a scenario.
    """
    annotated = {f.name: f.type for f in dataclasses.fields(CompactionConfig)}
    annotated.update({PROVIDER_PREFIX + f.name: f.type for f in dataclasses.fields(ProviderScript)})
    annotated.update({key: "float" for key in FRONTEND_KEYS})
    return {name: _SIMPLE_TYPES[kind] for name, kind in annotated.items() if kind in _SIMPLE_TYPES}


def config_defaults() -> dict[str, Any]:
    """The value each settable world.config key has when a scenario does not set it."""
    defaults: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(CompactionConfig)}
    defaults.update({PROVIDER_PREFIX + f.name: f.default for f in dataclasses.fields(ProviderScript)})
    defaults.update(FRONTEND_KEYS)
    return {name: defaults[name] for name in config_fields()}


class SystemBuilder:
    """Builds the system inside one World run, and holds what it built: the store, processes and agents (and
    the gateways, which serve a gateway agent as soon as it is open)."""

    def __init__(self, world: World, scenario: Scenario) -> None:
        self.world = world
        self.scenario = scenario
        config, provider, frontend = split_overrides(scenario.world.config)
        self.config = CompactionConfig(**config)
        self.provider_script = ProviderScript(**provider)
        self.grace_s = frontend["ctrl_c_grace_s"]
        self.store = SessionStore(":memory:")
        self.process_table = ProcessTable()
        self.processes: dict[str, SimProcess] = {}
        self.agents: dict[str, AgentSlot] = {}
        self.gateways = Gateways()
        self._incarnations: dict[str, int] = {}
        self.process_of_incarnation: dict[str, str] = {}  # e.g. "p2r1" -> "p2": attempt ids name the incarnation

    def build_sessions(self) -> None:
        """The sessions the world starts with, with their seed messages, written before anything runs."""
        for session in self.scenario.world.sessions:
            self.store.create_session(session.id, now=0.0, parent=session.parent, model_config=session.model_config,
                                      title=session.title, title_source=session.title_source)
            seed = [
                new_message("user" if i % 2 == 0 else "assistant", f"{session.id} message {i} ".ljust(SEED_MESSAGE_CHARS, "."), i * 1e-3 - 1.0)
                for i in range(session.messages)
            ]
            if seed:
                self.store.append_messages(session.id, seed, now=0.0)
            if session.end_reason is not None:
                self.store.end_session(session.id, now=0.0, reason=session.end_reason)

    async def start_agents(self) -> None:
        """Start every process the scenario names, then open every agent in its process."""
        for name in dict.fromkeys(agent.process for agent in self.scenario.world.agents):
            self.start_process(name)
        for spec in self.scenario.world.agents:
            await self.start_agent(spec)

    def start_process(self, name: str, *, pid: int | None = None) -> SimProcess:
        """Start (or restart) a process; a restarted one is a new incarnation, so its attempt ids are new too.

        `pid`: the pid to run on (a dead process's, recycled), else a fresh one.
        """
        rt = ProcessRuntime(self.world)
        self._incarnations[name] = self._incarnations.get(name, -1) + 1
        incarnation = f"{name}r{self._incarnations[name]}" if self._incarnations[name] else name
        self.process_of_incarnation[incarnation] = name
        process = SimProcess(name, self.process_table.spawn(incarnation, pid), rt, ProcessConnection(rt, self.store),
                             CompressionPool(rt, self.config.pool_cap), GatewayFrontend(rt))
        self.processes[name] = process
        return process

    async def start_agent(self, spec: AgentSpec, session: str | None = None) -> AgentSlot:
        """An agent in its process, opened on its session (loaded from the store if it exists)."""
        process = self.processes[spec.process]
        agent = Agent(process.rt, process.db, ScriptedProvider(process.rt, self.provider_script),
                      session_id=session or spec.session, process=process.process, config=self.config, pool=process.pool,
                      processes=self.process_table)
        await process.run(agent.open())
        # Published only once open: `open` loads the transcript, so a turn that started earlier would lose
        # its user message when the load replaced the list it had been appended to.
        slot = AgentSlot(spec, agent, CliFrontend(process.rt, agent, grace_s=self.grace_s, name=spec.name), process)
        self.agents[spec.name] = slot
        self.gateways.serve(slot)
        return slot
