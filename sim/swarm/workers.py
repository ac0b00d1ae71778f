"""A campaign's `-j` worker processes: `python -m sim swarm-worker` children, told their runs one order at a time.

Each worker is a child process started through `sim.core.children`, so it stops with the campaign: a first Ctrl+C
(or SIGTERM) stops every worker after its run in progress, and the campaign keeps every run they finished; a
second one stops them at once. An order is one JSON line on the worker's stdin: a share of the shard
(`{"shard": [index, count], "runs": R, "time_budget_s": T}`) or a feedback batch (`{"indices": [...],
"biases": {...}}`). The worker answers one JSON line per finished run, as it finishes it (so progress lines
show as runs end, whatever `-j`), then `{"done": ...}` with its CPU seconds and whether a stop request cut the
order short; after a cut it takes no further order and exits 130.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from typing import IO, Any

from sim.core import children, stopping
from sim.core.search import Shard
from sim.swarm.feedback import Bias
from sim.swarm.generated_runs import RunSummary, run_indices
from sim.swarm.workload_model import Workload


class WorkerFailed(RuntimeError):
    """A worker process ended without finishing its order (it printed why on stderr)."""


def summary_json(summary: RunSummary) -> dict[str, Any]:
    """A run's summary as one JSON object, everything included (the results file keeps less)."""
    return {"index": summary.index, "workload": summary.workload, "scenario": summary.scenario, "seed": summary.seed,
            "strategy": summary.strategy, "steps": summary.steps, "events": summary.events, "virtual_s": summary.virtual_s,
            "coverage": list(summary.coverage), "failure": None if summary.failure is None else list(summary.failure),
            "signature": sorted(summary.signature)}


def summary_from_json(document: Mapping[str, Any]) -> RunSummary:
    failure = document["failure"]
    return RunSummary(document["index"], document["workload"], document["scenario"], document["seed"], document["strategy"],
                      document["steps"], document["events"], document["virtual_s"], tuple(document["coverage"]),
                      None if failure is None else tuple(failure), frozenset(document["signature"]))


def bias_json(bias: Bias) -> dict[str, Any]:
    return {"factors": dict(bias.factors), "points": {kind: list(weights) for kind, weights in bias.points.items()}}


def bias_from_json(document: Mapping[str, Any]) -> Bias:
    """JSON carries floats exactly (shortest repr), so a worker draws with the very bias its parent folded."""
    return Bias(dict(document["factors"]), {kind: tuple(weights) for kind, weights in document["points"].items()})


# ---- the parent's side ------------------------------------------------------------------------


class Workers:
    """`jobs` worker processes over the same workloads and root seed, each answering its orders in turn."""

    def __init__(self, workloads: Sequence[Workload], root_seed: int, jobs: int) -> None:
        # A worker runs in a process like this one: the campaign's target is loaded first (`sim.scenario.targets`: the
        # environment says which), and its workloads are cut to that target as here.
        self._command = [sys.executable, "-m", "sim", "swarm-worker", *(str(w.path) for w in workloads), "--root", str(root_seed),
                         "--target", workloads[0].target]
        self._jobs = jobs
        self._processes: list[subprocess.Popen[str]] = []
        self._lines: queue.Queue[tuple[int, str | None]] = queue.Queue()
        self.cpu_s = 0.0
        self.interrupted = False  # a stop request cut some worker's order short

    def __enter__(self) -> Workers:
        with ExitStack() as stack:
            for job in range(self._jobs):
                started = children.dialogue(self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                process = stack.enter_context(started)
                self._processes.append(process)
                threading.Thread(target=self._read, args=(job, process.stdout), daemon=True).start()
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.__exit__(*exc)

    def _read(self, job: int, stdout: IO[str] | None) -> None:
        assert stdout is not None
        for line in stdout:
            self._lines.put((job, line))
        self._lines.put((job, None))

    def order(self, job: int, order: Mapping[str, Any]) -> None:
        stdin = self._processes[job].stdin
        assert stdin is not None
        stdin.write(json.dumps(order) + "\n")
        stdin.flush()

    def answers(self, jobs: Sequence[int]) -> Iterator[RunSummary]:
        """The summaries the given workers send for their current orders, as they come, until each is done."""
        waiting = set(jobs)
        while waiting:
            job, line = self._lines.get()
            if line is None and stopping.requested():  # stopped as it started, before it could answer
                waiting.discard(job)
                self.interrupted = True
                continue
            if line is None:
                raise WorkerFailed(f"swarm worker {job + 1} of {self._jobs} ended without finishing its runs "
                                   f"(exit {self._processes[job].wait()})")
            answer = json.loads(line)
            if "done" not in answer:
                yield summary_from_json(answer)
                continue
            waiting.discard(job)
            self.cpu_s += answer["cpu_s"]
            self.interrupted |= answer["interrupted"]


def share_order(shard: Shard, runs: int | None, time_budget_s: float | None) -> dict[str, Any]:
    return {"shard": [shard.index, shard.count], "runs": runs, "time_budget_s": time_budget_s}


def batch_order(indices: Sequence[int], biases: Mapping[int, Bias]) -> dict[str, Any]:
    return {"indices": list(indices), "biases": {str(index): bias_json(biases[index]) for index in indices}}


# ---- the worker's side ------------------------------------------------------------------------


def answer_channel() -> IO[str]:
    """The worker's stdout, kept for its answers alone: what else the process writes to stdout (the code under test
    prints, or logs through a handler that took `sys.stdout` when it was imported) goes to stderr, where it cannot
    break a line of the protocol."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return channel


def serve(workloads: Sequence[Workload], root_seed: int, orders: IO[str], answers: IO[str]) -> int:
    """Answer orders until stdin ends (exit 0) or a stop request cuts one short (exit 130)."""
    with stopping.graceful():
        for line in orders:
            order = json.loads(line)
            _, searched = run_indices(workloads, root_seed, _indices_of(order), runs=order.get("runs"),
                                      time_budget_s=order.get("time_budget_s"), biases=_biases_of(order),
                                      on_run=lambda summary: _answer(answers, summary_json(summary)))
            _answer(answers, {"done": True, "cpu_s": searched.cpu_s, "interrupted": searched.interrupted})
            if searched.interrupted:
                return stopping.EXIT_INTERRUPTED
    return 0


def _indices_of(order: Mapping[str, Any]) -> Iterable[int]:
    """A share of the shard (under the order's budget) or a feedback batch."""
    return Shard(*order["shard"]).seeds(0) if "shard" in order else order["indices"]


def _biases_of(order: Mapping[str, Any]) -> dict[int, Bias] | None:
    return None if "shard" in order else {int(index): bias_from_json(bias) for index, bias in order["biases"].items()}


def _answer(answers: IO[str], document: Mapping[str, Any]) -> None:
    answers.write(json.dumps(document) + "\n")
    answers.flush()
