"""Invariants of compressor state: stale attempts write nothing; refusals feed the breaker."""

from __future__ import annotations

from sim.history import HistoryEvent
from sim.invariants.base import Invariant, Violation, attempt_of_holder

GIVEN_UP = ("fence.cancel_won", "host.timeout")


class StaleAttemptWritesNoState(Invariant):
    name = "stale_attempt_writes_no_state"
    races = ("R2", "R21")
    description = (
        "An attempt its host gave up on never clears the cooldown; a superseded attempt (a newer attempt of its "
        "compressor has taken the lease) never restores compressor state."
    )

    def __init__(self, system) -> None:
        super().__init__(system)
        self._given_up: dict[str, HistoryEvent] = {}
        self._generation: dict[str, int] = {}  # attempt -> its claimed generation
        self._owners: dict[str, tuple[int, HistoryEvent]] = {}  # process -> newest generation that took the lease

    def on_event(self, event: HistoryEvent) -> Violation | None:
        kind, attempt = event.kind, event.fields.get("attempt")
        if kind in GIVEN_UP:
            self._given_up.setdefault(attempt, event)
        elif kind == "cooldown.cleared" and attempt in self._given_up:
            return self.violation(f"attempt {attempt} cleared the cooldown after its host gave up on it", self._given_up[attempt], event)
        elif kind == "attempt.claimed":
            self._generation[attempt] = event.fields["generation"]
        elif kind == "lease.acquired":
            # A claim supersedes only once its attempt owns the lease: a loser that sat out owned nothing (#198 F1).
            owner = attempt_of_holder(event.fields["holder"])
            if owner in self._generation:
                process = owner.rsplit(".", 1)[0]
                if self._generation[owner] > self._owners.get(process, (0, event))[0]:
                    self._owners[process] = (self._generation[owner], event)
        elif kind == "attempt.restored":
            newest = self._owners.get(attempt.rsplit(".", 1)[0])
            if newest is not None and newest[0] > event.fields["generation"]:
                return self.violation(
                    f"attempt {attempt} (generation {event.fields['generation']}) restored compressor state over "
                    f"generation {newest[0]}, which had taken the lease", newest[1], event,
                )
        return None


class WouldGrowLatchesBreaker(Invariant):
    name = "would_grow_latches_breaker"
    races = ("R13",)
    description = "A committed compaction never grows the transcript, and at most two would-grow refusals happen in a row before the breaker blocks."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._streak: dict[str, list[HistoryEvent]] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "compaction.committed":
            self._streak.pop(fields["session"], None)
            before, after = fields.get("tokens_before"), fields.get("tokens")
            if before is not None and after is not None and after > before:
                return self.violation(f"attempt {fields['attempt']} committed {after} tokens over {before}", event)
        elif event.kind == "compaction.refused" and fields.get("reason") == "would_grow":
            streak = self._streak.setdefault(fields["session"], [])
            streak.append(event)
            if len(streak) > 2:
                return self.violation(f"{len(streak)} would-grow refusals in a row on {fields['session']}: the breaker never latched", *streak)
        return None


# Events by which an attempt writes a session's cooldown row (or its breaker counters).
COOLDOWN_WRITES = ("cooldown.set", "cooldown.cleared", "cooldown.restored", "compaction.strike", "compaction.committed")
# Why a hard-cancelled attempt's rollback is not judged: it committed, or its host had already timed it out
# (another attempt writing the row, or the rollback failing, are judged below). A newer claim on the
# compressor is no excuse by itself: only what that claim observably wrote is (#198 F1); nor is a host
# timeout after the user's stop: a stop is not a timeout, and must leave no timeout cooldown behind.
ROLLBACK_EXCUSED = ("fence.begin_ok",)


class HardCancelRestoresCooldown(Invariant):
    name = "hard_cancel_restores_cooldown"
    races = ("R1",)
    description = "A hard-cancelled attempt that never began a commit leaves its session's cooldown row exactly as it found it."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._found: dict[str, tuple[str, object, HistoryEvent]] = {}
        self._hard: dict[str, HistoryEvent] = {}
        self._excused: set[str] = set()

    def on_event(self, event: HistoryEvent) -> Violation | None:
        kind, fields = event.kind, event.fields
        attempt = fields.get("attempt")
        if kind == "lease.acquired":
            attempt = attempt_of_holder(fields["holder"])
            self._found[attempt] = (fields["session"], self.system.store.cooldown_row(fields["session"]), event)
            self._hard.pop(attempt, None)
            self._excused.discard(attempt)
        elif kind == "fence.cancel_won" and fields.get("hard"):
            self._hard.setdefault(attempt, event)
        elif kind in ROLLBACK_EXCUSED or (kind == "host.timeout" and attempt not in self._hard):
            self._excused.add(attempt)
        elif kind in COOLDOWN_WRITES:
            # another attempt wrote the row meanwhile: the rollback restores what its attempt read, not this
            self._excused.update(a for a, (session, _, _) in self._found.items() if session == fields.get("session") and a != attempt)
        elif kind == "compaction.finished" and attempt in self._found:
            session, before, acquired = self._found.pop(attempt)
            hard = self._hard.pop(attempt, None)
            if hard is None or attempt in self._excused or fields.get("status") == "error":
                return None
            after = self.system.store.cooldown_row(session)
            if after != before:
                return self.violation(
                    f"attempt {attempt} was hard-cancelled before its commit but left {session}'s cooldown row as {after}, "
                    f"not as it found it ({before})", acquired, hard, event,
                )
        return None


class CooldownNeverShortened(Invariant):
    name = "cooldown_never_shortened"
    races = ("R2",)
    description = "Recording a failure cooldown never moves the session's durable deadline earlier; only a clear or a rollback may."

    # Injected failures around these writes may change the row without their event: forget what was recorded.
    UNSEEN_WRITES = ("clear_cooldown", "restore_cooldown_row")

    def __init__(self, system) -> None:
        super().__init__(system)
        self._deadline: dict[str, tuple[float, HistoryEvent]] = {}

    def on_event(self, event: HistoryEvent) -> Violation | None:
        kind, fields = event.kind, event.fields
        if kind in ("cooldown.cleared", "cooldown.restored"):
            self._deadline.pop(fields["session"], None)
        elif kind == "fault.fired" and fields.get("op") in self.UNSEEN_WRITES:
            self._deadline.clear()
        elif kind == "cooldown.set":
            session = fields["session"]
            stored = self.system.store.cooldown_row(session).until
            before = self._deadline.get(session)
            if before is not None and (stored is None or stored < before[0] - 1e-9):
                return self.violation(
                    f"attempt {fields['attempt']} recorded a cooldown until {fields['until']:g}s and {session}'s deadline moved "
                    f"from {before[0]:g}s back to {stored if stored is None else format(stored, 'g')}", before[1], event,
                )
            latest = max(fields["until"], stored if stored is not None else fields["until"])
            if before is None or latest > before[0]:
                self._deadline[session] = (latest, event)
        return None


class NoSummaryInsideCooldown(Invariant):
    name = "no_summary_inside_cooldown"
    races = ("R2", "R13")
    description = (
        "An attempt starts its summary only while its session's durable failure cooldown is not live: an automatic "
        "attempt is held off by it, a forced one clears it first (also when another agent or process recorded it). "
        "The one exception is the recovery of a provider-proven context overflow, which bypasses the cooldown (R23)."
    )

    def __init__(self, system) -> None:
        super().__init__(system)
        self._session_of: dict[str, str] = {}  # attempt -> the session whose lease it took
        self._recorded: dict[str, HistoryEvent] = {}  # session -> its latest cooldown.set
        self._overflow_recoveries: set[str] = set()  # attempts the host started to recover an overflow

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "host.started" and fields["mode"] == "overflow":
            self._overflow_recoveries.add(fields["attempt"])
        elif event.kind == "lease.acquired":
            self._session_of[attempt_of_holder(fields["holder"])] = fields["session"]
        elif event.kind == "cooldown.set":
            self._recorded[fields["session"]] = event
        elif event.kind == "compaction.summary_started" and fields["attempt"] in self._session_of \
                and fields["attempt"] not in self._overflow_recoveries:
            session = self._session_of[fields["attempt"]]
            until = self.system.store.cooldown_row(session).until
            if until is not None and until > event.time:
                return self.violation(
                    f"attempt {fields['attempt']} started its summary on {session} inside a failure cooldown that "
                    f"lasts until {until:g}s", self._recorded.get(session), event,
                )
        return None


# How a host stops an attempt: from then on the attempt's cancelled-check rightly answers "cancelled".
STOPPED = ("fence.cancel_won", "fence.revoked", "host.timeout", "host.unwind")


class CurrentAttemptOwnsCompressor(Invariant):
    name = "current_attempt_owns_compressor"
    races = ("R21",)
    description = (
        "Only the compressor's current working attempt has its candidate admitted to commit, and that attempt, "
        "while not stopped, is never refused its own success-path cooldown clear (no other attempt removed its cancelled-check)."
    )

    def __init__(self, system) -> None:
        super().__init__(system)
        self._generation: dict[str, int] = {}  # attempt -> its claimed generation
        self._working: dict[str, tuple[int, HistoryEvent]] = {}  # process -> newest generation that started its summary
        self._stopped: set[str] = set()

    def on_event(self, event: HistoryEvent) -> Violation | None:
        kind, fields = event.kind, event.fields
        attempt = fields.get("attempt")
        if kind == "attempt.claimed":
            self._generation[attempt] = fields["generation"]
        elif kind == "compaction.summary_started":
            process = attempt.rsplit(".", 1)[0]
            if fields["generation"] > self._working.get(process, (0, event))[0]:
                self._working[process] = (fields["generation"], event)
        elif kind in STOPPED:
            self._stopped.add(attempt)
        elif kind == "process.crashed":
            # a restarted process has a new compressor and numbers its attempts from 1 again
            process = fields["process"]
            self._working.pop(process, None)
            self._generation = {a: g for a, g in self._generation.items() if a.rsplit(".", 1)[0] != process}
            self._stopped = {a for a in self._stopped if a.rsplit(".", 1)[0] != process}
        elif kind == "fence.begin_ok":
            newer = self._newer_working(attempt)
            if newer is not None:
                return self.violation(
                    f"attempt {attempt} (generation {self._generation[attempt]}) was admitted to commit its candidate after "
                    f"generation {newer.fields['generation']} ({newer.fields['attempt']}) had started its summary", newer, event,
                )
        elif kind == "cooldown.clear_skipped" and attempt not in self._stopped and attempt in self._generation:
            if self._newer_working(attempt) is None and self._single_agent(attempt):
                return self.violation(
                    f"attempt {attempt}, the compressor's current attempt and not stopped, was refused its cooldown clear: "
                    "its cancelled-check had been removed by another attempt", event,
                )
        return None

    def _newer_working(self, attempt: str) -> HistoryEvent | None:
        """The summary start of a newer generation of `attempt`'s compressor, if any."""
        process = attempt.rsplit(".", 1)[0]
        working = self._working.get(process)
        if working is None or attempt not in self._generation or not self._single_agent(attempt):
            return None
        return working[1] if working[0] > self._generation[attempt] else None

    def _single_agent(self, attempt: str) -> bool:
        """Generations count per agent, attempts per process: judge only processes that run one agent."""
        process = attempt.rsplit(".", 1)[0]
        agents = getattr(self.system, "agents", {})  # the system's agents by name (each slot has .spec.process)
        return sum(1 for slot in agents.values() if slot.spec.process == process) <= 1


class CommitBelowThresholdClearsStrikes(Invariant):
    name = "commit_below_threshold_clears_strikes"
    races = ("R13",)
    description = "A commit that ends below the threshold, by an attempt whose lease came after the session's last strike, leaves the ineffective count at 0."

    def __init__(self, system) -> None:
        super().__init__(system)
        self._acquired: dict[str, HistoryEvent] = {}  # attempt -> its lease.acquired
        self._last_strike: dict[str, HistoryEvent] = {}  # session -> its latest strike
        self._last_restore: dict[str, HistoryEvent] = {}  # session -> its latest cooldown-row restore
        self._reset_failed: set[str] = set()

    def on_event(self, event: HistoryEvent) -> Violation | None:
        fields = event.fields
        if event.kind == "lease.acquired":
            self._acquired[attempt_of_holder(fields["holder"])] = event
        elif event.kind == "compaction.strike":
            self._last_strike[fields["session"]] = event
        elif event.kind == "cooldown.restored":
            self._last_restore[fields["session"]] = event
        elif event.kind == "compaction.strike_reset_failed":
            self._reset_failed.add(fields["attempt"])
        elif event.kind == "compaction.committed":
            session, attempt = fields["session"], fields["attempt"]
            acquired, strike = self._acquired.get(attempt), self._last_strike.get(session)
            restore = self._last_restore.get(session)
            if (acquired is None or strike is None or strike.seq > acquired.seq or attempt in self._reset_failed
                    or (restore is not None and restore.seq > acquired.seq)
                    or fields["tokens"] >= self.system.config.threshold_tokens):
                return None
            count = self.system.store.cooldown_row(session).ineffective_count
            if count:
                return self.violation(
                    f"attempt {attempt} committed below the threshold after strike(s) yet the ineffective count is {count}",
                    strike, event,
                )
        return None
