"""A scenario's world on a hermes-agent release, inside one World run: the store, the agents, the terminals,
the drives and faults, the events the oracle judges.

Everything hermes does runs on simulated threads (`sim.threads`): the harness's coroutines (the drives and
faults of the scenario language, the fault plan, the moments) start a thread for each thing they do to hermes
(`ThreadRun.call`), and hermes's own threads (a turn's daemon thread, the lease refresher) are started by its
own `threading.Thread.start`. The run's database is a real SQLite file in a folder of its own; each simulated
process opens its own `SessionDB` on it, as two hermes processes would.

Built as the reference's world is (`sim.scenario.builder`): the scenario's sessions with their seed messages,
written through hermes's own `SessionDB` before the run starts (no event: they are history, not a turn);
then one real `AIAgent` per agent, offline (probes stubbed, `probes.py`), its main model scripted to answer,
its summary model scripted by the faults at `provider.summary`; then a terminal (`frontend.Cli`) per agent.
The world's settings a hermes release has are applied to it (`target.SETTINGS`).

At the end (drives and faults done), every terminal is closed; the run goes on until nothing can run and no
timer is pending (an abandoned turn finishes its work, a stalled summary returns), then every thread still
blocked (hermes's log listener, a refresher nobody stops) ends as at the process's exit.
"""

from __future__ import annotations

import contextlib
import functools
import io
import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from contract.events import (
    AppendFailed,
    AppendOk,
    AttemptClaimed,
    CommitArchived,
    CommitPublished,
    CompactionBlocked,
    CompactionCommitFailed,
    CompactionFinished,
    CompactionInput,
    CompactionRefused,
    CompactionSummaryStarted,
    FrontendSessionEnded,
    FrontendTitleFailed,
    LeaseAcquired,
    LeaseAcquireFailed,
    LeaseContended,
    LeaseRefreshed,
    LeaseRefreshFailed,
    LeaseReleased,
    LeaseReleaseFailed,
    ProcessCrashed,
    SessionReopened,
    SessionTitled,
    SessionTitleIndeterminate,
    TurnContextOverflow,
    TurnPersisted,
)
from contract.events.base import Event
from contract.events.turns import EXTERNAL
from contract.history import HistoryEvent
from contract.ids import AttemptId, HolderId, SessionId
from faults.plan import FaultPlan, Moments
from faults.provider_error import ContextLengthExceeded
from faults.triggers import Trigger
from sim.core.world import World
from sim.invariants import InvariantSet, Violation
from sim.kernel.sync import Event as KernelEvent
from sim.scenario.gateways import GATEWAY
from sim.threads.baton import SimThread, ThreadAbandoned, current
from sim.threads.run import ThreadRun
from sim.threads.tracing import Preemption
from targets.hermes import observe
from targets.hermes.frontend import COMPRESS, EXIT, Cli
from targets.hermes.gateway import EXIT as GATEWAY_EXIT
from targets.hermes.gateway import Gateway
from targets.hermes.provider import context_length_exceeded, reply, script_main_model
from targets.hermes.target import MAIN as MAIN_MODEL
from targets.hermes.target import apply_settings
from targets.hermes.view import HermesStore

SUMMARY_TEXT = "SUMMARY of the earlier conversation"
ANSWER = "the answer"
SEED_MESSAGE_CHARS = 160  # as the reference's seed messages (sim/scenario/builder.py)
OFFLINE_URL = "http://127.0.0.1:9/v1"  # never reached: every probe is stubbed and sockets are refused in a run
STALL_S = 30.0  # real seconds a hermes thread may compute without a scheduling point (AIAgent() takes about 1)


class HermesSystem:
    """One run of a scenario on the loaded release (see the module docstring)."""

    def __init__(self, world: World, scenario: Any, folder: Path, invariants: Sequence[Any], settings: dict[str, Any]) -> None:
        self.world = world
        self.scenario = scenario
        self.rt = world.runtime
        self.threads = ThreadRun(world, preemption=Preemption("sync"), stall_s=STALL_S, strict=False)
        self.folder = folder
        self.settings_values = settings
        self.store: HermesStore | None = None
        self.context = HermesFaultContext(self)
        self.plan = FaultPlan(scenario.faults, world.draw, self.context)
        self.moments = Moments(world.runtime)
        self.invariant_classes = invariants
        self.invariants: InvariantSet | None = None
        self.violations: list[Violation] = []
        self.coverage: set[str] = set()
        self.clis: dict[str, Cli] = {}
        self.gateways: dict[str, Gateway] = {}
        self.agents: dict[str, Any] = {}
        self.dbs: dict[str, Any] = {}  # a SessionDB per simulated process
        self.dead: set[str] = set()
        self.building = True
        self._external: Any = None  # the other writer's SessionDB (message_mid_compression)
        self._turn_of: dict[SimThread, tuple[str, int]] = {}  # a turn's thread -> its agent and number
        self._attempts: dict[SimThread, list[tuple[AttemptId, SessionId]]] = defaultdict(list)
        self._ops: dict[SimThread, list[str]] = defaultdict(list)
        self._failed_inside: dict[SimThread, BaseException | None] = {}
        self._numbers: dict[str, int] = defaultdict(int)  # attempts per process
        self._reasons: dict[AttemptId, str] = {}  # why an attempt that ends without a commit did (see `_outcome`)
        self._archived: set[AttemptId] = set()
        self._appended_by: dict[int, str] = {}  # row -> the process that appended it during the run ("" another writer)
        self._published: set[AttemptId] = set()  # attempts whose rotation made its child
        self._refresh_failures: dict[str, int] = defaultdict(int)
        self._holder_process: dict[str, str] = {}
        self.output = io.StringIO()  # what hermes printed (its emoji status lines), kept off the terminal
        self._closing = False
        self._quiet = KernelEvent(world.kernel, "the end of the run's work")
        self._drive_triggers = [Trigger(drive.trigger, f"drive.{drive.agent}", world.draw) for drive in scenario.drives]

    # ---- the run --------------------------------------------------------------------------------------

    def install(self) -> None:
        self.world.kernel.listeners.append(self._on_event)
        self.world.kernel.on_idle = self._on_idle
        self.plan.track_actions(self.moments)
        for trigger in self._drive_triggers:
            self.moments.track(trigger)

    def _on_event(self, record: HistoryEvent) -> None:
        kind = record.event.kind
        self.plan.observe(kind, record.time)
        self.moments.observe(kind, record.time)
        self.coverage.add(kind)
        if self.invariants is not None:
            self.violations.extend(self.invariants.on_event(record))

    async def main(self, rt: Any) -> None:
        observe.ACTIVE.append(self)
        with contextlib.redirect_stdout(self.output), contextlib.redirect_stderr(self.output):
            await self._main(rt)

    async def _main(self, rt: Any) -> None:
        try:
            first = self.scenario.world.agents[0].process
            await self.threads.call(self._build, name="build", process=first)
            self.store = HermesStore(self._db_path)
            from targets.hermes.view import HermesView

            self.invariants = InvariantSet(cls(HermesView(self)) for cls in self.invariant_classes)
            self.building = False
            self.invariants.at_start()
            for spec in self.scenario.world.agents:
                self.threads.start(self._frontend_thread(spec.name), spec.process)
            async with rt.open_nursery() as late:
                async with rt.open_nursery() as nursery:
                    await self.plan.run_actions(nursery, self.moments)
                    for index, (drive, trigger) in enumerate(zip(self.scenario.drives, self._drive_triggers)):
                        nursery.start_soon(self._drive, drive, trigger, name=f"drive.{index}.{drive.action}")
                self.plan.act_in(late)
                for spec in self.scenario.world.agents:
                    if spec.process not in self.dead:
                        await self.act(functools.partial(self._close_frontend, spec.name), f"quit.{spec.name}", spec.process)
                self._closing = True
                await self._quiet.wait()
        finally:
            observe.ACTIVE.remove(self)

    def _frontend_thread(self, name: str) -> threading.Thread:
        """The thread that serves an agent's frontend: its terminal's chat loop, or its gateway's message loop."""
        if name in self.gateways:
            return threading.Thread(target=self.gateways[name].serve, name=f"gateway.{name}", daemon=True)
        return threading.Thread(target=self.clis[name].chat_loop, name=f"cli.{name}", daemon=True)

    def _close_frontend(self, name: str) -> None:
        if name in self.gateways:
            self.gateways[name].deliver(GATEWAY_EXIT)
        else:
            self.clis[name].type(EXIT)

    async def act(self, call: Callable[[], Any], name: str, process: str) -> None:
        """What a user does in a process (types, presses Ctrl+C, ends the session, closes the terminal), on a thread
        of that process: a crash of the process meanwhile ends it there, as it ends every thread of the process."""
        try:
            await self.threads.call(call, name=name, process=process)
        except ThreadAbandoned:
            if process not in self.dead:
                raise

    def _on_idle(self) -> bool:
        """Nothing can run and no timer is pending: a drive or fault waiting for an event that cannot come gives up;
        once the terminals are closed, what is left (threads blocked for good, like hermes's log listener) ends
        as at a process's exit."""
        if self.moments.give_up():
            return True
        if self._closing and not self._quiet.is_set():
            self.threads.abandon_rest()
            self._quiet.set()
            return True
        return False

    def finish(self) -> None:
        """Quiescence: the liveness and final-state checks."""
        if self.invariants is not None:
            self.violations.extend(self.invariants.at_end(self.world.kernel.history))

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    @property
    def _db_path(self) -> Path:
        return self.folder / "state.db"

    def owns_caller(self) -> bool:
        """Whether the calling thread is one of this run's (and the world is built): a hook then acts."""
        sim = current()
        return not self.building and sim is not None and sim.run is self.threads

    # ---- building the world (on a thread: hermes's code is threaded) ---------------------------------

    def _build(self) -> None:
        import hermes_state

        self.folder.mkdir(parents=True, exist_ok=True)
        for spec in self.scenario.world.agents:
            if spec.process not in self.dbs:
                self.dbs[spec.process] = hermes_state.SessionDB(db_path=self._db_path)
        self._external = hermes_state.SessionDB(db_path=self._db_path)
        db = next(iter(self.dbs.values()))
        for session in self.scenario.world.sessions:
            db.create_session(session.id, "cli", parent_session_id=session.parent)
            if session.title is not None:
                db.set_session_title(session.id, session.title)
            for i in range(session.messages):
                text = f"{session.id} message {i} ".ljust(SEED_MESSAGE_CHARS, ".")
                db.append_message(session.id, "user" if i % 2 == 0 else "assistant", text)
            if session.end_reason is not None:
                db.end_session(session.id, session.end_reason)
        for spec in self.scenario.world.agents:
            agent = self._agent(spec, spec.session)
            db = self.dbs[spec.process]
            if spec.frontend == GATEWAY:
                self.gateways[spec.name] = Gateway(spec.name, agent, db, self.folder, self.rt.emit, self._turn_started,
                                                   functools.partial(self._agent, spec))
            else:
                history = db.get_messages_as_conversation(spec.session)
                self.clis[spec.name] = Cli(spec.name, agent, list(history), self.rt.emit, self._turn_started)

    def _agent(self, spec: Any, session: str) -> Any:
        """A fresh AIAgent of `spec` on `session` (the gateway makes a new one after a reset): the agent of its name."""
        import run_agent

        agent = run_agent.AIAgent(base_url=OFFLINE_URL, api_key="offline", provider="custom", model="scripted",
                                  quiet_mode=True, skip_context_files=True, skip_memory=True, enabled_toolsets=[],
                                  session_db=self.dbs[spec.process], session_id=session)
        apply_settings(agent, self.settings_values)
        script_main_model(agent, f"{ANSWER} of {spec.name}", numbered=True,
                          before=functools.partial(self.main_model, agent))
        self.agents[spec.name] = agent
        return agent

    def _turn_started(self, frontend: Cli | Gateway, number: str) -> None:
        sim = current()
        assert sim is not None
        self._turn_of[sim] = (frontend.name, int(number))

    # ---- drives -----------------------------------------------------------------------------------------

    async def _drive(self, drive: Any, trigger: Trigger) -> None:
        if not await self.moments.wait(trigger) or trigger.expired(self.rt.now()):
            return
        spec = next(agent for agent in self.scenario.world.agents if agent.name == drive.agent)
        if spec.process in self.dead:
            return  # nobody types into a dead process
        action = str(drive.action)
        if action == "ctrl_c" and drive.typed is None:
            await self.context.ctrl_c(drive.agent)
            return
        if action == "end_session":
            await self.act(lambda: self._end_session(spec, drive), f"end.{drive.agent}", spec.process)
            return
        if action == "title":
            await self.act(lambda: self._title(spec, drive.title), f"title.{drive.agent}", spec.process)
            return
        if action == "message":
            gateway = self.gateways[drive.agent]
            await self.act(lambda: gateway.deliver(drive.message or ""), f"message.{drive.agent}", spec.process)
            return
        # a message typed while a turn runs is hermes's own interrupt (cli.py): Ctrl+C with a typed message
        text = COMPRESS if action == "compress" else drive.typed if action == "ctrl_c" else (drive.turn or "")
        cli = self.clis[drive.agent]
        await self.act(lambda: cli.type(text), f"type.{drive.agent}", spec.process)

    def _end_session(self, spec: Any, drive: Any) -> None:
        """The frontend ends the session; a store that refuses (a fault at `db.end_session`) leaves it open, which
        is the frontend's lot, not an error of the run (it would stop every drive and strand the terminals)."""
        session = drive.session or self.agents[spec.name].session_id
        reason = drive.end_reason or "tui_shutdown"
        try:
            self.dbs[spec.process].end_session(session, reason)
        except Exception:
            return
        self.rt.emit(FrontendSessionEnded(session=session, reason=drive.end_reason))

    def _title(self, spec: Any, title: str) -> None:
        """The terminal's /title: `set_session_title` on the agent's session, which refuses a title another session
        shows (ValueError); any other error leaves it unknown whether the title was stored."""
        session = SessionId(self.agents[spec.name].session_id)
        try:
            self.dbs[spec.process].set_session_title(session, title)
        except ValueError as error:
            self.rt.emit(FrontendTitleFailed(session=session, title=title, error=str(error)))
            return
        except Exception:
            self.rt.emit(SessionTitleIndeterminate(session=session, title=title, source="user"))
            return
        self.rt.emit(SessionTitled(session=session, title=title, source="user", stored=title))

    # ---- hooks (observe.py calls these on the run's threads) -----------------------------------------

    def wait(self, awaitable: Any) -> Any:
        """Run a coroutine of the harness (a fault's point) on the calling thread."""
        sim = current()
        assert sim is not None
        return self.threads.wait_for(sim, awaitable)

    def summarize(self, request: dict[str, Any]) -> Any:
        """The summary model: the attempt's input is recorded, then the faults at `provider.summary` act.

        hermes summarizes the agent's messages in memory, never the store: its input is the session's active rows but
        those another process appended during the run, which no agent of this process ever loaded (the rows the world
        began with, and those this process wrote, it holds)."""
        sim = current()
        assert sim is not None and self.store is not None
        attempt, session = self._attempt_of(sim)
        rows = [row for row in self.store.active_row_ids(session) if self._appended_by.get(row, sim.process) == sim.process]
        self.rt.emit(CompactionInput(session=session, attempt=attempt, rows=rows))
        self.rt.emit(CompactionSummaryStarted(attempt=attempt, generation=int(attempt.rsplit(".", 1)[1])))
        try:
            self.wait(self.plan.at_point("provider.summary"))
        except Exception:
            self._reasons[attempt] = "summary_failed"
            raise
        return reply(SUMMARY_TEXT)

    def main_model(self, agent: Any, api_kwargs: dict[str, Any]) -> None:
        """The main model's call: the faults at `turn.model` act. The provider's refusal of a context too long reaches
        hermes as its OpenAI client raises it (`provider.context_length_exceeded`). An error hermes's own classifier
        reads as a context overflow (that refusal, or another error whose text says so) is a provider-proven
        overflow: hermes's turn loop recovers from it, and `turn.context_overflow` says so."""
        if not self.owns_caller():
            return
        try:
            self.wait(self.plan.at_point(MAIN_MODEL))
        except Exception as raised:
            error = context_length_exceeded(OFFLINE_URL, str(raised)) if isinstance(raised, ContextLengthExceeded) else raised
            tokens = _overflowed(agent, api_kwargs.get("messages") or [], error)
            if tokens is not None:
                self.rt.emit(TurnContextOverflow(session=SessionId(agent.session_id), tokens=tokens))
            raise error from None

    def in_cooldown(self, compressor: Any) -> bool:
        """Whether the compressor's summary-failure cooldown is in force now (hermes's own test, on monotonic time)."""
        return bool(compressor._summary_failure_cooldown_until > time.monotonic())

    def gate_blocked(self, compressor: Any) -> None:
        """0.19.0's automatic gate refused the attempt in progress: for the cooldown, or for repeated ineffective
        or fallback compactions (its anti-thrashing backoff). Outside an attempt (a turn's own check) it is no event."""
        found = self._current_attempt()
        if found is None:
            return
        attempt, session = found
        reason = "cooldown" if self.in_cooldown(compressor) else "structural_backoff"
        self._reasons[attempt] = reason
        self.rt.emit(CompactionBlocked(session=session, attempt=attempt, reason=reason))

    def summary_skipped_for_cooldown(self) -> None:
        """`_generate_summary` returned nothing because the cooldown was in force (it called no model)."""
        found = self._current_attempt()
        if found is not None:
            self._reasons.setdefault(found[0], "cooldown_skip")

    def _current_attempt(self) -> tuple[AttemptId, SessionId] | None:
        sim = current()
        stack = self._attempts.get(sim) if sim is not None else None
        return stack[-1] if stack else None

    def attempt(self, agent: Any, call: Callable[[], Any]) -> Any:
        """One compaction attempt (`compress_context`): numbered per process, finished with its outcome."""
        sim = current()
        assert sim is not None
        self._numbers[sim.process] += 1
        attempt = AttemptId.of(sim.process or "p", self._numbers[sim.process])
        session = SessionId(agent.session_id)
        self.rt.emit(AttemptClaimed(attempt=attempt, generation=self._numbers[sim.process]))
        self._attempts[sim].append((attempt, session))
        try:
            result = call()
        except BaseException as error:
            self.rt.emit(CompactionFinished(session=session, attempt=attempt, status="error", reason=type(error).__name__))
            raise
        finally:
            self._attempts[sim].pop()
        status = _status(attempt in self._published, attempt in self._archived, agent.session_id != session)
        reason = self._outcome(attempt, session, status)
        self.rt.emit(CompactionFinished(session=session, attempt=attempt, status=status, reason=reason))
        return result

    def _outcome(self, attempt: AttemptId, session: SessionId, status: str) -> str:
        """Why an attempt ended as it did, by the reference's names: a commit has no reason; an attempt that changed
        nothing was blocked by the gate (`compaction.blocked` said so), skipped its summary for the cooldown or had
        it fail (then `compaction.refused`), found the lease held, or found nothing to compress (`no_progress`)."""
        reason = self._reasons.pop(attempt, "")
        if status != "unchanged":
            return ""
        if reason == "cooldown_skip":
            reason = "cooldown"
            self.rt.emit(CompactionRefused(session=session, attempt=attempt, reason=reason))
        elif reason == "summary_failed":
            self.rt.emit(CompactionRefused(session=session, attempt=attempt, reason=reason))
        return reason or "no_progress"

    def holder_suffix(self) -> str:
        """What a lease holder id taken now adds to hermes's own (`pid:tid:agent:nonce`, opaque to every release,
        which only compares it whole): the attempt taking it, `:proc=<process>:attempt=<n>`, so the oracle reads a
        holder's attempt out of the id as it does the reference's (`contract.ids.HolderId.attempt`)."""
        sim = current()
        assert sim is not None
        attempt, _ = self._attempt_of(sim)
        process, _, number = attempt.rpartition(".")
        return f":proc={process}:attempt={number}"

    def _attempt_of(self, sim: SimThread) -> tuple[AttemptId, SessionId]:
        stack = self._attempts.get(sim)
        if not stack:
            raise RuntimeError("hermes called its summary model outside compress_context")
        return stack[-1]

    def write(self, op: str, db: Any, call: Callable[[], Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A public SessionDB write: its point, then the call, then what it did, as events."""
        sim = current()
        assert sim is not None
        point = observe.POINT_NAMES.get(op, op)
        self.wait(self.plan.at_point(f"db.{point}"))
        named = args[0] if args else kwargs.get("session_id")
        session = SessionId(named) if isinstance(named, str) else named  # events carry ids as the reference's do
        held = self._held_before(op, session, args, kwargs)
        self._ops[sim].append(point)
        self._failed_inside[sim] = None
        try:
            result = call()
        except Exception as error:
            self._failed(op, db, session, args, kwargs, error)
            raise
        finally:
            self._ops[sim].pop()
        failed = self._failed_inside.pop(sim, None)
        self._succeeded(sim, op, db, session, args, kwargs, result, failed, held)
        return result

    def transaction(self, db: Any, run: Callable[[Callable[..., Any]], Any], fn: Callable[..., Any]) -> Any:
        """`_execute_write`: the store faults of the write's op, before COMMIT inside the transaction (rolled back,
        and retried by hermes if it says `database is locked`), after COMMIT outside it (durable, reported failed)."""
        sim = current()
        assert sim is not None
        ops = self._ops.get(sim)
        op = ops[-1] if ops else "write"

        def guarded(connection: Any) -> Any:
            self.plan.at_store(op, "before_commit")
            return fn(connection)

        try:
            result = run(guarded)
        except Exception as error:
            self._failed_inside[sim] = error
            raise
        try:
            self.plan.at_store(op, "after_commit")
        except Exception as error:
            self._failed_inside[sim] = error
            raise
        return result

    def _held_before(self, op: str, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if op != "release_compression_lock" or self.store is None:
            return False
        row = self.store.lease_row(session)
        return row is not None and row.holder == _holder(args, kwargs)

    def _writer(self, db: Any) -> str | None:
        return EXTERNAL if db is self._external else None

    def _succeeded(self, sim: SimThread, op: str, db: Any, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                   result: Any, failed: BaseException | None, held: bool) -> None:
        emit, writer = self.rt.emit, self._writer(db)
        stack = self._attempts.get(sim) or []
        if op == "append_message":
            role = args[1] if len(args) > 1 else kwargs.get("role", "")
            agent, turn = self._turn_of.get(sim, ("", 0))
            caller = self.agents[agent].session_id if agent in self.agents else session
            self._appended_by[result] = "" if writer == EXTERNAL else sim.process or ""
            emit(AppendOk(session=session, ids=[result], writer=writer))
            emit(TurnPersisted(session=session, caller_session=caller, turn=turn, role=role, row=result, writer=writer))
        elif op == "create_session" and stack and kwargs.get("parent_session_id") == stack[-1][1]:
            attempt, parent = stack[-1]
            self._published.add(attempt)
            emit(CommitPublished(parent=parent, child=SessionId(session), attempt=attempt))
        elif op == "reopen_session":
            emit(SessionReopened(session=session))
        elif op == "archive_and_compact" and stack:
            attempt, _ = stack[-1]
            self._archived.add(attempt)
            emit(CommitArchived(session=session, attempt=attempt, rows=int(result or 0)))
        elif op == "try_acquire_compression_lock":
            self._leased(session, HolderId(_holder(args, kwargs)), result, failed)
        elif op == "refresh_compression_lock":
            holder = HolderId(_holder(args, kwargs))
            if result and failed is None:
                self._refresh_failures[holder] = 0
                emit(LeaseRefreshed(session=session, holder=holder))
            else:
                self._refresh_failures[holder] += 1
                emit(LeaseRefreshFailed(session=session, holder=holder, failures=self._refresh_failures[holder]))
        elif op == "release_compression_lock":
            holder = HolderId(_holder(args, kwargs))
            if failed is not None:
                emit(LeaseReleaseFailed(session=session, holder=holder, error=repr(failed)))
            else:
                emit(LeaseReleased(session=session, holder=holder, held=held))

    def name_of(self, agent: Any) -> str:
        return next((name for name, known in self.agents.items() if known is agent), "unknown")

    def process_of_holder(self, holder: str) -> str | None:
        """The simulated process whose thread took a lease as `holder` (hermes's holder ids name the real pid,
        which every simulated process shares)."""
        return self._holder_process.get(holder)

    def _leased(self, session: Any, holder: HolderId, won: Any, failed: BaseException | None) -> None:
        if won:
            sim = current()
            self._holder_process[holder] = sim.process if sim is not None else ""
            self.rt.emit(LeaseAcquired(session=session, holder=holder))
        elif failed is not None:
            self.rt.emit(LeaseAcquireFailed(session=session, holder=holder, error=repr(failed)))
        else:
            found = self._current_attempt()
            if found is not None:
                self._reasons.setdefault(found[0], "lock_contended")
            row = self.store.lease_row(session) if self.store is not None else None
            self.rt.emit(LeaseContended(session=session, holder=HolderId(row.holder if row is not None else holder)))

    def _failed(self, op: str, db: Any, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any], error: Exception) -> None:
        sim = current()
        stack = self._attempts.get(sim) if sim is not None else None
        if op == "append_message":
            self.rt.emit(AppendFailed(session=session, error=type(error).__name__, writer=self._writer(db)))
        elif op == "archive_and_compact" and stack:
            self.rt.emit(CompactionCommitFailed(session=session, attempt=stack[-1][0], error=repr(error)))
        elif op == "try_acquire_compression_lock":
            self.rt.emit(LeaseAcquireFailed(session=session, holder=HolderId(_holder(args, kwargs)), error=repr(error)))
        elif op == "release_compression_lock":
            self.rt.emit(LeaseReleaseFailed(session=session, holder=HolderId(_holder(args, kwargs)), error=repr(error)))


def _overflowed(agent: Any, messages: list[dict[str, Any]], error: Exception) -> int | None:
    """The request's size (hermes's rough estimate) if hermes's classifier reads `error` as a context overflow, as its
    turn loop asks it (agent/conversation_loop.py: `classify_api_error`), else None."""
    from agent.error_classifier import FailoverReason, classify_api_error
    from agent.model_metadata import estimate_messages_tokens_rough

    tokens = estimate_messages_tokens_rough(messages)
    classified = classify_api_error(error, provider=agent.provider or "", model=agent.model or "", approx_tokens=tokens,
                                    context_length=agent.context_compressor.context_length, num_messages=len(messages))
    return tokens if classified.reason == FailoverReason.context_overflow else None


def _status(published: bool, archived: bool, moved: bool) -> str:
    """An attempt's outcome: a rotation that made its child, an in-place commit, or neither; an agent that moved to
    a new id with no child made (0.18.2 keeps the new id when `create_session` fails) failed its commit."""
    if published:
        return "rotated"
    if archived:
        return "committed"
    return "failed" if moved else "unchanged"


def _holder(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return args[1] if len(args) > 1 else kwargs.get("holder", "")


class HermesFaultContext:
    """What the scenario language's action faults do to a hermes run (`faults.base.FaultContext`)."""

    def __init__(self, system: HermesSystem) -> None:
        self._system = system
        self.rt = system.rt

    def emit(self, event: Event) -> None:
        self.rt.emit(event)

    def _process_of(self, agent: str | None) -> tuple[str, str]:
        specs = self._system.scenario.world.agents
        spec = next((s for s in specs if s.name == agent), specs[0]) if agent else specs[0]
        return spec.name, spec.process

    async def ctrl_c(self, agent: str | None) -> None:
        name, process = self._process_of(agent)
        if process in self._system.dead:
            return
        cli = self._system.clis[name]
        await self._system.act(cli.ctrl_c, f"ctrl_c.{name}", process)

    def alive(self, process: str) -> bool:
        return process not in self._system.dead

    def crash(self, process: str) -> None:
        """The process dies: its threads stop where they are, its connection with them; its rows stay."""
        system = self._system
        system.dead.add(process)
        system.threads.abandon_process(process)
        self.rt.emit(ProcessCrashed(process=process, pid=system.threads.pid_of(process)))

    async def external_append(self, session: str | None, text: str) -> None:
        """Another process's SessionDB appends a user message (hermes's appends never look at the lease)."""
        system = self._system
        target = session or system.scenario.world.sessions[0].id
        await system.threads.call(lambda: _append_ignoring_error(system._external, target, text), name="other-writer",
                                  process="other")

    def host_ceiling_s(self) -> float:
        raise NotImplementedError("hermes has no host ceiling")

    async def restart(self, process: str, *, recycle_pid: bool = False) -> None:
        raise NotImplementedError("a hermes process is not restarted by the harness")

    async def second_process(self, session: str | None, command: str, text: str) -> None:
        raise NotImplementedError("hermes's second process is a second writer: message_mid_compression")

    async def unleased_rotation(self, session: str | None) -> None:
        raise NotImplementedError("hermes has no unleased rotation")


def _append_ignoring_error(db: Any, session: str, text: str) -> None:
    """The other writer's append; a failure is its own (recorded as append.failed by the hook), not the run's."""
    try:
        db.append_message(session, "user", text)
    except Exception:
        pass
