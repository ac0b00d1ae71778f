"""The reference system as a scenario describes it, built and driven inside one World run.

`ScenarioSystem` owns the store, the simulated processes and their agents and frontends. It carries out
the scenario's drives (turns and commands), implements what faults may do to the system (`FaultContext`:
Ctrl+C, crash and restart, a second process, an external append), and gives invariants their view of it
(`SystemView`). It is also where every recorded event is fanned out: to fault triggers, to the moments
drives wait for, to coverage, and to the invariants.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from faults.plan import FaultPlan, Moments
from faults.triggers import Trigger
from reference.agent import Agent
from reference.config import CompactionConfig
from reference.db import Database
from reference.frontends import CliFrontend, GatewayFrontend
from reference.lease import Process, ProcessTable
from reference.pool import CompressionPool
from reference.provider import ProviderScript, ScriptedProvider
from reference.store import SessionClosedByCompression, SessionStore, TitleInUseError
from reference.transcript import new_message
from sim.history import HistoryEvent
from sim.invariants import INVARIANTS, Violation
from sim.scenario.model import AgentSpec, DriveSpec, Scenario
from sim.world import World

PROVIDER_PREFIX = "provider_"
FRONTEND_KEYS = {"ctrl_c_grace_s": 2.0}
SEED_MESSAGE_CHARS = 160


class ProcessCrashed(BaseException):
    """Raised at a crashed process's next store call: a dead process writes nothing more."""


class ProcessDatabase(Database):
    """A process's connection to the store; once the process has crashed it refuses every call."""

    crashed = False

    def _invoke(self, op: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if self.crashed:
            raise ProcessCrashed(op)
        return super()._invoke(op, args, kw)


class ProcessRuntime:
    """A process's view of the runtime: the same clock and tasks, but a dead process records nothing."""

    def __init__(self, rt: Any) -> None:
        self._rt = rt
        self.crashed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rt, name)

    def emit(self, kind: str, **fields: Any) -> None:
        if not self.crashed:
            self._rt.emit(kind, **fields)


@dataclass
class SimProcess:
    name: str
    process: Process
    rt: ProcessRuntime
    db: ProcessDatabase
    pool: CompressionPool
    gateway: GatewayFrontend
    work: list[Any] = field(default_factory=list)


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


class ScenarioSystem:
    def __init__(self, world: World, scenario: Scenario) -> None:
        self.world = world
        self.rt = world.runtime
        self.scenario = scenario
        config, provider, frontend = split_overrides(scenario.world.config)
        self.config = CompactionConfig(**config)
        self.provider_script = ProviderScript(**provider)
        self.grace_s = frontend["ctrl_c_grace_s"]
        self.store = SessionStore(":memory:")
        self.process_table = ProcessTable()
        self.processes: dict[str, SimProcess] = {}
        self.agents: dict[str, AgentSlot] = {}
        self.plan = FaultPlan(scenario.faults, world.draw, self)
        self.moments = Moments(self.rt)
        names = INVARIANTS if scenario.expect.invariants == "all" else scenario.expect.invariants
        self.invariants = [INVARIANTS[name](self) for name in names]
        self.violations: list[Violation] = []
        self.coverage: set[str] = set()
        self._nursery: Any = None
        self._extra_processes = 0
        self._incarnations: dict[str, int] = {}
        self._extra_rotations = 0
        self._platform_messages = 0
        self._serving: list[tuple[SimProcess, str]] = []  # gateway queues to close once the run is idle

    # ---- wiring --------------------------------------------------------------------------------

    def install(self) -> None:
        self.world.checkpoint_hook = self.plan.at_point
        self.world.kernel.listeners.append(self._on_event)
        self.world.kernel.on_idle = self._on_idle
        self.plan.track_actions(self.moments)
        self._drive_triggers = [Trigger(d.trigger, f"drive.{d.agent}", self.world.draw) for d in self.scenario.drives]
        for trigger in self._drive_triggers:
            self.moments.track(trigger)

    def _on_event(self, event: HistoryEvent) -> None:
        self.plan.observe(event.kind, event.time)
        self.moments.observe(event.kind, event.time)
        self.coverage.add(event.kind)
        for invariant in self.invariants:
            violation = invariant.on_event(event)
            if violation is not None:
                self.violations.append(violation)

    def _on_idle(self) -> bool:
        """Nothing can run: end waits for events that cannot come, then let the gateways drain and stop."""
        if self.moments.give_up():
            return True
        serving, self._serving = self._serving, []
        for proc, name in serving:
            proc.gateway.close(name)
        return bool(serving)

    def finish(self) -> None:
        """Quiescence: the liveness checks and the final-state checks."""
        history = self.world.kernel.history
        for invariant in self.invariants:
            violation = invariant.at_end(history)
            if violation is not None:
                self.violations.append(violation)

    # ---- building ------------------------------------------------------------------------------

    def _build_sessions(self) -> None:
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

    def _start_process(self, name: str) -> SimProcess:
        """Start (or restart) a process; a restarted one is a new incarnation, so its attempt ids are new too."""
        rt = ProcessRuntime(self.rt)
        self._incarnations[name] = self._incarnations.get(name, -1) + 1
        incarnation = f"{name}r{self._incarnations[name]}" if self._incarnations[name] else name
        sim_process = SimProcess(name, self.process_table.spawn(incarnation), rt, ProcessDatabase(rt, self.store),
                                 CompressionPool(rt, self.config.pool_cap), GatewayFrontend(rt))
        self.processes[name] = sim_process
        return sim_process

    async def _start_agent(self, spec: AgentSpec, session: str | None = None) -> AgentSlot:
        proc = self.processes[spec.process]
        agent = Agent(proc.rt, proc.db, ScriptedProvider(proc.rt, self.provider_script), session_id=session or spec.session,
                      process=proc.process, config=self.config, pool=proc.pool, processes=self.process_table)
        await self._in_process(proc, agent.open())
        # Published only once open: `open` loads the transcript, so a turn that started earlier would lose
        # its user message when the load replaced the list it had been appended to.
        slot = AgentSlot(spec, agent, CliFrontend(proc.rt, agent, grace_s=self.grace_s, name=spec.name), proc)
        self.agents[spec.name] = slot
        if spec.frontend == "gateway" and self._nursery is not None:
            self._serve(slot)
        return slot

    def _serve(self, slot: AgentSlot) -> None:
        """The gateway takes the agent's platform messages one turn at a time, in its process."""
        proc = slot.proc
        self._serving.append((proc, slot.spec.name))
        self._nursery.start_soon(self._in_process, proc, proc.gateway.serve(slot.spec.name, slot.agent),
                                 name=f"gateway.{slot.spec.name}")

    # ---- the run -------------------------------------------------------------------------------

    async def main(self, rt: Any) -> None:
        self._build_sessions()
        self.store.fault_hook = self.plan.at_store
        for name in dict.fromkeys(agent.process for agent in self.scenario.world.agents):
            self._start_process(name)
        for spec in self.scenario.world.agents:
            await self._start_agent(spec)
        async with rt.open_nursery() as nursery:
            self._nursery = nursery
            for slot in list(self.agents.values()):
                if slot.spec.frontend == "gateway":
                    self._serve(slot)
            await self.plan.run_actions(nursery, self.moments)
            for index, (drive, trigger) in enumerate(zip(self.scenario.drives, self._drive_triggers)):
                nursery.start_soon(self._drive, drive, trigger, name=f"drive.{index}.{drive.action}")

    async def _drive(self, drive: DriveSpec, trigger: Trigger) -> None:
        if await self.moments.wait(trigger):
            await self._perform(drive)

    async def _perform(self, drive: DriveSpec) -> None:
        slot = self.agents[drive.agent]
        proc = slot.proc
        if drive.action == "turn":
            await self._in_process(proc, slot.frontend.submit(drive.text or ""))
        elif drive.action == "message":
            self._platform_messages += 1
            message_id = f"{drive.platform}:{self._platform_messages}"
            await proc.gateway.deliver(slot.spec.name, drive.text or "", platform_message_id=message_id)
        elif drive.action == "title":
            await self._in_process(proc, self._set_title(proc, drive.session or slot.agent.session_id, drive))
        elif drive.action == "compress":
            await self._in_process(proc, slot.agent.compress(force=True))
        elif drive.action == "ctrl_c":
            await self.ctrl_c(drive.agent)
        elif drive.action == "end_session":
            session = drive.session or slot.agent.session_id
            if self.store.end_session(session, now=self.rt.now(), reason=drive.end_reason or "tui_shutdown"):
                self.rt.emit("frontend.session_ended", session=session, reason=drive.end_reason)
        elif drive.action == "restart":
            self.crash(slot.spec.process)
            await self.restart(slot.spec.process)

    async def _set_title(self, proc: SimProcess, session: str, drive: DriveSpec) -> None:
        """A /title (or the auto-titler): what was stored is what the user sees."""
        try:
            stored = await proc.db.call("set_session_title", session, drive.text, source=drive.title_source)
        except TitleInUseError as error:
            proc.rt.emit("frontend.title_failed", session=session, title=drive.text, error=str(error))
            return
        proc.rt.emit("session.titled", session=session, title=drive.text, source=drive.title_source, stored=stored)

    async def _in_process(self, proc: SimProcess, work: Any) -> Any:
        """Run a process's work so that its crash stops it; a crash is the end of it, not an error."""
        with self.rt.cancel_scope() as scope:
            proc.work.append(scope)
            try:
                return await work
            except BaseException:
                if not proc.db.crashed:
                    raise
                return None  # whatever a dead process was doing when it died is gone with it
            finally:
                proc.work.remove(scope)
        return None

    # ---- FaultContext --------------------------------------------------------------------------

    def emit(self, kind: str, **fields: Any) -> None:
        self.rt.emit(kind, **fields)

    def host_ceiling_s(self) -> float:
        return self.config.ceiling_timeout_s

    async def ctrl_c(self, agent: str | None) -> None:
        slot = self.agents[agent or self.scenario.world.agents[0].name]
        await self._in_process(slot.proc, slot.frontend.ctrl_c())

    def crash(self, process: str) -> None:
        proc = self.processes[process]
        proc.rt.crashed = proc.db.crashed = True
        self.process_table.kill(proc.process)
        for scope in list(proc.work):
            scope.cancel()
        self.rt.emit("process.crashed", process=process, pid=proc.process.pid)

    async def restart(self, process: str) -> None:
        """A new incarnation reopens its agents; only then has it restarted, as far as anyone can tell."""
        proc = self._start_process(process)
        for spec in self.scenario.world.agents:
            if spec.process == process:
                await self._start_agent(spec)
        proc.rt.emit("process.restarted", process=process, pid=proc.process.pid)

    async def second_process(self, session: str | None, command: str, text: str) -> None:
        self._extra_processes += 1
        name = f"extra{self._extra_processes}"
        proc = self._start_process(name)
        self.rt.emit("process.started", process=name, pid=proc.process.pid)
        spec = AgentSpec(name=name, process=name, session=session or self.scenario.world.sessions[0].id, frontend="cli")
        slot = await self._start_agent(spec)
        work = slot.frontend.submit(text) if command == "turn" else slot.agent.compress(force=True)
        await self._in_process(proc, work)

    async def external_append(self, session: str | None, text: str) -> None:
        """Another writer (a gateway flush) appends a user message; it follows a rotation to the live tip."""
        target = session or self.scenario.world.sessions[0].id
        message = new_message("user", text, self.rt.now())
        db = Database(self.rt, self.store)
        try:
            ids = await db.call("append_messages", target, [message])
        except SessionClosedByCompression:
            target = await db.call("compression_tip", target)
            if target is None:
                self.rt.emit("append.failed", session=session, error="SessionClosedByCompression", writer="external")
                return
            ids = await db.call("append_messages", target, [message])
        except Exception as error:  # an injected DB failure: the write was refused, and that is recorded
            self.rt.emit("append.failed", session=target, error=type(error).__name__, writer="external")
            return
        self.rt.emit("append.ok", session=target, ids=ids, writer="external")
        self.rt.emit("turn.persisted", session=target, caller_session=target, turn=0, role="user", row=ids[0], writer="external")

    async def unleased_rotation(self, session: str | None) -> None:
        """A writer that takes no compression lease rotates the live head of `session`'s lineage (R19)."""
        db = Database(self.rt, self.store)
        parent = await db.call("compression_tip", session or self.scenario.world.sessions[0].id)
        if parent is None:
            self.rt.emit("external.rotation_skipped", session=session)
            return
        row = await db.call("get_session", parent)
        carried = [
            {"role": m.role, "content": m.content, "timestamp": m.timestamp, "platform_message_id": m.platform_message_id,
             "is_summary": m.is_summary}
            for m in await db.call("active_messages", parent)
        ]
        self._extra_rotations += 1
        child = f"{parent.split('/')[0]}/external{self._extra_rotations}"
        now = self.rt.now()
        self.store.create_session(child, now=now, parent=parent, model_config=row.model_config, title=row.title,
                                  title_source=row.title_source)
        if carried:
            self.store.append_messages(child, carried, now=now)
        self.store.end_session(parent, now=now, reason="compression")
        self.rt.emit("external.rotated", parent=parent, child=child)

    # ---- SystemView ----------------------------------------------------------------------------

    def holder_is_dead(self, holder: str) -> bool:
        return self.process_table.holder_is_dead(holder)

