"""`python -m sim bench scenarios`: what a catalogue run costs, in raw-loop steps, and how fast it simulates.

Each scenario runs `runs` times inside one wall-clock freeze; time is this process's CPU time. The figure
that matters is the median scenario's run cost in raw-loop steps: a run's CPU time times the raw loop's
steps per second, measured in this process (`yardstick.py`), so it holds across machines. Runs per second
and virtual seconds simulated per second are this machine's figures.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from sim.bench.yardstick import raw_steps_per_s
from sim.core.timefreeze import frozen_time
from sim.scenario.runner import run_once


def bench_scenarios(scenarios: Sequence[Any], runs: int = 20, on_done: Callable[[str], None] | None = None) -> dict[str, Any]:
    """`on_done` hears of each measured scenario as one line (progress)."""
    raw_rate = raw_steps_per_s()
    runs_per_s = {}
    run_cost = {}
    total_virtual = total_cpu = 0.0
    with frozen_time():
        for scenario in scenarios:
            started = time.process_time()
            virtual = sum(run_once(scenario, seed).result.virtual_s for seed in range(runs))
            cpu = max(time.process_time() - started, 1e-9)
            runs_per_s[scenario.name] = round(runs / cpu, 1)
            run_cost[scenario.name] = round(cpu / runs * raw_rate)
            total_virtual += virtual
            total_cpu += cpu
            if on_done is not None:
                on_done(f"{scenario.name}: {run_cost[scenario.name]} raw-loop steps a run, {runs_per_s[scenario.name]} runs/s")
    return {
        "benchmark": "scenarios",
        "scenarios": len(run_cost),
        "runs_per_scenario": runs,
        "raw_steps_per_s": round(raw_rate),
        "run_cost_raw_steps": run_cost,
        "median_run_cost_raw_steps": round(statistics.median(run_cost.values())) if run_cost else 0,
        "runs_per_s": runs_per_s,
        "median_runs_per_s": round(statistics.median(runs_per_s.values()), 1) if runs_per_s else 0.0,
        "virtual_s_per_wall_s": round(total_virtual / total_cpu, 1) if total_cpu else 0.0,
    }
