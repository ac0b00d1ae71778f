"""RunFacts: the one model of a run that every invariant reads, kept up to date before any invariant sees an event.

Invariants judge; they should not each re-track what happened. Which attempt a task runs, where each attempt is
in its lifecycle (its host started, gave up or left; its commit admitted), which Ctrl+C a hard cancel answers,
each agent's latest turn, which processes died, and which commits the store shows took effect although nobody
said so: these are facts of the run, kept here once. An invariant reads them as `self.facts` and keeps only what
is its own to judge.

Crash amnesia is applied here, once: a crashed process's attempts run no more, and a restart numbers its
attempts from 1 again, so they are forgotten, in the facts and in every table an invariant keeps by attempt (an
`AttemptTable`, `AttemptSet` or `ProcessTable`), once every invariant has judged the crash (a check that judges the
crash still sees what the dead process had).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from contract.events import (
    AttemptClaimed,
    CommitArchived,
    CommitPublished,
    CompactionCommitFailed,
    CompactionFinished,
    CompactionWatermark,
    CompactionWatermarkFailed,
    Event,
    FenceBeginOk,
    FenceCancelWon,
    FenceRevoked,
    FrontendCtrlC,
    FrontendTurnSubmitted,
    HardCancelFinished,
    HardCancelRequested,
    HostReturned,
    HostStarted,
    HostTimeout,
    HostUnwind,
    LeaseAcquired,
    LeaseReleased,
    ProcessCrashed,
)
from contract.history import HistoryEvent
from contract.ids import AttemptId, HolderId, SessionId
from contract.vocabulary import GRACE_TASK, JOB_TASK, SUMMARY_TASK

if TYPE_CHECKING:
    from sim.invariants.invariant import SystemView


# Ways a host stops waiting for an attempt: from then on the attempt is a zombie to the host.
HostGaveUp = HostTimeout | FenceCancelWon | FenceRevoked | HostUnwind
HOST_GAVE_UP = (HostTimeout, FenceCancelWon, FenceRevoked, HostUnwind)


# The events each fact is learnt from. An invariant lists those of the facts it reads in its `learns`: they count
# among the events it reads, so a target that emits none of them gets it listed as not applicable, as if it had
# read them itself.
CRASHES = (ProcessCrashed,)  # crash amnesia, and which processes died
PRESSES = (FrontendCtrlC,)  # which agent's terminal a hard cancel answers
HARD_CANCELS = (HardCancelRequested, HardCancelFinished)
ADMISSIONS = (FenceBeginOk,)
HOST_WAITS = (HostStarted, HostReturned, HostUnwind)  # which hosts still wait, for which agent
TURNS = (FrontendTurnSubmitted,)
COMMITS = (CompactionWatermark, CompactionWatermarkFailed, AttemptClaimed, LeaseAcquired, LeaseReleased, CompactionFinished)


def job_attempt(task: str) -> AttemptId | None:
    """The attempt a pooled job's task runs, or None for any other task."""
    return AttemptId(task[len(JOB_TASK):]) if task.startswith(JOB_TASK) else None


def summary_attempt(task: str) -> AttemptId | None:
    """The attempt whose provider call a task runs, or None for any other task."""
    return AttemptId(task[len(SUMMARY_TASK):]) if task.startswith(SUMMARY_TASK) else None


def pressing_task(task: str) -> str:
    """The task that pressed the Ctrl+C whose grace `task` runs (a task that is no grace's is its own); a real run's
    log puts the process before every task name."""
    return task.replace(GRACE_TASK, "", 1)


@dataclass(slots=True)
class Attempt:
    """One compression attempt as the history has shown it, while its process lives."""

    id: AttemptId
    host: HistoryEvent[HostStarted] | None = None  # its host's start
    agent: str | None = None  # the agent whose user's task started it, if known
    given_up: HistoryEvent[HostGaveUp] | None = None  # the first time its host stopped waiting for it
    admitted: HistoryEvent[FenceBeginOk] | None = None  # its fence's first admission to commit


@dataclass(slots=True)
class HardCancel:
    """A Ctrl+C's hard cancel, from its request until it returns."""

    agent: str | None  # the agent whose terminal pressed it, if its press was seen
    request: HistoryEvent[HardCancelRequested]


K = TypeVar("K", bound=str)
V = TypeVar("V")


def _incarnation_of(key: str) -> str | None:
    """The process incarnation a table's key names: an attempt's, or the attempt's a lease holder id names."""
    if isinstance(key, HolderId):
        return None if key.attempt is None else key.attempt.process
    return AttemptId(key).process


class AttemptTable(dict[K, V]):
    """What an invariant keeps per attempt (or per lease holder, which names its attempt), cleared of a crashed
    process's attempts by the facts once the crash is judged (`RunFacts.settle`)."""

    def forget(self, dead: Callable[[str], bool]) -> None:
        """Drop the keys of the incarnations `dead` names."""
        for key in [key for key in self if (incarnation := _incarnation_of(key)) is not None and dead(incarnation)]:
            del self[key]


class AttemptSet(set[AttemptId]):
    """The attempts an invariant marks, cleared of a crashed process's attempts as an `AttemptTable` is."""

    def forget(self, dead: Callable[[str], bool]) -> None:
        self.difference_update([attempt for attempt in self if dead(attempt.process)])


class ProcessTable(dict[str, V]):
    """What an invariant keeps per process incarnation, cleared of a crashed process's incarnations."""

    def forget(self, dead: Callable[[str], bool]) -> None:
        for incarnation in [incarnation for incarnation in self if dead(incarnation)]:
            del self[incarnation]


class RunFacts:
    """The run as the history has shown it so far (see the module's docstring)."""

    def __init__(self, system: SystemView) -> None:
        self._system = system
        self.attempts: dict[AttemptId, Attempt] = {}
        self.waiting: dict[AttemptId, Attempt] = {}  # attempts whose host started and has neither returned nor unwound
        self.hard_cancels: dict[str, HardCancel] = {}  # pressing task -> its hard cancel, until it returns
        self._pressed_by: dict[str, str] = {}  # the task that pressed Ctrl+C -> its agent, until its hard cancel
        self.latest_turn: dict[str, str] = {}  # agent -> the task of its terminal's latest turn
        self._crashes: dict[tuple[int, str | None], HistoryEvent[ProcessCrashed]] = {}  # (pid, start) -> its crash
        self.commits = CommitEffects(system)

    def attempt(self, attempt: AttemptId | None) -> Attempt:
        """What is known of `attempt` (nothing yet: an empty record, not kept)."""
        known = self.attempts.get(attempt) if attempt is not None else None
        return known if known is not None else Attempt(AttemptId(attempt or ""))

    def _record(self, attempt: AttemptId) -> Attempt:
        known = self.attempts.get(attempt)
        if known is None:
            known = self.attempts[attempt] = Attempt(attempt)
        return known

    def learn(self, record: HistoryEvent[Event]) -> None:
        """Take in one event, before any invariant judges it."""
        for learn in _LEARNERS.get(type(record.event), ()):
            learn(self, record.event, record)

    def settle(self, record: HistoryEvent[Event], invariants: Iterable[object]) -> None:
        """Once every invariant has judged `record`: a crash's amnesia, here and in every table by attempt or by
        process incarnation the invariants hold."""
        if not isinstance(record.event, ProcessCrashed):
            return
        process = record.event.process

        def dead(incarnation: str) -> bool:
            return self._system.process_of(incarnation) == process

        self.attempts = {attempt: known for attempt, known in self.attempts.items() if not dead(attempt.process)}
        self.waiting = {attempt: known for attempt, known in self.waiting.items() if not dead(attempt.process)}
        for invariant in invariants:
            for table in vars(invariant).values():
                if isinstance(table, (AttemptTable, AttemptSet, ProcessTable)):
                    table.forget(dead)

    def crash_of(self, holder: HolderId) -> HistoryEvent[ProcessCrashed] | None:
        """The crash of the holder's process: same pid, and the same start where both name one.

        Dead processes come from the history (process.crashed), not from the system's own process table: a table
        that forgot a kill would otherwise blind a check to the very bug it is meant to catch. A later process
        on a recycled pid lives."""
        pid = holder.pid
        if pid is None:
            return None
        return self._crashes.get((pid, holder.fields.get("start"))) or self._crashes.get((pid, None))

    def _host_started(self, event: HostStarted, record: HistoryEvent[HostStarted]) -> None:
        attempt = self._record(event.attempt)
        attempt.host, attempt.agent = record, self._system.agent_of_task(record.task)
        self.waiting[event.attempt] = attempt

    def _host_returned(self, event: HostReturned, record: HistoryEvent[HostReturned]) -> None:
        self.waiting.pop(event.attempt, None)

    def _host_unwound(self, event: HostUnwind, record: HistoryEvent[HostUnwind]) -> None:
        self.waiting.pop(event.attempt, None)
        self._given_up(event, record)

    def _given_up(self, event: HostGaveUp, record: HistoryEvent[HostGaveUp]) -> None:
        attempt = self._record(event.attempt)
        attempt.given_up = attempt.given_up or record

    def _admitted(self, event: FenceBeginOk, record: HistoryEvent[FenceBeginOk]) -> None:
        attempt = self._record(event.attempt)
        attempt.admitted = attempt.admitted or record

    def _pressed(self, event: FrontendCtrlC, record: HistoryEvent[FrontendCtrlC]) -> None:
        self._pressed_by[record.task] = event.agent

    def _hard_cancel(self, event: HardCancelRequested, record: HistoryEvent[HardCancelRequested]) -> None:
        self.hard_cancels[record.task] = HardCancel(self._pressed_by.pop(record.task, None), record)

    def _hard_cancel_returned(self, event: HardCancelFinished, record: HistoryEvent[HardCancelFinished]) -> None:
        self.hard_cancels.pop(record.task, None)

    def _turn_submitted(self, event: FrontendTurnSubmitted, record: HistoryEvent[FrontendTurnSubmitted]) -> None:
        self.latest_turn[event.agent] = record.task

    def _crashed(self, event: ProcessCrashed, record: HistoryEvent[ProcessCrashed]) -> None:
        self._crashes.setdefault((event.pid, None if event.start is None else str(event.start)), record)


class CommitEffects:
    """Which commits took effect, told or not.

    A commit whose call raised is indeterminate, not failed: an error reported after COMMIT (a disk error on the
    way back) leaves the child published or the rows archived although the attempt never said so. Such a commit
    counts when the store shows it took effect at that moment: its session has a child minted by the attempt's
    holder, or an active summary row above the attempt's watermark.

    A process that dies right after a commit's COMMIT (a crash inside the transaction, after it) never says
    either way: no `commit.*` and no `compaction.commit_failed` is recorded. Its commit is judged the same way,
    at the crash, for every attempt of the dead incarnation that still held its lease and had neither finished
    nor been credited with a commit (`died_after_commit`).
    """

    def __init__(self, system: SystemView) -> None:
        self._system = system
        self._worker_of: dict[str, AttemptId] = {}  # the worker task -> its attempt
        self._holders: dict[AttemptId, str] = {}
        self._watermarks: dict[AttemptId, tuple[SessionId, int]] = {}
        self._unfinished: dict[AttemptId, SessionId] = {}  # attempts that took a lease, until they finish, commit or lose it
        self._lost: set[AttemptId] = set()  # attempts whose lease was released or won by another holder before they finished
        self.died_after_commit: list[tuple[SessionId, AttemptId]] = []  # at the latest crash

    def watermark(self, attempt: AttemptId, session: SessionId) -> int:
        """The watermark `attempt` captured on `session` (0: none captured there)."""
        captured = self._watermarks.get(attempt)
        return captured[1] if captured is not None and captured[0] == session else 0

    def took_effect(self, session: SessionId, attempt: AttemptId, record: HistoryEvent[Event]) -> bool:
        """Whether the store holds what this attempt's commit writes by the event `record`: a child it minted, or a
        summary above its watermark written by then.

        Never for an attempt that lost its lease first: its commit cannot take effect, and a summary above its
        watermark is the commit of the holder after it (a stalled attempt whose commit then failed, lease lost).
        A summary written after the event is another attempt's: a real run's store is its final state, which
        holds the commits of the processes that outlived this one."""
        if attempt in self._lost:
            return False
        holder = self._holders.get(attempt)
        if holder is not None:
            minted = "_" + session.minted_child(holder, 0).rsplit("_", 1)[1]  # the holder's digest, whatever the clock
            if any(child.id.endswith(minted) for child in self._system.store.children(session)):
                return True
        captured = self._watermarks.get(attempt)
        if captured is None or captured[0] != session:
            return False
        return any(row.is_summary and row.id > captured[1] and row.timestamp <= record.time
                   for row in self._system.store.active_messages(session))

    def _watermark(self, event: CompactionWatermark | CompactionWatermarkFailed, record: HistoryEvent[Event]) -> None:
        # not captured: the attempt still knew of no row appended after this moment
        watermark = event.watermark if isinstance(event, CompactionWatermark) else None
        self._watermarks[event.attempt] = (event.session, self._system.store.active_watermark(event.session) if watermark is None else watermark)

    def _claimed(self, event: AttemptClaimed, record: HistoryEvent[AttemptClaimed]) -> None:
        self._worker_of[record.task] = event.attempt

    def _leased(self, event: LeaseAcquired, record: HistoryEvent[LeaseAcquired]) -> None:
        self._lost_lease(event.session, lambda holder: holder != event.holder)  # a lease has one holder at a time
        if record.task in self._worker_of:
            attempt = self._worker_of[record.task]
            self._holders[attempt] = event.holder
            self._unfinished[attempt] = event.session

    def _released(self, event: LeaseReleased, record: HistoryEvent[LeaseReleased]) -> None:
        if event.held:
            self._lost_lease(event.session, lambda holder: holder == event.holder)

    def _lost_lease(self, session: SessionId, lost: Callable[[str], bool]) -> None:
        """Forget the unfinished attempts on `session` whose holder `lost` the lease (released, or another
        holder won it): a commit needs its holder's lease, so such an attempt commits no more, and a summary
        that shows up above its watermark later is another attempt's (a timed-out late worker was credited at
        its process's crash with the commit of the /compress that ran after it)."""
        gone = {attempt for attempt, at in self._unfinished.items() if at == session and lost(self._holders[attempt])}
        self._lost |= gone
        self._unfinished = {attempt: at for attempt, at in self._unfinished.items() if attempt not in gone}

    def _finished(self, event: CompactionFinished, record: HistoryEvent[CompactionFinished]) -> None:
        self._unfinished.pop(event.attempt, None)

    def _committed(self, event: CommitArchived | CommitPublished, record: HistoryEvent[Event]) -> None:
        """A commit is credited once: a process that dies after the attempt said it committed (a crash inside its
        lease release) must not have that commit credited again at the crash."""
        self._unfinished.pop(event.attempt, None)

    def _commit_failed(self, event: CompactionCommitFailed, record: HistoryEvent[CompactionCommitFailed]) -> None:
        if self.took_effect(event.session, event.attempt, record):
            self._unfinished.pop(event.attempt, None)

    def _crashed(self, event: ProcessCrashed, record: HistoryEvent[ProcessCrashed]) -> None:
        """The unfinished attempts, now of a dead holder, whose commit the store shows took effect."""
        died = [(session, attempt) for attempt, session in self._unfinished.items() if self._system.holder_is_dead(self._holders[attempt])]
        for _, attempt in died:
            del self._unfinished[attempt]
        self.died_after_commit = [(session, attempt) for session, attempt in died if self.took_effect(session, attempt, record)]


Learner = Callable[[RunFacts, Any, Any], None]  # takes in one event (and its record) of the class it is filed under


def _of_commits(learn: Callable[[CommitEffects, Any, Any], None]) -> Learner:
    return lambda facts, event, record: learn(facts.commits, event, record)


# What each event class teaches the facts, in order (worked out once: a run builds a RunFacts per invariant).
_LEARNERS: dict[type[Event], tuple[Learner, ...]] = {
    HostStarted: (RunFacts._host_started,), HostReturned: (RunFacts._host_returned,), HostUnwind: (RunFacts._host_unwound,),
    HostTimeout: (RunFacts._given_up,), FenceCancelWon: (RunFacts._given_up,), FenceRevoked: (RunFacts._given_up,),
    FenceBeginOk: (RunFacts._admitted,), FrontendCtrlC: (RunFacts._pressed,), HardCancelRequested: (RunFacts._hard_cancel,),
    HardCancelFinished: (RunFacts._hard_cancel_returned,), FrontendTurnSubmitted: (RunFacts._turn_submitted,),
    ProcessCrashed: (RunFacts._crashed, _of_commits(CommitEffects._crashed)),
    CompactionWatermark: (_of_commits(CommitEffects._watermark),), CompactionWatermarkFailed: (_of_commits(CommitEffects._watermark),),
    AttemptClaimed: (_of_commits(CommitEffects._claimed),), LeaseAcquired: (_of_commits(CommitEffects._leased),),
    LeaseReleased: (_of_commits(CommitEffects._released),), CompactionFinished: (_of_commits(CommitEffects._finished),),
    CommitArchived: (_of_commits(CommitEffects._committed),), CommitPublished: (_of_commits(CommitEffects._committed),),
    CompactionCommitFailed: (_of_commits(CommitEffects._commit_failed),),
}
