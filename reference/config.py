"""Every knob of compaction in one dataclass, with the production defaults and room for tiny test values."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CompactionConfig:
    """Budgets and switches for one agent's compaction (defaults from the production constants)."""

    threshold_tokens: int = 64_000
    context_limit_tokens: int = 0  # the model's context window; 0: unlimited (no overflow is ever reported)
    lease_ttl_s: float = 300.0
    idle_timeout_s: float = 120.0
    ceiling_timeout_s: float = 600.0
    pool_cap: int = 4
    in_place: bool = True
    keep_recent: int = 2
    tail_count: int = 0
    cooldown_ladder_s: tuple[float, ...] = (60.0, 300.0, 900.0)
    summary_failure_cooldown_s: float = 60.0
    split_failure_cooldown_s: float = 60.0
    structural_backoff_s: float = 60.0
    breaker_threshold: int = 2
    commit_overrun_slice_s: float = 30.0
    cancelled_worker_grace_s: float = 5.0
    cancel_spin_s: float = 0.025
    min_wait_slice_s: float = 0.005
    heartbeat_interval_s: float = 60.0
    static_fallback_summary: bool = False  # a failed summary call falls back to a deterministic static summary
    gateway_writes_on_receipt: bool = False  # the gateway writes a platform message's row before its turn runs (#104653)

    def __post_init__(self) -> None:
        if self.ceiling_timeout_s < self.idle_timeout_s:
            raise ValueError("the total ceiling must be at least the idle timeout")
        if self.lease_ttl_s <= 0 or self.pool_cap < 1 or not self.cooldown_ladder_s or self.heartbeat_interval_s <= 0:
            raise ValueError("lease TTL, pool cap, heartbeat interval and cooldown ladder must be positive / non-empty")

    @property
    def refresh_interval_s(self) -> float:
        """Often enough that a few missed refreshes still leave the lease alive: max(1, min(60, ttl/2))."""
        return max(1.0, min(60.0, self.lease_ttl_s / 2))

    @property
    def refresh_failure_budget(self) -> int:
        """Consecutive failed refreshes tolerated; after that the lease self-expires within one TTL."""
        return max(1, int(self.lease_ttl_s / self.refresh_interval_s))

    def timeout_cooldown_s(self, consecutive_timeouts: int) -> float:
        """The ladder step for the n-th consecutive timeout (1-based), saturating at the last step."""
        index = min(max(consecutive_timeouts, 1), len(self.cooldown_ladder_s)) - 1
        return self.cooldown_ladder_s[index]
