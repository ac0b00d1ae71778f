"""Which race of hermes-compaction.md a failing run on a hermes release shows, and the swarm's first find of each.

A failure is a race when the invariant it broke judges that race (`Invariant.races`) AND the run's events show
the race's mechanism: an invariant names the harm (a message lost, two continuations), the mechanism says how
it came about, and several races share a harm. The rules, one mechanism per race:

| race | the mechanism in the run's events |
|---|---|
| R1 | a turn abandoned after Ctrl+C's grace (`frontend.turn_abandoned`) while its agent's compaction held the lease |
| R10 | a duplicate (`no_duplicate_persisted_turn`) the compacting turn wrote into its session while the attempt ran, or into the child after |
| R11 | an attempt that did not commit (`compaction.finished`, status `failed`, `error` or `unchanged`) |
| R12 | the duplicated or misplaced row's session had an in-place commit fail (`compaction.commit_failed`) before it |
| R14 | a commit on the lost row's session, after its append, retired it without holding it in its input (`_swept_by_commit`) |
| R17 | a rotation (`commit.published`): it carries the title |
| R19 | two attempts rotated one parent, the later one acquiring its lease after the earlier one had released it |
| R20 | `no_orphan_parent` itself (it reads the orphan in the store); or `commit_keeps_a_user_turn` on a child no append reached before a crash |
| R23 | a turn's overflow recovery (`turn.context_overflow`, then an attempt on its task) changed nothing for a transient cause |
| R24 | a process crashed while one of its attempts held a lease |
| R25 | an attempt acquired a lease a live attempt still held (it lapsed on the virtual clock), a commit without it, or a refresh after its attempt ended |

A transient cause (R23) is any but one that proves compression cannot shrink the context (`EXHAUSTED`): a cooldown,
a failed summary, a held lease.

Three findings are hermes's own, harms the reference's invariants judge that no race of hermes-compaction.md names
(`ALSO_JUDGES`; H1 has a scripted scenario in `scenarios/hermes/`):

| finding | invariant | the mechanism in the run's events |
|---|---|---|
| H1 | `abandoned_turn_stays_silent` | a turn abandoned after Ctrl+C's grace while no compaction of its agent held a lease |
| H2 | `completed_turn_persists_user_message` | an append of the turn's failed before its reply (the flush logs it; the turn goes on) |
| H3 | `completed_turn_persists_user_message` | the turn wrote no user row before its reply, and no append of it failed |

H1: an abandoned turn stalled outside compaction (a store write) writes after its grace; nothing stops its thread.
H3: a question merged into an unanswered one already written (`repair_message_sequence` rewrites that message in
memory; the flush skips it as persisted) is never stored. R20's second form: 0.16.0-0.18.2 write a child's handoff
at the next flush, so a process that dies before it leaves the live child empty.

`first_finds` runs a swarm campaign on the loaded release exactly as `python -m sim swarm` does (run `i` is
`run_generated(workloads, root_seed, i)`) and notes the first run that shows each race.
`python -m targets.hermes races VERSION` prints them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from contract.events import (
    AppendFailed,
    AppendOk,
    CommitArchived,
    CommitPublished,
    CompactionCommitFailed,
    CompactionFinished,
    CompactionInput,
    FrontendTurnAbandoned,
    LeaseAcquired,
    LeaseRefreshed,
    LeaseReleased,
    ProcessCrashed,
    TurnContextOverflow,
    TurnPersisted,
)
from contract.events.base import Event
from contract.history import HistoryEvent
from contract.ids import HolderId
from sim.core.heap import freeze_long_lived
from sim.core.search import search
from sim.invariants import INVARIANTS, Violation
from sim.invariants.overflow import EXHAUSTED
from sim.scenario import targets
from sim.scenario.runner import RunReport
from sim.swarm.generated_runs import run_generated
from sim.swarm.workload_model import Workload

NOT_COMMITTED = ("failed", "error", "unchanged")
# The races each release is shown failing by a scripted scenario (SEAMS.md, "The races as scenarios").
SCRIPTED_FAILING = {
    "0.16.0": ("R1", "R14", "R17", "R19", "R20", "R23", "R24", "R25"),
    "0.17.0": ("R1", "R10", "R11", "R14", "R17", "R19", "R20", "R23", "R24", "R25"),
    "0.18.2": ("R1", "R10", "R11", "R12", "R14", "R17", "R19", "R20", "R23", "R24", "R25"),
    "0.19.0": ("R1", "R10", "R11", "R12", "R14", "R17", "R20", "R23", "R24", "R25"),
}
# The races and hermes's own findings (the module docstring) an invariant's harm shows on hermes beyond its own races.
ALSO_JUDGES = {"abandoned_turn_stays_silent": ("H1",), "completed_turn_persists_user_message": ("H2", "H3"),
               "commit_keeps_a_user_turn": ("R20",)}


@dataclass
class Run:
    """What the rules read of one run: its history, folded once into the facts they ask about."""

    history: Sequence[HistoryEvent]
    held: dict[str, set[HolderId]] = field(default_factory=dict)  # session -> holders now (during the fold)
    crashed: set[str] = field(default_factory=set)
    abandoned_holding: bool = False  # R1
    abandoned_unleased: bool = False  # H1
    crashed_holding: bool = False  # R24
    overlapping: set[str] = field(default_factory=set)  # attempts that acquired a lease a live attempt held (R25)
    acquired_at: dict[tuple[str, str], int] = field(default_factory=dict)  # (attempt, session) -> seq
    released_at: dict[tuple[str, str], int] = field(default_factory=dict)
    inputs: dict[str, tuple[str, int, frozenset[int]]] = field(default_factory=dict)  # attempt -> (session, seq, rows) of its input
    commits: list[tuple[str, int, frozenset[int]]] = field(default_factory=list)  # (session, commit seq, input rows) per commit
    publishers: dict[str, list[str]] = field(default_factory=dict)  # parent -> attempts that rotated it, in order
    rotating: list[tuple[str, str, int, int]] = field(default_factory=list)  # (its task, parent, input seq, publish seq)
    ran: list[tuple[str, str, int, int]] = field(default_factory=list)  # (its task, session, input seq, end seq) per attempt
    children: dict[str, int] = field(default_factory=dict)  # child session -> seq of its commit.published
    failed_in_place: dict[str, int] = field(default_factory=dict)  # session -> seq of its first failed commit
    not_committed: bool = False  # R11
    overflowed: set[str] = field(default_factory=set)  # tasks whose turn overflowed, until their recovery's attempt ends
    transient_recovery: bool = False  # R23
    finished: set[str] = field(default_factory=set)
    refreshed_after_end: bool = False  # R25: a refresher that outlived its attempt
    failed_appends: list[tuple[str, int]] = field(default_factory=list)  # (task, seq) of each failed append (H2)
    written: dict[str, int] = field(default_factory=dict)  # session -> seq of its first append
    crashes: list[int] = field(default_factory=list)  # seq of each process crash

    @classmethod
    def of(cls, history: Sequence[HistoryEvent]) -> Run:
        run = cls(history)
        for record in history:
            run._fold(record)
        return run

    def _fold(self, record: HistoryEvent) -> None:
        fold = FOLDS.get(type(record.event))
        if fold is not None:
            fold(self, record.event, record)

    def _lease_acquired(self, event: LeaseAcquired, record: HistoryEvent) -> None:
        holders = self.held.setdefault(str(event.session), set())
        if any(_process(other) not in self.crashed and other.attempt != event.holder.attempt for other in holders):
            self.overlapping.add(str(event.holder.attempt))
        holders.add(event.holder)
        self._note(self.acquired_at, event.holder, str(event.session), record.seq)

    def _lease_refreshed(self, event: LeaseRefreshed, record: HistoryEvent) -> None:
        self.refreshed_after_end |= str(event.holder.attempt) in self.finished

    def _lease_released(self, event: LeaseReleased, record: HistoryEvent) -> None:
        self.held.get(str(event.session), set()).discard(event.holder)
        self._note(self.released_at, event.holder, str(event.session), record.seq)

    def _crashed(self, event: ProcessCrashed, record: HistoryEvent) -> None:
        self.crashed.add(event.process)
        self.crashes.append(record.seq)
        self.crashed_holding |= any(_process(holder) == event.process for holder in self._holders())

    def _abandoned(self, event: FrontendTurnAbandoned, record: HistoryEvent) -> None:
        holding = any(holder.fields.get("agent") == event.agent for holder in self._holders())
        self.abandoned_holding |= holding
        self.abandoned_unleased |= not holding

    def _input(self, event: CompactionInput, record: HistoryEvent) -> None:
        self.inputs[str(event.attempt)] = (str(event.session), record.seq, frozenset(event.rows))

    def _archived(self, event: CommitArchived, record: HistoryEvent) -> None:
        self._committed(str(event.attempt), str(event.session), record.seq)

    def _published(self, event: CommitPublished, record: HistoryEvent) -> None:
        attempt, parent = str(event.attempt), str(event.parent)
        self._committed(attempt, parent, record.seq)
        self.publishers.setdefault(parent, []).append(attempt)
        took = self.inputs.get(attempt)
        if took is not None:
            self.rotating.append((record.task, parent, took[1], record.seq))
        self.children.setdefault(str(event.child), record.seq)

    def _appended(self, event: AppendOk, record: HistoryEvent) -> None:
        self.written.setdefault(str(event.session), record.seq)

    def _append_failed(self, event: AppendFailed, record: HistoryEvent) -> None:
        self.failed_appends.append((record.task, record.seq))

    def _commit_failed(self, event: CompactionCommitFailed, record: HistoryEvent) -> None:
        self.failed_in_place.setdefault(str(event.session), record.seq)

    def _finished(self, event: CompactionFinished, record: HistoryEvent) -> None:
        self.not_committed |= event.status in NOT_COMMITTED
        self.finished.add(str(event.attempt))
        took = self.inputs.get(str(event.attempt))
        if took is not None:
            self.ran.append((record.task, took[0], took[1], record.seq))
        if record.task in self.overflowed:
            self.overflowed.discard(record.task)
            self.transient_recovery |= event.status == "unchanged" and event.reason not in EXHAUSTED

    def _overflow(self, event: TurnContextOverflow, record: HistoryEvent) -> None:
        self.overflowed.add(record.task)

    def _holders(self) -> Iterator[HolderId]:
        return (holder for holders in self.held.values() for holder in holders)

    @staticmethod
    def _note(table: dict[tuple[str, str], int], holder: HolderId, session: str, seq: int) -> None:
        if holder.attempt is not None:
            table.setdefault((str(holder.attempt), session), seq)

    def _committed(self, attempt: str, session: str, seq: int) -> None:
        took = self.inputs.get(attempt)
        if took is not None and took[0] == session:
            self.commits.append((session, seq, took[2]))

    def rotated_after_release(self) -> bool:
        """R19: a parent rotated twice, the later attempt's acquire after the earlier one's release."""
        for parent, attempts in self.publishers.items():
            for earlier, later in zip(attempts, attempts[1:]):
                released = self.released_at.get((earlier, parent))
                acquired = self.acquired_at.get((later, parent))
                if later != earlier and released is not None and acquired is not None and released < acquired:
                    return True
        return False

    def lapsed(self) -> bool:
        """R25: a second attempt held a lease its live holder still held."""
        return bool(self.overlapping)

    def witness_append(self, violation: Violation) -> Append | None:
        """The violation's last witnessing append, if it has one."""
        for seq in reversed(violation.witnesses):
            event = self.history[seq].event if 0 <= seq < len(self.history) else None
            if isinstance(event, TurnPersisted):
                return Append(str(event.session), seq, self.history[seq].task, event.row)
            if isinstance(event, AppendOk):
                return Append(str(event.session), seq, self.history[seq].task, event.ids[-1] if event.ids else None)
        return None

    def failed_append_within(self, violation: Violation) -> bool:
        """H2: the violation's turn (its first witness, by its task) had an append fail before its last witness."""
        task, turn, reply = self._turn_of(violation)
        return any(failed_task == task and turn < seq < reply for failed_task, seq in self.failed_appends)

    def no_question_written(self, violation: Violation) -> bool:
        """H3: the violation's turn persisted no user row before its reply, and no append of it failed."""
        task, turn, reply = self._turn_of(violation)
        written = any(isinstance(record.event, TurnPersisted) and record.event.role == "user" and record.task == task
                      for record in self.history[turn + 1:reply])
        return task != "" and not written and not self.failed_append_within(violation)

    def handoff_never_written(self, violation: Violation) -> bool:
        """R20: the violation's rotation (its witness) made a child no append reached before a process crashed."""
        published = [self.history[seq] for seq in violation.witnesses
                     if 0 <= seq < len(self.history) and isinstance(self.history[seq].event, CommitPublished)]
        return any(published[0].seq < crash < self.written.get(str(published[0].event.child), len(self.history))
                   for crash in self.crashes) if published else False

    def _turn_of(self, violation: Violation) -> tuple[str, int, int]:
        """A turn's violation: its task, its submission's seq (the first witness), its reply's (the last); no task
        for a violation that names no turn."""
        if len(violation.witnesses) < 2 or not 0 <= violation.witnesses[0] <= violation.witnesses[-1] < len(self.history):
            return "", 0, 0
        return self.history[violation.witnesses[0]].task, violation.witnesses[0], violation.witnesses[-1]


@dataclass(frozen=True)
class Append:
    """A row a violation names: where it was appended, when, by which task, its id."""

    session: str
    seq: int
    task: str
    row: int | None


FOLDS: dict[type[Event], Callable[[Run, Any, HistoryEvent], None]] = {
    LeaseAcquired: Run._lease_acquired, LeaseRefreshed: Run._lease_refreshed, LeaseReleased: Run._lease_released,
    ProcessCrashed: Run._crashed, FrontendTurnAbandoned: Run._abandoned, CompactionInput: Run._input,
    CommitArchived: Run._archived, CommitPublished: Run._published, CompactionCommitFailed: Run._commit_failed,
    CompactionFinished: Run._finished, TurnContextOverflow: Run._overflow, AppendFailed: Run._append_failed,
    AppendOk: Run._appended,
}


def _process(holder: HolderId) -> str:
    return holder.fields.get("proc", "")


def _written_by_rotation(run: Run, violation: Violation) -> bool:
    """R10: a row duplicated by the turn that compacted, into its session while the attempt ran (0.19.0 flushes the
    turn there before ending it; a rotation whose child cannot be made reopens it, duplicates and all) or into the
    rotation's child after (the end-of-turn flush). Only a duplicate: a row lost in a rotation is R14's harm, or no
    race's."""
    append = run.witness_append(violation)
    if append is None or violation.invariant != "no_duplicate_persisted_turn":
        return False
    into_session = any(task == append.task and session == append.session and began < append.seq < ended
                       for task, session, began, ended in (*run.ran, *run.rotating))  # a rotation may never end
    return into_session or any(task == append.task and run.children.get(append.session) == published < append.seq
                               for task, _, _, published in run.rotating)


def _swept_by_commit(run: Run, violation: Violation) -> bool:
    """R14: a commit on the lost row's session, after the row was appended, retired it without holding it in its
    input: the row came while the summary ran (the input was taken before it), or before it from another process
    (hermes's input is its agent's messages in memory, which never held a row another process wrote)."""
    append = run.witness_append(violation)
    return append is not None and any(session == append.session and append.seq < committed and append.row not in rows
                                      for session, committed, rows in run.commits)


def _after_failed_commit(run: Run, violation: Violation) -> bool:
    append = run.witness_append(violation)
    if append is None:  # judged at the end: a failed commit anywhere before it
        return bool(run.failed_in_place)
    return run.failed_in_place.get(append.session, len(run.history)) < append.seq


MECHANISMS: dict[str, Callable[[Run, Violation], bool]] = {
    "R1": lambda run, violation: run.abandoned_holding,
    "R10": _written_by_rotation,
    "R11": lambda run, violation: run.not_committed,
    "R12": _after_failed_commit,
    "R14": _swept_by_commit,
    "R17": lambda run, violation: bool(run.publishers),
    "R19": lambda run, violation: run.rotated_after_release(),
    "R20": lambda run, violation: violation.invariant == "no_orphan_parent" or run.handoff_never_written(violation),
    "R23": lambda run, violation: run.transient_recovery,
    "R24": lambda run, violation: run.crashed_holding,
    "R25": lambda run, violation: violation.invariant == "commit_holds_lease" or run.lapsed() or run.refreshed_after_end,
    "H1": lambda run, violation: run.abandoned_unleased,
    "H2": lambda run, violation: run.failed_append_within(violation),
    "H3": lambda run, violation: run.no_question_written(violation),
}


def races_of(report: RunReport) -> tuple[str, ...]:
    """The races a run's violations show, then hermes's own findings (sorted; empty for a run that held, or failed
    otherwise)."""
    if not report.violations:
        return ()
    run = Run.of(report.result.history)
    found = set()
    for violation in report.violations:
        invariant = INVARIANTS.get(violation.invariant)
        for race in (*getattr(invariant, "races", ()), *ALSO_JUDGES.get(violation.invariant, ())):
            mechanism = MECHANISMS.get(race)
            if mechanism is not None and mechanism(run, violation):
                found.add(race)
    return tuple(sorted(found, key=lambda race: (race[0] != "R", race[0], int(race[1:]))))


@dataclass
class Hunt:
    """A campaign's first find of each race: race -> run index, and how many runs it took."""

    first: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    failing: int = 0
    unclassified: dict[str, int] = field(default_factory=dict)  # a failing run that showed no race: invariant -> first run
    unclassified_runs: int = 0


def first_finds(workloads: Sequence[Workload], root_seed: int, runs: Iterable[int], wanted: frozenset[str] = frozenset(),
                on_find: Callable[[str, int], None] | None = None) -> Hunt:
    """Run the campaign's runs in order (one batch, through the one search loop) until every race in
    `wanted` was seen (all given runs if `wanted` is empty); the first run index of each race."""
    hunt = Hunt()

    def heard(index: int, report: RunReport) -> None:
        hunt.runs += 1
        hunt.failing += report.failed
        races = races_of(report)
        if report.failed and not races:
            hunt.unclassified.setdefault(report.violations[0].invariant, index)
            hunt.unclassified_runs += 1
        for race in races:
            if race not in hunt.first:
                hunt.first[race] = index
                if on_find is not None:
                    on_find(race, index)

    freeze_long_lived()
    search(runs, lambda index: (index, run_generated(workloads, root_seed, index)), batch=targets.batch(workloads[0]),
           on_run=lambda found: heard(*found), until=lambda _: bool(wanted) and wanted <= hunt.first.keys())
    return hunt


def describe(hunt: Hunt, wanted: Iterable[str]) -> dict[str, Any]:
    """The hunt as a document: each wanted race's first run (or None), then the others found."""
    wanted = list(wanted)
    return {"runs": hunt.runs, "failing_runs": hunt.failing,
            "first_run": {race: hunt.first.get(race) for race in wanted},
            "also_found": {race: index for race, index in hunt.first.items() if race not in wanted},
            "unclassified": hunt.unclassified, "unclassified_runs": hunt.unclassified_runs}
