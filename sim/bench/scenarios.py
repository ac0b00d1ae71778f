"""`python -m sim bench scenarios`: runs per second and virtual seconds per wall second on the catalogue.

Each scenario runs `runs` times inside one wall-clock freeze; time is this process's CPU time. The figure
that matters is the median scenario's runs per second (one core), and virtual time simulated per second.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

from sim.scenario.runner import run_once
from sim.timefreeze import frozen_time


def bench_scenarios(scenarios: Sequence[Any], runs: int = 20, on_done: Callable[[str], None] | None = None) -> dict[str, Any]:
    """`on_done` hears of each measured scenario as one line (progress)."""
    per_scenario = {}
    total_virtual = total_cpu = 0.0
    with frozen_time():
        for scenario in scenarios:
            started = time.process_time()
            virtual = sum(run_once(scenario, seed).result.virtual_s for seed in range(runs))
            cpu = max(time.process_time() - started, 1e-9)
            per_scenario[scenario.name] = round(runs / cpu, 1)
            total_virtual += virtual
            total_cpu += cpu
            if on_done is not None:
                on_done(f"{scenario.name}: {per_scenario[scenario.name]} runs/s")
    return {
        "benchmark": "scenarios",
        "scenarios": len(per_scenario),
        "runs_per_scenario": runs,
        "runs_per_s": per_scenario,
        "median_runs_per_s": round(statistics.median(per_scenario.values()), 1) if per_scenario else 0.0,
        "virtual_s_per_wall_s": round(total_virtual / total_cpu, 1) if total_cpu else 0.0,
    }
