"""The user's side of a scenario: each drive waits for its trigger, then its action is carried out.

A drive sends a turn to an agent's terminal, a platform message to its gateway, a title to its session, or a
command: a forced compaction, Ctrl+C, a frontend's end stamp on a session, a restart of the agent's process (a
crash), or a clean stop of it (SIGTERM) and a restart. Each action has one handler, chosen by its
`DriveAction`; it runs in the incarnation of the process the agent was opened in, so a drive to an agent whose
process died dies with it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from contract.events import FrontendCommandFailed, FrontendSessionEnded, FrontendTitleFailed, SessionTitled, SessionTitleIndeterminate
from contract.ids import SessionId
from faults.plan import Moments
from faults.triggers import Trigger
from reference.store import TitleInUseError
from sim.kernel.errors import unwrap
from sim.scenario.builder import AgentSlot, SystemBuilder
from sim.scenario.fault_context import SystemFaultContext
from sim.scenario.model import DriveAction, DriveSpec
from sim.scenario.processes import SimProcess

DRIVE_TASK = "drive"  # a drive runs in the task `drive.<index>.<action>`
DEFAULT_END_REASON = "tui_shutdown"  # what a terminal stamps when it closes a session without saying why
# what the user types into the agent's own process; a dead one takes none of it (it would only start work, a
# compression job for one, that dies at its first store call and so is never seen to finish)
TYPED_INTO_PROCESS = frozenset({DriveAction.TURN, DriveAction.TITLE, DriveAction.COMPRESS, DriveAction.CTRL_C})


class Drives:
    """The scenario's drives in one run. Their triggers are made (and draw) when the run is installed."""

    def __init__(self, built: SystemBuilder, actions: SystemFaultContext, draw: Callable[[str, int], int]) -> None:
        self._built = built
        self._actions = actions
        self._triggers = [Trigger(drive.trigger, f"drive.{drive.agent}", draw) for drive in built.scenario.drives]
        self._platform_messages = 0
        self._handlers: dict[DriveAction, Callable[[DriveSpec, AgentSlot], Awaitable[None]]] = {
            DriveAction.TURN: self._turn,
            DriveAction.MESSAGE: self._message,
            DriveAction.TITLE: self._title,
            DriveAction.COMPRESS: self._compress,
            DriveAction.CTRL_C: self._ctrl_c,
            DriveAction.END_SESSION: self._end_session,
            DriveAction.RESTART: self._restart,
            DriveAction.STOP: self._stop,
        }

    def track(self, moments: Moments) -> None:
        """Watch every drive's trigger from the start of the run (an early event still arms it)."""
        for trigger in self._triggers:
            moments.track(trigger)

    def start(self, nursery: Any, moments: Moments) -> None:
        for index, (drive, trigger) in enumerate(zip(self._built.scenario.drives, self._triggers)):
            nursery.start_soon(self._drive, drive, trigger, moments, name=f"{DRIVE_TASK}.{index}.{drive.action}")

    async def _drive(self, drive: DriveSpec, trigger: Trigger, moments: Moments) -> None:
        if await moments.wait(trigger) and not trigger.expired(self._actions.rt.now()):
            slot = self._built.agents[drive.agent]
            if slot.proc.crashed and drive.action in TYPED_INTO_PROCESS:
                return  # nobody can type into a dead process: until its restart, its agent takes no turn or command
            await self._handlers[drive.action](drive, slot)

    async def _turn(self, drive: DriveSpec, slot: AgentSlot) -> None:
        await slot.proc.run(slot.frontend.submit(drive.turn or ""))

    async def _message(self, drive: DriveSpec, slot: AgentSlot) -> None:
        """A platform message waits in the gateway agent's queue; its id is `<platform>:<n>`."""
        self._platform_messages += 1
        message_id = f"{drive.platform}:{self._platform_messages}"
        await slot.proc.gateway.deliver(slot.spec.name, drive.message or "", platform_message_id=message_id)

    async def _title(self, drive: DriveSpec, slot: AgentSlot) -> None:
        session = SessionId(drive.session or slot.agent.session_id)
        await slot.proc.run(self._shown(slot, drive, self._set_title(slot.proc, session, drive)))

    async def _set_title(self, proc: SimProcess, session: SessionId, drive: DriveSpec) -> None:
        """A /title (or the auto-titler): what was stored is what the user sees. A write that raised otherwise
        may still have committed (an error after its COMMIT), so it is recorded as given, outcome unknown."""
        title = drive.title or ""
        try:
            stored = await proc.db.call("set_session_title", session, title, source=drive.title_source)
        except TitleInUseError as error:
            proc.rt.emit(FrontendTitleFailed(session=session, title=title, error=str(error)))
            return
        except Exception:
            proc.rt.emit(SessionTitleIndeterminate(session=session, title=title, source=drive.title_source))
            raise
        proc.rt.emit(SessionTitled(session=session, title=title, source=drive.title_source, stored=stored))

    async def _compress(self, drive: DriveSpec, slot: AgentSlot) -> None:
        await slot.proc.run(self._shown(slot, drive, slot.agent.compress(force=True)))

    @staticmethod
    async def _shown(slot: AgentSlot, drive: DriveSpec, command: Awaitable[Any]) -> None:
        """A command the user typed: like a failed turn, its failure is shown to them and the prompt returns."""
        try:
            await command
        except Exception as error:
            shown = unwrap(error)  # what the user reads is the error, not the task groups it came through
            slot.proc.rt.emit(FrontendCommandFailed(agent=slot.spec.name, command=str(drive.action),
                                                    error=f"{type(shown).__name__}: {shown}"))

    async def _ctrl_c(self, drive: DriveSpec, slot: AgentSlot) -> None:
        """Ctrl+C; with `typed`, the user's message then goes in as the next turn once the grace period is over."""
        await self._actions.ctrl_c(drive.agent)
        if drive.typed is not None and not slot.proc.crashed:
            await slot.proc.run(slot.frontend.submit(drive.typed))

    async def _end_session(self, drive: DriveSpec, slot: AgentSlot) -> None:
        """The frontend's end stamp is a store write like any other: a busy or failing store refuses it, and the
        frontend shows that, as it shows a failed command; it never takes the whole system down."""
        await self._shown(slot, drive, self._stamp_end(drive, slot))

    async def _stamp_end(self, drive: DriveSpec, slot: AgentSlot) -> None:
        session = SessionId(drive.session or slot.agent.session_id)
        rt = self._actions.rt
        if self._built.store.end_session(session, now=rt.now(), reason=drive.end_reason or DEFAULT_END_REASON):
            rt.emit(FrontendSessionEnded(session=session, reason=drive.end_reason))

    async def _restart(self, drive: DriveSpec, slot: AgentSlot) -> None:
        self._actions.crash(slot.spec.process)
        await self._actions.restart(slot.spec.process)

    async def _stop(self, drive: DriveSpec, slot: AgentSlot) -> None:
        await self._actions.stop(slot.spec.process)
        await self._actions.restart(slot.spec.process)
