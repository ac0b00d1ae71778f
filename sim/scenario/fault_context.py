"""What faults may do to the running system (`faults.base.FaultContext`), done to the system a builder built.

Ctrl+C in an agent's terminal, a process crash and restart, a second process, a message from a writer outside
the agents, and a rotation by a writer that takes no lease. Each records what it did, so a trace shows it.
"""

from __future__ import annotations

from contract.events import (
    EXTERNAL,
    AppendFailed,
    AppendOk,
    Event,
    ExternalRotated,
    ExternalRotationSkipped,
    ProcessCrashed,
    ProcessRestarted,
    ProcessStarted,
    TurnPersisted,
)
from contract.ids import SessionId
from reference.db import Database
from reference.store import SessionClosedByCompression
from reference.transcript import new_message
from sim.scenario.builder import SystemBuilder
from sim.scenario.model import AgentSpec

STOP_GRACE_S = 15.0  # a stopping process's unwind, as the real stress run waits before its SIGKILL


class SystemFaultContext:
    """The `FaultContext` of one run."""

    def __init__(self, built: SystemBuilder) -> None:
        self.rt = built.world.runtime
        self._built = built
        self._extra_processes = 0
        self._extra_rotations = 0

    def emit(self, event: Event) -> None:
        self.rt.emit(event)

    def host_ceiling_s(self) -> float:
        return self._built.config.ceiling_timeout_s

    def _first_session(self) -> str:
        return self._built.scenario.world.sessions[0].id

    async def ctrl_c(self, agent: str | None) -> None:
        slot = self._built.agents[agent or self._built.scenario.world.agents[0].name]
        await slot.proc.run(slot.frontend.ctrl_c())

    def alive(self, process: str) -> bool:
        """Whether the process's current incarnation runs (a crashed one waits for its restart, if any)."""
        return not self._built.processes[process].crashed

    def crash(self, process: str) -> None:
        proc = self._built.processes[process]
        proc.crash()
        self._built.process_table.kill(proc.process)
        self.rt.emit(ProcessCrashed(process=process, pid=proc.process.pid, start=proc.process.start_ticks))

    async def stop(self, process: str) -> None:
        """A clean stop (SIGTERM): the process's work unwinds through its own cleanup for up to `STOP_GRACE_S`;
        then the process is gone, and what still ran (a late worker, a stalled unwind) dies with it."""
        await self._built.processes[process].stop(STOP_GRACE_S)
        self.crash(process)

    async def restart(self, process: str, *, recycle_pid: bool = False) -> None:
        """A new incarnation reopens its agents; only then has it restarted, as far as anyone can tell.

        `recycle_pid`: the new incarnation gets the dead one's pid, as a kernel that recycled it would do.
        """
        dead_pid = self._built.processes[process].process.pid if recycle_pid else None
        proc = self._built.start_process(process, pid=dead_pid)
        for spec in self._built.scenario.world.agents:
            if spec.process == process:
                await self._built.start_agent(spec)
        proc.rt.emit(ProcessRestarted(process=process, pid=proc.process.pid))

    async def second_process(self, session: str | None, command: str, text: str) -> None:
        self._extra_processes += 1
        name = f"extra{self._extra_processes}"
        proc = self._built.start_process(name)
        self.rt.emit(ProcessStarted(process=name, pid=proc.process.pid))
        spec = AgentSpec(name=name, process=name, session=session or self._first_session(), frontend="cli")
        slot = await self._built.start_agent(spec)
        work = slot.frontend.submit(text) if command == "turn" else slot.agent.compress(force=True)
        await proc.run(work)

    async def external_append(self, session: str | None, text: str) -> None:
        """Another writer (a gateway flush) appends a user message; it follows a rotation to the live tip."""
        requested = None if session is None else SessionId(session)
        target = SessionId(session or self._first_session())
        message = new_message("user", text, self.rt.now())
        db = Database(self.rt, self._built.store)
        try:
            try:
                ids = await db.call("append_messages", target, [message])
            except SessionClosedByCompression:
                target = await db.call("compression_tip", target)
                if target is None:
                    self.rt.emit(AppendFailed(session=requested, error="SessionClosedByCompression", writer=EXTERNAL))
                    return
                ids = await db.call("append_messages", target, [message])
        except Exception as error:  # an injected DB failure, on the first write or the one at the tip: recorded
            self.rt.emit(AppendFailed(session=target, error=type(error).__name__, writer=EXTERNAL))
            return
        self.rt.emit(AppendOk(session=target, ids=ids, writer=EXTERNAL))
        self.rt.emit(TurnPersisted(session=target, caller_session=target, turn=0, role="user", row=ids[0], writer=EXTERNAL))

    async def unleased_rotation(self, session: str | None) -> None:
        """A writer that takes no compression lease rotates the live head of `session`'s lineage (R19): it reads
        the head and its active rows, then rotates in the store without looking at the lease, if the head is still
        open then (else it skips)."""
        db = Database(self.rt, self._built.store)
        requested = None if session is None else SessionId(session)
        parent = await db.call("compression_tip", session or self._first_session())
        if parent is None:
            self.rt.emit(ExternalRotationSkipped(session=requested))
            return
        row = await db.call("get_session", parent)
        carried = [
            {"role": m.role, "content": m.content, "timestamp": m.timestamp, "platform_message_id": m.platform_message_id,
             "is_summary": m.is_summary}
            for m in await db.call("active_messages", parent)
        ]
        head = self._built.store.get_session(parent)
        assert head is not None, f"the tip {parent} the store named has no row"
        if head.ended_at is not None:
            # read in the rotation's own step: a head closed since (a rotation, a stamp) rotated again would fork
            # the lineage by this writer's hand alone, which nothing in the reference can prevent or be judged for
            self.rt.emit(ExternalRotationSkipped(session=requested))
            return
        self._extra_rotations += 1
        child = SessionId(parent).continuation(f"external{self._extra_rotations}")
        self._built.store.rotate_without_lease(parent, child, carried, now=self.rt.now(), model_config=row.model_config,
                                               title=row.title, title_source=row.title_source)
        self.rt.emit(ExternalRotated(parent=parent, child=child))
