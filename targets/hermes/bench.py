"""`python -m sim bench hermes`: what a run of a hermes release costs under the simulator, beside the same
scenario on the same release with real threads and real time, measured in one run of the benchmark.

Three measurements, in the release's own process (`sim.scenario.targets` starts it):
- **simulated**: seed 000's scenario file (`scenarios/hermes/seed_000_*`: in place from 0.18.2, rotation before)
  over consecutive seeds in one batch, as an exploration runs them: each run's wall time, CPU time (every thread
  of the process: hermes's threads are real threads here) and virtual time;
- **generated**: the campaign of `scenarios/swarm/hermes/` from root seed 1 on the release (what a swarm run
  costs), timed between runs;
- **real threads**: `python -m targets.hermes baseline` in a child process, the same interleaving with real
  threads and real time (`baseline.py`): the summary waits on an Event, the terminal's 10 s grace is really
  waited. Its setup (`AIAgent()`, the earlier conversation's persist) is part of its run, as the simulated run
  builds its world too.

The simulated seed 000 stalls its summary 5 virtual minutes where the real one releases it as soon as the second
process has appended: the simulated run covers more time, which its virtual seconds per wall second state.
Wall time is read from `CLOCK_MONOTONIC`: inside a batch `time.perf_counter` is the frozen clock.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.core import children
from sim.core.timefreeze import frozen_time
from sim.scenario import targets
from sim.scenario.loader import load_scenario
from sim.scenario.names import registry
from sim.scenario.runner import run_once
from sim.swarm.campaign import run_indices
from sim.swarm.workload_loader import load_workloads
from targets.hermes.target import compacts_in_place

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = {"in_place": ROOT / "scenarios" / "hermes" / "seed_000_ctrl_c_next_turn_second_writer.toml",
             "rotation": ROOT / "scenarios" / "hermes" / "seed_000_rotation_loses_next_turn_and_second_writer.toml"}
WORKLOADS = ROOT / "scenarios" / "swarm" / "hermes"
ROOT_SEED = 1
REAL_LIMIT_S = 600.0  # the real-thread runs wait out a 10 s grace each


def _wall() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def mode_of(version: str) -> str:
    """Seed 000 in place where the release compacts in place, else by rotation."""
    return "in_place" if compacts_in_place(version) else "rotation"


def bench_hermes(target: str, runs: int, real_runs: int, generated_runs: int,
                 on_done: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The three measurements (module docstring) and the ratios between them; run in the release's process."""
    version = target.partition("==")[2]
    mode = mode_of(version)
    simulated = _simulated(target, SCENARIOS[mode], runs)
    _said(on_done, f"simulated seed 000: {runs} runs")
    generated = _generated(target, generated_runs)
    _said(on_done, f"generated runs: {generated_runs}")
    real = _real(version, mode, real_runs)
    _said(on_done, f"real threads: {real_runs} runs")
    return {"target": target, "scenario": SCENARIOS[mode].stem, "simulated": simulated, "real_threads": real,
            "wall_speedup": round(real["median_wall_s"] / simulated["median_wall_s"], 1),
            "cpu_ratio": round(real["median_cpu_s"] / simulated["median_cpu_s"], 2), "generated": generated}


def _said(on_done: Callable[[str], None] | None, line: str) -> None:
    if on_done is not None:
        on_done(line)


def _simulated(target: str, path: Path, runs: int) -> dict[str, Any]:
    scenario = targets.retarget([load_scenario(path, registry())], target)[0]
    walls, cpus, virtual, failed = [], [], [], 0
    with frozen_time(), targets.batch(scenario):
        for seed in range(runs):
            wall, cpu = _wall(), time.process_time()
            report = run_once(scenario, seed)
            walls.append(_wall() - wall)
            cpus.append(time.process_time() - cpu)
            virtual.append(report.result.virtual_s)
            failed += report.failed
    return {"runs": runs, "failed_runs": failed, **_medians(walls, cpus, virtual)}


def _generated(target: str, runs: int) -> dict[str, Any]:
    workloads = load_workloads([WORKLOADS], registry(), target)
    walls: list[float] = []
    cpus: list[float] = []
    virtual: list[float] = []
    last = [_wall(), time.process_time()]

    def timed(summary: Any) -> None:
        now = [_wall(), time.process_time()]
        walls.append(now[0] - last[0])
        cpus.append(now[1] - last[1])
        virtual.append(summary.virtual_s)
        last[:] = now

    summaries, _ = run_indices(workloads, ROOT_SEED, range(runs), on_run=timed)
    return {"runs": runs, "root_seed": ROOT_SEED, "failed_runs": sum(s.failure is not None for s in summaries),
            **_medians(walls, cpus, virtual)}


def _medians(walls: list[float], cpus: list[float], virtual: list[float]) -> dict[str, Any]:
    return {"median_wall_s": round(statistics.median(walls), 4), "median_cpu_s": round(statistics.median(cpus), 4),
            "median_virtual_s": round(statistics.median(virtual), 3),
            "virtual_s_per_wall_s": round(sum(virtual) / sum(walls), 1)}


def _real(version: str, mode: str, runs: int) -> dict[str, Any]:
    """The baseline's runs in a child process (it loads the release for real threads, without the hooks)."""
    command = [sys.executable, "-m", "targets.hermes", "baseline", version, "--mode", mode, "--runs", str(runs), "--json"]
    done = children.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=REAL_LIMIT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[1:])} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    outcomes = json.loads(done.stdout)
    walls = [o["setup_s"] + o["wall_s"] for o in outcomes]
    return {"runs": runs, "lost_in_every_run": all(o["lost"] for o in outcomes),
            "median_setup_s": round(statistics.median(o["setup_s"] for o in outcomes), 4),
            "median_wall_s": round(statistics.median(walls), 4),
            "median_cpu_s": round(statistics.median(o["cpu_s"] for o in outcomes), 4),
            "virtual_s_per_wall_s": 1.0}
