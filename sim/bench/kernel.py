"""`python -m sim bench kernel`: simulator steps per second against the raw loop and trio, in one run.

Each runtime runs the same workload; a step is one task resumption, and every figure divides the
simulator's step count for the workload by that runtime's time, so the ratios compare equal work. Times
are this process's CPU time (all three are single-threaded and CPU-bound), which other load on the machine
disturbs far less than wall time; each runtime is measured `repeats` times and the best is kept, taking turns
with the raw loop (`yardstick.interleaved_best`), so each ratio compares the same moments of the machine. The
simulator runs as it does in a batch: inside one wall-clock freeze, started once for all its runs; trio runs
outside it, beside a raw loop of its own, and is compared to the simulator through the raw loop.
"""

from __future__ import annotations

import platform
from typing import Any

from contract.trio_runtime import TrioRuntime
from sim.bench.workload import PAIRS, ROUNDS, workload
from sim.bench.yardstick import interleaved_best, raw_probe, raw_probe_steps
from sim.core.timefreeze import frozen_time
from sim.core.world import World


def bench_kernel(repeats: int = 5, pairs: int = PAIRS, rounds: int = ROUNDS) -> dict[str, Any]:
    sim_result = World(seed=1).run(workload, pairs, rounds)
    if sim_result.outcome != "ok":
        raise RuntimeError(f"the benchmark workload did not finish on the simulator: {sim_result.error}")
    steps = sim_result.steps
    with frozen_time():
        sim_s, raw_s = interleaved_best([lambda: World(seed=1).run(workload, pairs, rounds),
                                         lambda: raw_probe(pairs, rounds)], repeats)
    trio_s, raw_beside_trio_s = interleaved_best([lambda: TrioRuntime.run(workload, pairs, rounds, mock_clock=True),
                                                  lambda: raw_probe(pairs, rounds)], repeats)
    return {
        "benchmark": "kernel",
        "workload": {"pairs": pairs, "rounds": rounds, "sim_steps": steps, "raw_steps": raw_probe_steps(pairs, rounds)},
        "python": platform.python_version(),
        "repeats": repeats,
        "sim_steps_per_s": round(steps / sim_s),
        "raw_steps_per_s": round(steps / raw_s),
        "trio_steps_per_s": round(steps / trio_s),
        "ratio_vs_raw": round(raw_s / sim_s, 3),
        "speedup_vs_trio": round((trio_s / raw_beside_trio_s) / (sim_s / raw_s), 2),
    }
