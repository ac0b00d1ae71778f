"""`python -m sim bench swarm --feedback`: plain swarm against coverage feedback (`sim.swarm.feedback`), on the
same curated mutants, root seeds and budget of runs.

For each mode, root seed and mutant, an overlay subprocess (the internal command `swarm-race`) runs the
campaign of that root seed under the mutant to its first failing run that counts, at most `max_runs`. A
feedback campaign under a mutant draws other runs than on the unmutated reference once the coverage
differs, so a failing run is judged by its scenario, not by its index: the parent first runs each mode's
campaign on the unmutated reference and passes the digests of its failing runs' documents, which the child
skips; any other failing run's document goes to the parent (one JSON line on the child's stdout), which
runs it on the unmutated reference and answers (one line on its stdin) whether it counts, that is whether it
passes there. Both modes are judged by this one rule. Every root seed is measured (a miss counts as
`max_runs` in the median), so the two columns compare equal work.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sim.bench.figures import summary
from sim.core import children
from sim.core.timefreeze import frozen_time
from sim.scenario.loader import scenario_from_document
from sim.scenario.names import registry
from sim.scenario.runner import run_once
from sim.swarm.campaign import campaign
from sim.swarm.feedback import BATCH, NO_BIAS, Bias, Feedback
from sim.swarm.generate import generated_path, scenario_document
from sim.swarm.generated_runs import run_generated, summarise, workload_of
from sim.swarm.workload_model import Workload

MODES = ("plain", "feedback")
_ONE_RUN = threading.Lock()  # mutants are raced from threads; the runs they check happen here one by one
COUNTS = "counts"  # the parent's answer when a failing run passes on the unmutated reference


def document_digest(document: Mapping[str, Any]) -> str:
    """A generated scenario's identity: the same document is the same run, on any reference."""
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:16]


# ---- the subprocess's side, under one mutant -----------------------------------------------------


def first_find(workloads: Sequence[Workload], root: int, max_runs: int, feedback: bool, known: frozenset[str],
               counts: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The first failing run of root seed `root`'s campaign (plain or with feedback), among its first
    `max_runs`, whose scenario is not in `known` and that `counts` (given its document) accepts; a failing
    run that does not count is folded into the feedback like any other."""
    started = time.process_time()
    folded = Feedback()
    biases: dict[str, Bias] = {}
    with frozen_time():
        for index in range(max_runs):
            if feedback and index % BATCH == 0:
                biases = {workload.name: folded.bias(workload) for workload in workloads}
            workload = workload_of(workloads, index)
            bias = biases.get(workload.name, NO_BIAS)
            report = run_generated(workloads, root, index, bias)
            if report.violations:
                document = scenario_document(workload, root, index, bias)
                if document_digest(document) not in known and counts(document):
                    return {"found": index, "invariant": report.violations[0].invariant,
                            "cpu_s": round(time.process_time() - started, 3)}
            if feedback:
                folded.add(summarise(workloads, root, index, report, bias).signature)
    return {"found": None, "cpu_s": round(time.process_time() - started, 3)}


def ask_parent(document: dict[str, Any]) -> bool:
    """The child's side of the dialogue: send a failing run's document, read whether it counts."""
    print(json.dumps({"candidate": document}, sort_keys=True), flush=True)
    return sys.stdin.readline().strip() == COUNTS


# ---- the parent's side -----------------------------------------------------------------------------


def unmutated_failures(workloads: Sequence[Workload], root: int, max_runs: int, feedback: bool) -> set[str]:
    """The digests of the scenarios that fail on the unmutated reference in this mode's campaign of `root`."""
    done = campaign(workloads, root, runs=max_runs, feedback=feedback)
    return {document_digest(scenario_document(workload_of(workloads, run.index), root, run.index, done.bias_of(run.index)))
            for run in done.runs if run.failure is not None}


def fails_unmutated(workload: Workload, root: int, index: int, document: dict[str, Any]) -> bool:
    """Whether a generated run fails on the unmutated reference (one at a time: the time freeze is process-wide)."""
    scenario = scenario_from_document(document, generated_path(workload, root, index), registry())
    with _ONE_RUN, frozen_time():
        return bool(run_once(scenario, scenario.explore.seed).violations)


def race_root(paths: Sequence[str], workloads: Sequence[Workload], mutant: str, root: int, mode: str, max_runs: int,
              known: set[str], work_dir: Path) -> tuple[int | None, float, int]:
    """Runs to the first find that counts, for one root seed in one mode (None: missed), CPU seconds, and the
    failing runs met on the way that fail on the unmutated reference too."""
    stem = work_dir / f"{mutant}-{mode}-root{root}"
    known_file, errors = stem.with_suffix(".known.json"), stem.with_suffix(".stderr")
    known_file.write_text(json.dumps(sorted(known)), encoding="utf-8")
    command = [sys.executable, "-m", "sim", "swarm-race", *paths, "--root", str(root), "--max-runs", str(max_runs),
               "--known-file", str(known_file), *(["--feedback"] if mode == "feedback" else []), "--mutant", mutant]
    false_alarms = 0
    with errors.open("w", encoding="utf-8") as stderr, children.dialogue(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True) as child:
        assert child.stdin is not None and child.stdout is not None
        for line in child.stdout:
            message = json.loads(line)
            if "candidate" not in message:
                return (None if message["found"] is None else message["found"] + 1), message["cpu_s"], false_alarms
            document = message["candidate"]
            alarm = fails_unmutated(workload_of(workloads, document_index(document)), root, document_index(document), document)
            false_alarms += alarm
            child.stdin.write(("" if alarm else COUNTS) + "\n")
            child.stdin.flush()
    raise RuntimeError(f"{mutant}, root {root}, {mode}: swarm-race ended without a result (see {errors})")


def document_index(document: Mapping[str, Any]) -> int:
    """The run index a generated document was drawn for (its name ends in `_run<i>`)."""
    return int(document["name"].rsplit("_run", 1)[1])


def compare_feedback(workloads: Sequence[Workload], mutants: Sequence[str], *, roots: int, max_runs: int, jobs: int,
                     out_dir: Path, on_done: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Runs to first detection per mutant, root seed and mode; one document."""
    paths = [str(workload.path) for workload in workloads]
    known = {(mode, root): unmutated_failures(workloads, root, max_runs, mode == "feedback") for mode in MODES for root in range(roots)}
    if on_done is not None:
        on_done("unmutated reference: " + ", ".join(f"{mode} {sum(len(known[mode, root]) for root in range(roots))} failing runs"
                                                    for mode in MODES))
    out_dir.mkdir(parents=True, exist_ok=True)

    def one(mutant: str) -> tuple[str, dict[str, Any]]:
        entry: dict[str, Any] = {}
        for mode in MODES:
            runs, cpu_s, alarms = [], 0.0, 0
            for root in range(roots):
                found, spent, met = race_root(paths, workloads, mutant, root, mode, max_runs, known[mode, root], out_dir)
                runs.append(found)
                cpu_s += spent
                alarms += met
            entry[mode] = {**summary(runs, max_runs), "cpu_s": round(cpu_s, 3), "false_alarms": alarms}
        if on_done is not None:
            on_done(f"{mutant}: plain median {entry['plain']['median']:g}, feedback median {entry['feedback']['median']:g}")
        return mutant, entry

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        per_mutant = dict(pool.map(one, mutants))
    return {
        "benchmark": "swarm-feedback", "workloads": [workload.name for workload in workloads], "roots": roots,
        "max_runs": max_runs, "batch": BATCH, "per_mutant": per_mutant,
        "totals": {mode: {"caught_from_every_root": sum(not entry[mode]["undetected"] for entry in per_mutant.values()),
                          "sum_of_medians": sum(entry[mode]["median"] for entry in per_mutant.values()),
                          "undetected_searches": sum(entry[mode]["undetected"] for entry in per_mutant.values())}
                   for mode in MODES},
    }


def render(result: dict[str, Any]) -> str:
    """One row per mutant: runs to detection per root seed in each mode, median and max (a miss counts as the cap)."""
    header = f"{'mutant':<40} {'plain runs per root':<32} {'med':>5} {'max':>5}   {'feedback runs per root':<32} {'med':>5} {'max':>5}"
    lines = [header]
    for name, entry in sorted(result["per_mutant"].items()):
        cells = []
        for mode in MODES:
            figures = entry[mode]
            runs = " ".join("-" if r is None else str(r) for r in figures["runs"])
            cells.append(f"{runs:<32} {figures['median']:>5g} {figures['max']:>5}")
        lines.append(f"{name:<40} {cells[0]}   {cells[1]}")
    lines.append("")
    for mode in MODES:
        totals = result["totals"][mode]
        lines.append(f"{mode}: caught from all {result['roots']} root seeds within {result['max_runs']} runs: "
                     f"{totals['caught_from_every_root']} of {len(result['per_mutant'])}; sum of medians {totals['sum_of_medians']:g}; "
                     f"searches that missed {totals['undetected_searches']}")
    return "\n".join(lines)
