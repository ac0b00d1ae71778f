"""A campaign: generated runs of one or more workloads from a root seed, sharded, with a summary of each run.

Run `i` of a campaign uses workload `i mod W` (W workloads, in the order given) and is generated from
(root seed, i) alone, so any machine can run any run and shards never coordinate: shard I of N takes the
run indices I, I+N, I+2N, ... (`sim.search.Shard`). A run is summarised by what a reader of the results
needs: its size (steps, events, virtual seconds), the coverage marks it reached, and its failure class,
the violated invariant with the kinds of its witnessing events (for a run that did not complete, the
exception that ended it), so a thousand runs that hit the same bug read as one failure; and its signature
(`sim.swarm.signature`), what it reached in finer grain.

With feedback (`sim.swarm.feedback`) run `i` also depends on the signatures of the runs before its batch,
so the campaign runs batch after batch, in index order (the runs of a batch split among `-j` workers), and
is not sharded: a shard could not see the others' coverage.

A stop request (Ctrl+C, SIGTERM: `sim.stopping`) ends a campaign after the runs in progress: it keeps every
run that finished, and says it was interrupted.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from sim import stopping, targets
from sim.failure import unwrap
from sim.heap import freeze_long_lived
from sim.scenario.runner import RunReport, run_once
from sim.search import Shard, within_budget
from sim.swarm.feedback import BATCH, NO_BIAS, Bias, Feedback
from sim.swarm.generate import enabled_kinds, generate
from sim.swarm.model import Workload
from sim.swarm.signature import signature
from sim.timefreeze import frozen_time


@dataclass(frozen=True)
class RunSummary:
    """One generated run, as the results file records it."""

    index: int
    workload: str
    scenario: str
    seed: int
    strategy: str
    steps: int
    events: int
    virtual_s: float
    coverage: tuple[str, ...]
    failure: tuple[str, ...] | None  # (invariant, witness kinds...), None if every invariant held
    signature: frozenset[str] = frozenset()

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.index, "workload": self.workload, "scenario": self.scenario, "seed": self.seed,
                "strategy": self.strategy, "steps": self.steps, "events": self.events,
                "virtual_s": round(self.virtual_s, 6), "failure": None if self.failure is None else list(self.failure)}


@dataclass
class Campaign:
    """What a campaign (or one shard of it) ran."""

    root_seed: int
    shard: Shard
    runs: list[RunSummary] = field(default_factory=list)
    cpu_s: float = 0.0
    feedback: bool = False
    biases: dict[int, Bias] = field(default_factory=dict)  # a feedback campaign's bias per run, for its exports
    interrupted: bool = False  # a stop request ended it before its budget

    def bias_of(self, index: int) -> Bias:
        return self.biases.get(index, NO_BIAS)


def failure_class(report: RunReport) -> tuple[str, ...] | None:
    """The invariant a failing run broke, then the kinds of the events that witness it (or the error's type)."""
    if not report.violations:
        return None
    violation = report.violations[0]
    if not violation.witnesses and report.result.error is not None:
        return (violation.invariant, type(unwrap(report.result.error)).__name__)
    history = report.result.history
    return (violation.invariant, *(history[seq].kind for seq in violation.witnesses if 0 <= seq < len(history)))


def workload_of(workloads: Sequence[Workload], index: int) -> Workload:
    return workloads[index % len(workloads)]


def run_generated(workloads: Sequence[Workload], root_seed: int, index: int, bias: Bias = NO_BIAS) -> RunReport:
    """Run `index` of the campaign: generate its scenario and run it once from the scenario's own seed."""
    scenario = generate(workload_of(workloads, index), root_seed, index, bias)
    return run_once(scenario, scenario.explore.seed)


def summarise(workloads: Sequence[Workload], root_seed: int, index: int, report: RunReport,
              bias: Bias = NO_BIAS) -> RunSummary:
    result = report.result
    workload = workload_of(workloads, index)
    marks = signature(result.history, enabled_kinds(workload, root_seed, index, bias))
    return RunSummary(index, workload.name, report.scenario.name, report.seed, result.strategy,
                      result.steps, len(result.history), result.virtual_s, tuple(sorted(report.coverage)),
                      failure_class(report), marks)


def run_indices(workloads: Sequence[Workload], root_seed: int, indices: Iterable[int],
                on_run: Callable[[RunSummary], None] | None = None,
                biases: dict[int, Bias] | None = None, exitfirst: bool = False) -> list[RunSummary]:
    """The summaries of the given runs (each with its bias, if any), in order, inside one wall-clock freeze and one
    batch of the workloads' target (a released one patches threading once for all of them, not once per run);
    with `exitfirst`, up to and including the first that failed."""
    freeze_long_lived()
    summaries = []
    with frozen_time(), targets.batch(workloads[0]):
        for index in indices:
            bias = NO_BIAS if biases is None else biases[index]
            summary = summarise(workloads, root_seed, index, run_generated(workloads, root_seed, index, bias), bias)
            summaries.append(summary)
            if on_run is not None:
                on_run(summary)
            if exitfirst and summary.failure is not None:
                break
    return summaries


def campaign(workloads: Sequence[Workload], root_seed: int, *, shard: Shard = Shard(), runs: int | None = None,
             time_budget_s: float | None = None, jobs: int = 1, feedback: bool = False,
             on_run: Callable[[RunSummary], None] | None = None, exitfirst: bool = False) -> Campaign:
    """Run the shard's share of the campaign: `runs` runs, or as many as `time_budget_s` CPU seconds allow.

    With `jobs` > 1 the shard is split again among worker processes (each takes every jobs-th of the
    shard's runs); the summaries come back in run order, so the result does not depend on `jobs`.
    `exitfirst` stops at the first failing run (one process in run order, so where it stops is fixed).
    """
    if exitfirst and (jobs != 1 or feedback):
        raise ValueError("exitfirst needs one worker process and no feedback: only then is the first failure fixed")
    started = time.process_time()
    done = Campaign(root_seed, shard, feedback=feedback)
    if feedback:
        if shard != Shard():
            raise ValueError(f"a feedback campaign cannot be sharded (shard {shard}): each run depends on the runs before it")
        done.cpu_s = _with_feedback(done, workloads, runs, time_budget_s, jobs, on_run)
    elif jobs == 1:
        indices = stopping.Until(within_budget(shard.seeds(0), runs, time_budget_s))
        done.runs = run_indices(workloads, root_seed, indices, on_run, exitfirst=exitfirst)
        done.interrupted = indices.cut
    else:
        done.runs, done.cpu_s, done.interrupted = _in_workers(workloads, root_seed, shard, runs, time_budget_s, jobs, on_run)
    done.cpu_s += time.process_time() - started
    return done


def _in_workers(workloads: Sequence[Workload], root_seed: int, shard: Shard, runs: int | None, time_budget_s: float | None,
                jobs: int, on_run: Callable[[RunSummary], None] | None) -> tuple[list[RunSummary], float, bool]:
    """Worker `job` runs every jobs-th run of the shard; each summary is heard as it comes, all are kept in index
    order; and the workers' CPU seconds, and whether a stop request cut them short."""
    from sim.swarm.workers import Workers, share_order

    summaries: list[RunSummary] = []
    with Workers(workloads, root_seed, jobs) as workers:
        for job in range(jobs):
            workers.order(job, share_order(Shard(shard.index + shard.count * job, shard.count * jobs),
                                           None if runs is None else len(range(job, runs, jobs)), time_budget_s))
        for summary in workers.answers(range(jobs)):
            summaries.append(summary)
            if on_run is not None:
                on_run(summary)
    return sorted(summaries, key=lambda summary: summary.index), workers.cpu_s, workers.interrupted


def _with_feedback(done: Campaign, workloads: Sequence[Workload], runs: int | None, time_budget_s: float | None,
                   jobs: int, on_run: Callable[[RunSummary], None] | None) -> float:
    """Run batch after batch, each biased by the signatures of all runs before it, until `runs` runs, until
    the CPU seconds spent (this process's and the workers') reach the budget, checked between batches, or
    until a stop request; the workers' CPU seconds. A batch's bias is fixed before it starts, so `jobs`
    changes nothing drawn."""
    from sim.swarm.workers import Workers

    feedback = Feedback()
    started = time.process_time()
    indices = itertools.count() if runs is None else iter(range(runs))
    with Workers(workloads, done.root_seed, jobs) if jobs > 1 else nullcontext() as workers:
        while time_budget_s is None or time.process_time() - started + _cpu_s(workers) < time_budget_s:
            batch = list(itertools.islice(indices, BATCH))
            if not batch:
                break
            if stopping.requested():
                done.interrupted = True
                break
            by_workload = {workload.name: feedback.bias(workload) for workload in workloads}
            biases = {index: by_workload[workload_of(workloads, index).name] for index in batch}
            done.biases.update(biases)
            if workers is None:
                order = stopping.Until(batch)
                summaries = run_indices(workloads, done.root_seed, order, biases=biases)
                done.interrupted = order.cut
            else:
                summaries = _batch_in_workers(workers, batch, biases, jobs)
                done.interrupted = workers.interrupted
            for summary in summaries:
                feedback.add(summary.signature)
                done.runs.append(summary)
                if on_run is not None:
                    on_run(summary)
            if done.interrupted:
                break
    return _cpu_s(workers)


def _cpu_s(workers: Any) -> float:
    return 0.0 if workers is None else workers.cpu_s


def _batch_in_workers(workers: Any, batch: list[int], biases: dict[int, Bias], jobs: int) -> list[RunSummary]:
    """One batch split among the workers (every jobs-th run each), the summaries back in index order."""
    from sim.swarm.workers import batch_order

    parts = {job: batch[job::jobs] for job in range(jobs) if batch[job::jobs]}
    for job, part in parts.items():
        workers.order(job, batch_order(part, biases))
    return sorted(workers.answers(list(parts)), key=lambda summary: summary.index)
