"""A generated run of a campaign and its summary, and the runs of a list of indices in order.

Run `i` of a campaign uses workload `i mod W` (W workloads, in the order given) and is generated from
(root seed, i) alone, so any process can run any run: the campaign's own, or a `-j` worker's. A run is summarised
by what a reader of the results needs: its size (steps, events, virtual seconds), the coverage marks it reached,
and its failure class, the violated invariant with the kinds of its witnessing events, a run of one kind counted
once (for a run that did not complete, the exception that ended it), so a thousand runs that hit the same bug read as
one failure however many rows each one's witnesses name; and its
signature (`sim.swarm.signature`), what it reached in finer grain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sim.core.heap import freeze_long_lived
from sim.core.search import Searched, search
from sim.kernel.errors import unwrap
from sim.scenario import targets
from sim.scenario.runner import RunReport, run_once
from sim.swarm.feedback import NO_BIAS, Bias
from sim.swarm.generate import enabled_kinds, generate
from sim.swarm.signature import signature
from sim.swarm.workload_model import Workload


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


def failure_class(report: RunReport) -> tuple[str, ...] | None:
    """The invariant a failing run broke, then the kinds of the events that witness it (or the error's type)."""
    if not report.violations:
        return None
    violation = report.violations[0]
    if not violation.witnesses and report.result.error is not None:
        return (violation.invariant, type(unwrap(report.result.error)).__name__)
    history = report.result.history
    return class_key(violation.invariant, (history[seq].kind for seq in violation.witnesses if 0 <= seq < len(history)))


def class_key(invariant: str, witness_kinds: Iterable[str]) -> tuple[str, ...]:
    """A failure class: the invariant, then its witnesses' kinds, a run of one kind counted once. How many rows an
    aborted attempt had appended, or how often a write was retried, differs from run to run of one bug; which kinds
    witness it, in which order, does not."""
    kinds: list[str] = []
    for kind in witness_kinds:
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    return (invariant, *kinds)


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


def run_indices(workloads: Sequence[Workload], root_seed: int, indices: Iterable[int], *, runs: int | None = None,
                time_budget_s: float | None = None, on_run: Callable[[RunSummary], None] | None = None,
                biases: dict[int, Bias] | None = None,
                exitfirst: bool = False) -> tuple[list[RunSummary], Searched[RunSummary]]:
    """The summaries of the given runs (each with its bias, if any), in order, within `runs` runs or `time_budget_s`
    CPU seconds, in one batch of the workloads' target (a released one patches threading once for all of them, not
    once per run); with `exitfirst`, up to and including the first that failed. And what the search did: its CPU
    seconds, and whether a stop request ended it."""
    freeze_long_lived()
    summaries: list[RunSummary] = []

    def one(index: int) -> RunSummary:
        bias = NO_BIAS if biases is None else biases[index]
        return summarise(workloads, root_seed, index, run_generated(workloads, root_seed, index, bias), bias)

    def heard(summary: RunSummary) -> None:
        summaries.append(summary)
        if on_run is not None:
            on_run(summary)

    searched = search(indices, one, runs=runs, time_budget_s=time_budget_s, on_run=heard, batch=targets.batch(workloads[0]),
                      until=lambda summary: exitfirst and summary.failure is not None)
    return summaries, searched
