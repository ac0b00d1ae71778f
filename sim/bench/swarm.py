"""`python -m sim bench swarm`: the swarm workloads alone against the curated mutants, what a generated run
costs, and how small each find shrinks.

Detection. First the campaign of each root seed r (runs 0, 1, 2, ... of `python -m sim swarm --seed r`) runs
on the unmutated reference: a run that fails there detects nothing, so it is skipped below, and their number
is reported (it should be 0). Then, for every curated mutant, an overlay subprocess (`python -m sim
swarm-detect --mutant NAME`) runs each root seed's campaign to its first failing run that is not skipped. A
mutant is caught from a root seed when that run comes within `max_runs`; the search stops at the first root
seed that misses (the mutant is then not caught from every root, and its later roots are not measured).

Speed. The campaign of root seed 0 on the unmutated reference, each run timed on this process's CPU clock
beside a raw-loop probe and stated in raw-loop steps (`yardstick.py`), so the figure holds across machines.

Shrinking. Each caught mutant's first detecting run (its first root seed) is exported and shrunk under the
mutant; the figure is the shrunk run's drives plus faults over the original's, and whether the shrunk
scenario replays to the same trace digest twice.
"""

from __future__ import annotations

import functools
import json
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sim.bench.figures import summary
from sim.bench.yardstick import interleaved_best, raw_probe, raw_probe_steps
from sim.core.heap import freeze_long_lived
from sim.core.timefreeze import frozen_time
from sim.core.trace import digest
from sim.mutation.mutants import sim_document
from sim.scenario.loader import load_scenario
from sim.scenario.names import registry
from sim.scenario.runner import run_once
from sim.shrinking.scenario_shrinker import shrink
from sim.swarm.campaign import campaign
from sim.swarm.export import export_run
from sim.swarm.generated_runs import run_generated, workload_of
from sim.swarm.workload_model import Workload

SHRINK_LIMIT_S = 60.0
SHRINK_TARGET = 0.30  # a shrunk find keeps at most this share of the original's drives plus faults
DETECTION_TARGET = 40  # mutants caught from every root seed within max_runs
SPEED_TARGET_STEPS = 30_000  # the median run's cost in raw-loop steps
SPEED_REPEATS = 3  # replays of each run timed for speed; the least counts


# ---- the subprocess's side, under one mutant -----------------------------------------------------


def first_detection(workloads: Sequence[Workload], root: int, max_runs: int, skip: frozenset[int]) -> dict[str, Any]:
    """The first failing run of root seed `root`'s campaign, among its first `max_runs`, that is not in `skip`."""
    started = time.process_time()
    found: list[Any] | None = None
    runs = 0
    freeze_long_lived()
    with frozen_time():
        for index in range(max_runs):
            if index in skip:
                continue
            runs += 1
            report = run_generated(workloads, root, index)
            if report.violations:
                found = [index, report.violations[0].invariant]
                break
    return {"found": found, "runs": runs, "cpu_s": round(time.process_time() - started, 3)}


def shrink_find(workloads: Sequence[Workload], root: int, index: int, out_dir: Path, mutant: str | None) -> dict[str, Any]:
    """Export run `index` of root seed `root`, shrink it, and replay the shrunk scenario twice by digest."""
    invariant = run_generated(workloads, root, index).violations[0].invariant
    exported = export_run(workload_of(workloads, index), root, index, invariant, out_dir, mutant=mutant)
    report = exported.report
    result = shrink(report.scenario, report.seed, report.result.decisions, invariant, source=exported.repro,
                    out_dir=out_dir / "shrunk", time_limit=SHRINK_LIMIT_S, mutant=mutant)
    shrunk = load_scenario(result.scenario_path, registry())
    with frozen_time():
        replays = [run_once(shrunk, result.report.seed, result.report.result.decisions) for _ in range(2)]
    digests = {digest(r.result.history, r.result.decisions) for r in [result.report, *replays]}
    before = result.before.drives + result.before.faults
    after = result.after.drives + result.after.faults
    return {"invariant": invariant, "before": before, "after": after, "share": round(after / before, 3) if before else 0.0,
            "same_digest": len(digests) == 1, "runs": result.runs, "seconds": round(result.seconds, 1),
            "timed_out": result.timed_out, "scenario": str(result.scenario_path), "replay": result.as_dict()["replay"]}


# ---- the parent's side -----------------------------------------------------------------------------


def baseline_failures(workloads: Sequence[Workload], roots: int, max_runs: int, jobs: int) -> dict[int, list[int]]:
    """Per root seed, the runs among the first `max_runs` that fail on the unmutated reference."""
    return {root: [run.index for run in campaign(workloads, root, runs=max_runs, jobs=jobs).runs if run.failure is not None]
            for root in range(roots)}


def _detect_root(paths: Sequence[str], mutant: str, root: int, max_runs: int, skip_file: Path) -> dict[str, Any]:
    return sim_document(["swarm-detect", *paths, "--root", str(root), "--max-runs", str(max_runs), "--skip-file",
                          str(skip_file), "--mutant", mutant])


def _shrink_under(paths: Sequence[str], mutant: str, root: int, index: int, out_dir: Path) -> dict[str, Any]:
    return sim_document(["swarm-detect", *paths, "--root", str(root), "--shrink-index", str(index), "--out", str(out_dir),
                          "--mutant", mutant])


def detect_mutant(paths: Sequence[str], mutant: str, skip_files: dict[int, Path], *, max_runs: int,
                  out_dir: Path) -> dict[str, Any]:
    """Runs to detection from each root seed (None: missed; the search stops there), CPU seconds, the shrink."""
    per_root: list[int | None] = []
    cpu_s = 0.0
    first: tuple[int, int] | None = None
    for root, skip_file in skip_files.items():
        found = _detect_root(paths, mutant, root, max_runs, skip_file)
        if "error" in found:
            return {"error": found["error"], "runs": per_root, "cpu_s": round(cpu_s, 3)}
        cpu_s += found["cpu_s"]
        index = None if found["found"] is None else found["found"][0]
        per_root.append(None if index is None else index + 1)
        if index is None:
            break
        if first is None:
            first = (root, index)
    result: dict[str, Any] = {"runs": per_root, "cpu_s": round(cpu_s, 3),
                              "caught_from_every_root": len(per_root) == len(skip_files) and None not in per_root}
    result.update(summary(per_root, max_runs))
    if first is not None:
        result["shrink"] = _shrink_under(paths, mutant, *first, out_dir / mutant)
    return result


def speed(workloads: Sequence[Workload], runs: int, repeats: int = SPEED_REPEATS) -> dict[str, Any]:
    """Per-run CPU cost of root seed 0's campaign on the unmutated reference, in raw-loop steps.

    Each run is replayed `repeats` times, taking turns with a raw-loop probe (`yardstick.interleaved_best`), and
    costs its least time times the raw loop's best rate beside it: a run replays exactly, so its least time is
    its cost, and the probe beside it converts that cost at the speed the machine had then. (A yardstick taken
    once per batch read the same code 19,000 to 34,000 steps as the machine's speed moved within the batch.)
    The raw loop's median rate and its range are reported, to show how much the machine moved."""
    raw_steps = raw_probe_steps()
    costs, rates, seconds, steps, events, virtual = [], [], [], [], [], []
    freeze_long_lived()
    with frozen_time():
        for index in range(runs):
            report = run_generated(workloads, 0, index)
            run_s, raw_s = interleaved_best([functools.partial(run_generated, workloads, 0, index), raw_probe], repeats)
            rates.append(raw_steps / raw_s)
            costs.append(run_s * rates[-1])
            seconds.append(run_s)
            steps.append(report.result.steps)
            events.append(len(report.result.history))
            virtual.append(report.result.virtual_s)
    median_steps = round(statistics.median(costs))
    return {
        "runs": runs, "raw_steps_per_s": round(statistics.median(rates)),
        "raw_steps_per_s_range": [round(min(rates)), round(max(rates))],
        "runs_per_s": round(runs / (sum(seconds) or 1e-9), 1),
        "median_run_cost_raw_steps": median_steps, "target_raw_steps": SPEED_TARGET_STEPS,
        "met": median_steps <= SPEED_TARGET_STEPS,
        "median_steps": statistics.median(steps), "median_events": statistics.median(events),
        "median_virtual_s": round(statistics.median(virtual), 3),
    }


def bench_swarm(workloads: Sequence[Workload], mutants: Sequence[str], *, roots: int, max_runs: int, speed_runs: int,
                jobs: int, out_dir: Path, on_done: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Detection per curated mutant (`jobs` subprocesses at once), then the speed of a run; one document."""
    paths = [str(workload.path) for workload in workloads]
    skipped = baseline_failures(workloads, roots, max_runs, jobs)
    if on_done is not None:
        on_done(f"unmutated reference: {sum(map(len, skipped.values()))} of {roots * max_runs} runs fail")
    out_dir.mkdir(parents=True, exist_ok=True)
    skip_files = {}
    for root, indices in skipped.items():
        skip_files[root] = out_dir / f"skip-root{root}.json"
        skip_files[root].write_text(json.dumps(indices), encoding="utf-8")

    def one(mutant: str) -> tuple[str, dict[str, Any]]:
        result = detect_mutant(paths, mutant, skip_files, max_runs=max_runs, out_dir=out_dir)
        if on_done is not None:
            on_done(f"{mutant}: {'caught from every root' if result.get('caught_from_every_root') else 'NOT caught from every root'}")
        return mutant, result

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        detection = dict(pool.map(one, mutants))
    caught = sorted(name for name, result in detection.items() if result.get("caught_from_every_root"))
    shrinks = [result["shrink"] for result in detection.values() if "share" in result.get("shrink", {})]
    measured = speed(workloads, speed_runs)
    if on_done is not None:
        on_done(f"speed: median run {measured['median_run_cost_raw_steps']} raw-loop steps")
    return {
        "benchmark": "swarm",
        "workloads": [workload.name for workload in workloads],
        "roots": roots, "max_runs": max_runs,
        "mutants": len(mutants), "caught_from_every_root": len(caught), "detection_target": DETECTION_TARGET,
        "detection_met": len(caught) >= DETECTION_TARGET,
        "missed": sorted(set(mutants) - set(caught)),
        "false_alarms_skipped": sum(map(len, skipped.values())),
        "false_alarms_by_root": {str(root): len(indices) for root, indices in skipped.items()},
        "shrink_target": SHRINK_TARGET,
        "shrink_met": bool(shrinks) and all(s["share"] <= SHRINK_TARGET and s["same_digest"] for s in shrinks),
        "per_mutant": detection,
        "speed": measured,
    }


def render(result: dict[str, Any]) -> str:
    """The per-mutant table (runs to detection per root, median, max, CPU, shrink), then the figures."""
    lines = [f"{'mutant':<40} {'runs per root seed':<44} {'median':>6} {'max':>6} {'cpu s':>7}  shrink"]
    for name, entry in sorted(result["per_mutant"].items()):
        runs = " ".join("-" if r is None else str(r) for r in entry.get("runs", []))
        shrunk = entry.get("shrink", {})
        shrink_text = (f"{shrunk['after']}/{shrunk['before']} ({shrunk['share']:.0%}){'' if shrunk['same_digest'] else ' DIGEST DIFFERS'}"
                       if "share" in shrunk else shrunk.get("error", ""))
        lines.append(f"{name:<40} {runs:<44} {str(entry.get('median', '')):>6} {str(entry.get('max', '')):>6} "
                     f"{entry.get('cpu_s', 0):>7}  {entry.get('error', shrink_text)}")
    lines += [
        "",
        f"caught from all {result['roots']} root seeds within {result['max_runs']} runs: {result['caught_from_every_root']} of "
        f"{result['mutants']} (target {result['detection_target']}); runs failing on the unmutated reference, "
        f"skipped: {result['false_alarms_skipped']}",
        f"shrunk finds within {result['shrink_target']:.0%} of drives plus faults, same digest on replay: {result['shrink_met']}",
        render_speed(result["speed"]),
    ]
    return "\n".join(lines)


def render_speed(figures: dict[str, Any]) -> str:
    """The speed figure in one line (all that `bench swarm --speed-only` prints)."""
    return (f"median run: {figures['median_run_cost_raw_steps']} raw-loop steps (target {figures['target_raw_steps']}), "
            f"{figures['runs_per_s']} runs/s at {figures['raw_steps_per_s']} raw-loop steps/s "
            f"(from {figures['raw_steps_per_s_range'][0]} to {figures['raw_steps_per_s_range'][1]}), "
            f"{figures['median_steps']} steps, {figures['median_events']} events, "
            f"{figures['median_virtual_s']} virtual s per run")
