"""The simulator's invariants over a real run: the merged history and the database the processes left.

Not every invariant can judge a real run. Those that can are listed in `REAL_INVARIANTS`, split by what
they read: the history alone (merged logs in commit order), or the final database (checked once, at the
end). `NOT_APPLICABLE` names every other invariant with the reason it cannot, so the choice is visible
and a new invariant is placed on purpose (a test keeps the three sets a partition of INVARIANTS).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract.events import LeaseAcquired, LeaseContended, StressLeasePlanted
from contract.history import HistoryEvent
from contract.ids import HolderId
from reference.config import CompactionConfig
from reference.store import SessionStore
from reference.stress_worker import GRACE_S
from sim.invariants import INVARIANTS, Violation
from sim.invariants.invariant import event_of
from sim.stress.log import DEATHS, MergedHistory

# Judged event by event over the merged history (plus, for some, the final database at the end).
HISTORY_INVARIANTS = (
    "no_commit_after_cancel", "lease_held_across_commit", "cancel_never_beats_admitted_commit",
    "lease_mutual_exclusion", "refresh_extends_own_row", "summary_starts_under_lease",
    "cancelled_attempt_never_acquires", "appends_never_refused_by_lease", "lease_released_within_ttl",
    "caller_session_follows_rotation", "caller_transcript_only_through_commit", "no_progress_after_give_up",
    "refresher_tolerates_blips", "turn_fails_only_expectedly", "worker_raises_only_after_fault",
    "acknowledged_appends_survive", "completed_turn_persists_user_message", "would_grow_latches_breaker",
    "retry_never_overlaps_live_worker", "aborted_attempt_leaves_parent_unchanged", "no_false_auto_reset",
    "overflow_recovery_ignores_cooldown", "timeout_backs_off", "no_relabel_after_terminal",
    "running_summary_labelled", "ctrl_c_sees_idle_prompt", "abandoned_turn_stays_silent", "caught_errors_are_not_bugs",
    "ctrl_c_abandons_only_the_pressed_turn", "ctrl_c_stops_the_turns_later_compactions",
    "pool_refuses_only_when_full", "old_messages_get_summarized", "failed_commit_backs_off",
)
# Properties of the final database: checked once, at the end (their per-event checks read the store, which
# after a real run holds only its final state).
FINAL_STATE_INVARIANTS = (
    "single_live_head", "one_continuation_per_parent", "no_orphan_parent", "no_duplicate_persisted_turn",
    "message_count_matches_active_rows", "deliberate_end_is_final",
)
REAL_INVARIANTS = HISTORY_INVARIANTS + FINAL_STATE_INVARIANTS

_STORE_AT_EVENT = "reads the store as it was at an event; a real run leaves only the final database"
_VIRTUAL_TIME = "needs virtual-time precision; real scheduling delays make its time bounds meaningless"
NOT_APPLICABLE = {
    "commit_holds_lease": _STORE_AT_EVENT,
    "dead_holder_reclaimable": _STORE_AT_EVENT + " (a real run judges it for the rows its parent plants, with the "
                               "workers' real probe: `planted_holders_reclaimed`)",
    "late_contender_adopts": _STORE_AT_EVENT,
    "rewind_slots_stay_under_watermark": _STORE_AT_EVENT,
    "hard_cancel_restores_cooldown": _STORE_AT_EVENT,
    "cooldown_never_shortened": _STORE_AT_EVENT,
    "commit_below_threshold_clears_strikes": _STORE_AT_EVENT,
    "breaker_blocks_only_when_latched": _STORE_AT_EVENT,
    "closed_write_adopts_live_tip": _STORE_AT_EVENT,
    "title_follows_conversation": _STORE_AT_EVENT,
    "title_names_one_conversation": _STORE_AT_EVENT,
    "no_summary_inside_cooldown": _STORE_AT_EVENT,
    "abandoned_attempt_frees_lease": _STORE_AT_EVENT,
    "archived_rows_were_in_input": _STORE_AT_EVENT,
    "commit_changes_transcript": _STORE_AT_EVENT,
    "commit_reaches_caller": _STORE_AT_EVENT,
    "automatic_end_never_refuses_rotation": _STORE_AT_EVENT,
    "told_messages_kept_once_in_order": _STORE_AT_EVENT,
    "explicit_close_cleared_at_turn_start": _STORE_AT_EVENT,
    "received_message_survives_gateway_crash": _STORE_AT_EVENT,
    "received_message_written_once": _STORE_AT_EVENT,
    "commit_keeps_a_user_turn": _STORE_AT_EVENT,
    "reply_fits_context": "reads the agents' in-memory transcripts, which die with their processes",
    "durable_messages_match_rows": "reads the agents' in-memory transcripts, which die with their processes",
    "adopted_tip_reaches_agent": "reads the agents' in-memory transcripts, which die with their processes",
    "held_rows_are_live": "reads the agents' in-memory transcripts, which die with their processes",
    "turn_append_all_or_nothing": "reads the agents' in-memory transcripts, which die with their processes",
    "stale_job_never_runs": "follows the simulator kernel's task.spawn events, which trio does not record",
    "pool_admission_bounded": "follows the simulator kernel's task.spawn events, which trio does not record",
    "admitted_job_runs": "follows the simulator kernel's task.spawn events, which trio does not record",
    "failed_summary_backs_off": "follows the simulator kernel's task.exit events, which trio does not record",
    "failed_summary_never_commits": "follows the simulator kernel's task.exit events, which trio does not record",
    "hard_cancel_abandons_summary": "follows the simulator kernel's task.exit events, which trio does not record",
    "idle_timeout_within_bounds": _VIRTUAL_TIME,
    "idle_timeout_fires_when_due": _VIRTUAL_TIME,
    "hung_commit_reported": _VIRTUAL_TIME,
    "timed_out_host_returns_promptly": _VIRTUAL_TIME,
    "next_turn_persists_after_ctrl_c": _VIRTUAL_TIME,
    "ctrl_c_grace_counted_from_press": _VIRTUAL_TIME,
    "turn_after_quiet_persists": _VIRTUAL_TIME,
    "cooldown_blocks_only_while_in_force": _VIRTUAL_TIME,
    "hard_cancel_frees_lease": _VIRTUAL_TIME,
    "summarized_attempt_refused_only_for_a_cause": _VIRTUAL_TIME,
    "no_admission_after_ctrl_c": "needs the agent whose host started each attempt, which a real worker's log does not say",
    "failed_release_retried": "tells a worker's own release by its task's name, which a real run's log prefixes with the process",
    "gateway_turns_in_arrival_order": "keys a gateway's queue by its agent's name, which every stress worker's gateway shares",
    "stale_attempt_writes_no_state": "keys compressor generations by process; a stress process runs two agents, each with its own compressor",
    "current_attempt_owns_compressor": "keys compressor generations by process; a stress process runs two agents, each with its own compressor",
}


@dataclass
class RealSystem:
    """What an invariant may read of a real run (the simulator's SystemView): the final database, the
    workers' config, and which processes had died by the moment (commit-order key) of the event judged."""

    store: SessionStore
    config: CompactionConfig
    deaths: dict[str, float]
    now: float = 0.0
    agents: dict[str, Any] = field(default_factory=dict)
    ctrl_c_grace_s: float = GRACE_S  # the workers' terminals'

    def process_of(self, incarnation: str) -> str:
        """A real worker is never restarted under its name: each start is a process of its own."""
        return incarnation

    def holder_is_dead(self, holder: str) -> bool:
        died = self.deaths.get(HolderId(holder).fields.get("proc", ""))
        return died is not None and died <= self.now

    def agent_of_task(self, task: str) -> str | None:
        """A real worker's log does not say which agent a task acts for."""
        return None


@dataclass(frozen=True)
class CheckResult:
    violations: list[Violation]
    integrity: list[str]
    invariants: tuple[str, ...]
    reclaimed: int = 0  # planted rows of recycled pids' holders the workers reclaimed


def planted_holders_reclaimed(history: list[HistoryEvent]) -> tuple[Violation | None, int]:
    """dead_holder_reclaimable through the real probe (R24): the parent planted, on each session, an unexpired
    lease row whose holder's pid now runs another process; no worker may sit out behind it, and the first one
    to want the lease takes it at once. The first sit-out, if any, and how many planted rows were taken."""
    planted: dict[str, HistoryEvent] = {}
    reclaimed = 0
    for record in history:
        event = record.event
        if isinstance(event, StressLeasePlanted):
            planted[event.session] = record
        elif isinstance(event, LeaseAcquired) and planted.pop(event.session, None) is not None:
            reclaimed += 1
        elif isinstance(event, LeaseContended) and event.session in planted:
            plant = planted[event.session]
            found = Violation("dead_holder_reclaimable", f"{event.holder} sat out behind {event_of(plant, StressLeasePlanted).holder}, whose pid "
                              "runs a process started at another time: the real probe took it for alive",
                              (plant.seq, record.seq), record.time)
            return found, reclaimed
    return None, reclaimed


def deaths_of(merged: MergedHistory) -> dict[str, float]:
    """When each process died (SIGKILL, or an exit), from the parent's records, on the commit-order clock."""
    return {record.event.process: key for key, record in zip(merged.keys, merged.events) if isinstance(record.event, DEATHS)}


def check(db: Path, merged: MergedHistory, config: CompactionConfig) -> CheckResult:
    """Run every invariant that applies to a real run; the first violation of each is kept."""
    store = SessionStore(str(db))
    history = merged.events
    try:
        system = RealSystem(store, config, deaths_of(merged))
        violations: dict[str, Violation] = {}
        history_checks = [INVARIANTS[name](system) for name in HISTORY_INVARIANTS]
        for key, event in zip(merged.keys, history):
            system.now = key
            for invariant in history_checks:
                if invariant.name not in violations and (found := invariant.on_event(event)) is not None:
                    violations[invariant.name] = found
        system.now = merged.keys[-1] if merged.keys else 0.0
        for invariant in history_checks + [INVARIANTS[name](system) for name in FINAL_STATE_INVARIANTS]:
            if invariant.name not in violations and (found := invariant.at_end(history)) is not None:
                violations[invariant.name] = found
        sat_out, reclaimed = planted_holders_reclaimed(history)
        if sat_out is not None:
            violations[sat_out.invariant] = sat_out
        return CheckResult(sorted(violations.values(), key=lambda v: v.time), store.integrity(), REAL_INVARIANTS, reclaimed)
    finally:
        store.close()
