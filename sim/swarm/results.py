"""A campaign's results document, and the merge of shard results into one verdict.

The document is what CI keeps from each shard: runs, CPU seconds, each run's size and failure class, the
coverage marks reached (with how many runs reached each), the signature marks reached (event-kind pairs,
fault kind at point, invariant checks with something to judge, kinds enabled; with how many runs reached
each, and how many of each family), whether the campaign used coverage feedback, and the failures deduplicated by class, each with
the exported scenario, its repro and the command that replays it. `merge` folds shard documents into the
document one unsharded campaign would have written (CPU seconds summed; each failure class keeps the
example from its lowest run index). A campaign stopped by the user (Ctrl+C) writes its document too, with
the runs it finished; `interrupted` names its shard, and a merge that holds one does not pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sim.swarm.campaign import Campaign
from sim.swarm.generated_runs import RunSummary, class_key
from sim.swarm.signature import family_counts

FORMAT = 2  # 2: the signature marks and the feedback flag


def failure_classes(runs: Sequence[RunSummary]) -> dict[tuple[str, ...], list[RunSummary]]:
    """Failing runs grouped by class, classes in order of their first run."""
    classes: dict[tuple[str, ...], list[RunSummary]] = {}
    for run in sorted(runs, key=lambda run: run.index):
        if run.failure is not None:
            classes.setdefault(run.failure, []).append(run)
    return classes


def document(done: Campaign, workloads: Sequence[str], exported: Mapping[tuple[str, ...], Mapping[str, Any]],
             *, mutant: str | None, target: str = "reference", coverage_expected: Iterable[str] = (), known: Iterable[tuple[str, ...]] = ()) -> dict[str, Any]:
    """The results of a campaign or shard; `exported` gives each failure class's files and replay command.

    A class in `known` (a baseline's, see `known_classes`) is reported but does not fail the verdict: a
    campaign under a mutant then fails only on what the mutant added, and CI only on new finds.
    """
    known = set(known)
    failures = [{**_failure(key, runs), "known": key in known, **exported.get(key, {})}
                for key, runs in failure_classes(done.runs).items()]
    return _finish({
        "format": FORMAT,
        "root_seed": done.root_seed,
        "shards": [f"{done.shard.index + 1}/{done.shard.count}"],
        "workloads": list(workloads),
        "mutant": mutant,
        "target": target,
        "feedback": done.feedback,
        "interrupted": [f"{done.shard.index + 1}/{done.shard.count}"] if done.interrupted else [],
        "cpu_s": round(done.cpu_s, 3),
        "per_run": [run.as_dict() for run in done.runs],
        "coverage": dict(sorted(Counter(mark for run in done.runs for mark in run.coverage).items())),
        "signature": dict(sorted(Counter(mark for run in done.runs for mark in run.signature).items())),
        "coverage_expected": sorted(set(coverage_expected)),
        "failures": failures,
    })


def _failure(key: tuple[str, ...], runs: Sequence[RunSummary]) -> dict[str, Any]:
    first = runs[0]
    return {"invariant": key[0], "witnesses": list(key[1:]), "runs": len(runs), "first_run": first.index,
            "workload": first.workload, "scenario_name": first.scenario, "seed": first.seed}


def _finish(document: dict[str, Any]) -> dict[str, Any]:
    """The totals and the verdict, derived from the per-run records (the same for a merge)."""
    runs = document["per_run"]
    missing = [mark for mark in document["coverage_expected"] if mark not in document["coverage"]]
    document.update(
        runs=len(runs),
        steps=sum(run["steps"] for run in runs),
        events=sum(run["events"] for run in runs),
        virtual_s=round(sum(run["virtual_s"] for run in runs), 6),
        failing_runs=sum(run["failure"] is not None for run in runs),
        coverage_missing=missing,
        signature_reached=family_counts(document["signature"]),
        new_failures=sum(not failure["known"] for failure in document["failures"]),
    )
    document["passed"] = not document["new_failures"] and not missing and not document["interrupted"]
    return document


def known_classes(baseline: Mapping[str, Any]) -> set[tuple[str, ...]]:
    """The failure classes a results document reported: what a later campaign may call known (folded as a campaign
    keys them now, so a baseline written before the fold still knows its classes)."""
    return {class_key(failure["invariant"], failure["witnesses"]) for failure in baseline["failures"]}


def merge(documents: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Shard documents of one campaign (same root seed, workloads and mutant) as one document."""
    first = documents[0]
    for other in documents[1:]:
        for key in ("format", "root_seed", "workloads", "mutant", "target", "feedback"):
            if other.get(key, "reference") != first.get(key, "reference"):
                raise ValueError(f"the results disagree on {key}: {first.get(key)!r} and {other.get(key)!r} (not shards of one campaign)")
    runs = sorted((run for doc in documents for run in doc["per_run"]), key=lambda run: run["run"])
    repeated = [a["run"] for a, b in zip(runs, runs[1:]) if a["run"] == b["run"]]
    if repeated:
        raise ValueError(f"run {repeated[0]} appears in two results (a shard merged twice?)")
    failures: dict[tuple[Any, ...], dict[str, Any]] = {}
    for failure in sorted((f for doc in documents for f in doc["failures"]), key=lambda f: f["first_run"]):
        witnessed = (failure["invariant"], *failure["witnesses"])
        if witnessed in failures:
            failures[witnessed]["runs"] += failure["runs"]
        else:
            failures[witnessed] = dict(failure)
    coverage: Counter[str] = Counter()
    signature: Counter[str] = Counter()
    for doc in documents:
        coverage.update(doc["coverage"])
        signature.update(doc["signature"])
    return _finish({
        "format": first["format"],
        "root_seed": first["root_seed"],
        "shards": sorted(shard for doc in documents for shard in doc["shards"]),
        "workloads": first["workloads"],
        "mutant": first["mutant"],
        "target": first.get("target", "reference"),
        "feedback": first["feedback"],
        "interrupted": sorted(shard for doc in documents for shard in doc.get("interrupted", [])),
        "cpu_s": round(sum(doc["cpu_s"] for doc in documents), 3),
        "per_run": runs,
        "coverage": dict(sorted(coverage.items())),
        "signature": dict(sorted(signature.items())),
        "coverage_expected": first["coverage_expected"],
        "failures": list(failures.values()),
    })
