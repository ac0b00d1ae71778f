"""`swarm`: generated workloads run as a campaign (sharded, in parallel, under a mutant), with one results
document; and `merge`, which folds the results of a campaign's shards into one verdict."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sim.cli.common import (
    DEFAULT_OUT,
    EXIT_OK,
    EXIT_VIOLATION,
    UsageError,
    add_json_options,
    add_mutant_option,
    add_target_option,
    exit_interrupted,
    positive_int,
    rerun_on_target,
    seed_int,
    speaker,
)
from sim.cli.explore import parse_shard
from sim.cli.progress import Progress, Throttled
from sim.core import stopping
from sim.scenario import targets

SHRINK_LIMIT_S = 10.0


def default_workloads() -> str:
    from sim.scenario.catalogue import SCENARIOS_DIR

    return str(Path(SCENARIOS_DIR) / "swarm")


def _swarm(args: argparse.Namespace) -> int:
    """Run the campaign's shard; exit 1 if a run broke an invariant or an expected coverage mark was missed."""
    from sim.scenario.names import registry
    from sim.swarm.campaign import campaign
    from sim.swarm.workload_loader import load_workloads

    paths = args.paths or [default_workloads()]
    missing = [path for path in paths if not Path(path).exists()]
    if missing:
        raise UsageError(f"{missing[0]}: no such workload file or folder (the default is {default_workloads()})")
    if args.time_budget is not None and args.time_budget <= 0:
        raise UsageError(f"--time-budget: expected a positive number, got {args.time_budget:g}")
    shard = parse_shard(args.shard)
    if args.exitfirst and (args.jobs != 1 or args.feedback):
        raise UsageError("--exitfirst stops at the first failing run in run order: it needs -j 1 and no --feedback")
    if args.feedback and shard.count != 1:
        raise UsageError(f"--feedback with --shard {args.shard}: a feedback campaign cannot be sharded (each run depends on the runs before it)")
    workloads = load_workloads([Path(path) for path in paths], registry(), _target(args.target))
    elsewhere = rerun_on_target(workloads, args.argv)
    if elsewhere is not None:
        return elsewhere
    if args.under_mutant and workloads[0].target != targets.REFERENCE:
        raise UsageError(f"--mutant reverts a fix of the reference; {workloads[0].target} is run as released")
    for workload in workloads:
        if workload.cuts:
            print(f"{speaker(args)}: {workload.name} on {workload.target} leaves out what it cannot take: "
                  + "; ".join(map(str, workload.cuts)), file=sys.stderr)
    runs = args.runs if args.runs is not None or args.time_budget is not None else workloads[0].swarm.runs
    lines = _progress(args, runs)
    with stopping.graceful():
        done = campaign(workloads, args.seed, shard=shard, runs=runs, time_budget_s=args.time_budget,
                        jobs=args.jobs, feedback=args.feedback, on_run=lambda run: lines.done(_run_line(run)),
                        exitfirst=args.exitfirst)
        result = _results(done, workloads, args, lines)
        _write_results(result, args)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(_text(result))
    if done.interrupted:
        return exit_interrupted(args, len(done.runs))
    return EXIT_OK if result["passed"] else EXIT_VIOLATION


def _target(given: str | None) -> str | None:
    """The --target, checked (a bad name is a usage error naming it)."""
    if given is None:
        return None
    try:
        return targets.parse(given)
    except ValueError as error:
        raise UsageError(f"--target {error}") from None


def _progress(args: argparse.Namespace, runs: int | None) -> Progress:
    enabled = not args.json or args.progress
    command = speaker(args)
    return Progress(command, runs, enabled=enabled) if runs is not None else Throttled(command, enabled=enabled)


def _run_line(run: Any) -> str:
    verdict = "ok" if run.failure is None else "FAIL " + run.failure[0]
    return f"run {run.index} ({run.workload}, {run.strategy}): {verdict}, {run.steps} steps, {run.virtual_s:.0f}s virtual"


def _results(done: Any, workloads: Sequence[Any], args: argparse.Namespace, lines: Progress) -> dict[str, Any]:
    """The results document, with each failure class's first run exported as a scenario file (and shrunk)."""
    from sim.swarm import results
    from sim.swarm.generated_runs import workload_of

    exported = {}
    for key, runs in results.failure_classes(done.runs).items():
        first = runs[0]
        lines.say(f"exporting run {first.index} ({key[0]})")
        exported[key] = _export(workload_of(workloads, first.index), args, first.index, key[0], done.bias_of(first.index))
    expected = {mark for workload in workloads for mark in workload.expect.coverage}
    known = set() if args.baseline is None else results.known_classes(_read_results(args.baseline))
    return results.document(done, [workload.name for workload in workloads], exported, mutant=args.under_mutant,
                            target=workloads[0].target, coverage_expected=expected, known=known)


def _export(workload: Any, args: argparse.Namespace, index: int, invariant: str, bias: Any) -> dict[str, Any]:
    from sim.swarm.export import export_run

    out = args.out / "swarm"
    exported = export_run(workload, args.seed, index, invariant, out, mutant=args.under_mutant, bias=bias)
    found: dict[str, Any] = {"scenario": str(exported.scenario), "repro": str(exported.repro), "replay": exported.replay(args.under_mutant),
             "explanation": exported.report.violations[0].explanation}
    if args.shrink and not stopping.requested():  # a user who asked to stop waits for no search
        found["shrunk"] = _shrunk(exported, invariant, out, args.under_mutant)
    return found


def _shrunk(exported: Any, invariant: str, out: Path, mutant: str | None) -> dict[str, Any]:
    from sim.shrinking.scenario_shrinker import shrink

    report = exported.report
    result = shrink(report.scenario, report.seed, report.result.decisions, invariant, source=exported.repro, out_dir=out,
                    time_limit=SHRINK_LIMIT_S, mutant=mutant)
    return result.as_dict()


def _write_results(result: dict[str, Any], args: argparse.Namespace) -> None:
    """The results file CI keeps per shard and `merge` reads."""
    args.out.mkdir(parents=True, exist_ok=True)
    shard = args.shard.replace("/", "of")
    path = args.out / f"swarm-seed{args.seed}-shard{shard}.json"
    path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"results: {path}", file=sys.stderr)


def _text(result: dict[str, Any]) -> str:
    shards = ", ".join(result["shards"])
    lines = [f"swarm: root seed {result['root_seed']}, shard {shards}: {result['runs']} runs, {result['steps']} steps, "
             f"{result['events']} events, {result['virtual_s']:.0f}s virtual, {result['cpu_s']:.2f}s CPU; "
             f"{result['failing_runs']} failing runs in {len(result['failures'])} classes ({result['new_failures']} new); "
             f"{len(result['coverage'])} coverage marks reached"]
    reached = result["signature_reached"]
    lines.append(f"reached{' (with coverage feedback)' if result['feedback'] else ''}: {reached['pair']} event-kind pairs, "
                 f"{reached['fault']} fault kinds at points, {reached['check']} invariant checks with something to judge")
    for failure in result["failures"]:
        witnesses = ", ".join(failure["witnesses"]) or "no witnesses"
        verdict = "known" if failure["known"] else "FAIL"
        lines += ["", f"{verdict} {failure['invariant']} ({witnesses}): {failure['runs']} runs, first run {failure['first_run']} "
                      f"({failure['workload']})"]
        if "explanation" in failure:
            lines += [f"  {failure['explanation']}", f"  scenario: {failure['scenario']}", f"  replay: {failure['replay']}"]
        if "shrunk" in failure:
            shrunk = failure["shrunk"]
            lines.append(f"  shrunk: {shrunk['after']['faults']} faults, {shrunk['after']['drives']} drives: {shrunk['scenario']}")
    lines += [f"  note: coverage mark {mark} never reached" for mark in result["coverage_missing"]]
    lines += [f"  note: shard {shard} was interrupted before the end of its runs" for shard in result["interrupted"]]
    lines.append("\n" + _verdict(result))
    return "\n".join(lines)


def _verdict(result: dict[str, Any]) -> str:
    if result["passed"]:
        return "pass"
    return "FAIL" if result["new_failures"] or result["coverage_missing"] else "incomplete: interrupted"


def _merge(args: argparse.Namespace) -> int:
    """Fold shard results into one verdict: exit 0 if the whole campaign passed, 1 if not."""
    from sim.swarm.results import merge

    documents = [_read_results(Path(path)) for path in args.results]
    try:
        result = merge(documents)
    except ValueError as error:
        raise UsageError(str(error)) from None
    print(json.dumps(result, sort_keys=True) if args.json else _text(result))
    return EXIT_OK if result["passed"] else EXIT_VIOLATION


def _read_results(path: Path) -> dict[str, Any]:
    from sim.swarm.results import FORMAT

    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"{path}: cannot read it ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise UsageError(f"{path}: expected a swarm results file (JSON), got invalid JSON: {error.msg}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT or "per_run" not in document:
        raise UsageError(f"{path}: expected a swarm results file (format {FORMAT}) written by python -m sim swarm")
    return document


def add_swarm(commands: Any) -> None:
    swarm = commands.add_parser("swarm", help="run generated workloads with random faults, sharded, and report failures")
    swarm.add_argument("paths", nargs="*", default=[], metavar="PATH",
                       help="workload files or folders (default: the catalogue's scenarios/swarm/)")
    budget = swarm.add_mutually_exclusive_group()
    budget.add_argument("--runs", type=positive_int, help="runs in this shard (default: the first workload's swarm.runs)")
    budget.add_argument("--time-budget", type=float, metavar="SECONDS", help="run for this many CPU seconds")
    swarm.add_argument("--seed", type=seed_int, default=0, help="root seed of the campaign (default 0)")
    swarm.add_argument("--shard", default="1/1", metavar="I/N", help="run indices I-1, I-1+N, ...: shards 1/N..N/N never repeat a run")
    swarm.add_argument("-j", "--jobs", type=positive_int, default=1, help="worker processes (default 1)")
    swarm.add_argument("--feedback", action="store_true",
                       help="bias each batch of runs toward the fault points and kinds the runs before it left unreached "
                            "(deterministic for any -j; not with --shard)")
    swarm.add_argument("--baseline", type=Path, metavar="RESULT.json",
                       help="failure classes these results reported are known: reported, but only new ones fail (exit 1)")
    swarm.add_argument("-x", "--exitfirst", action="store_true",
                       help="stop at the first failing run (with -j 1 and no --feedback)")
    swarm.add_argument("--shrink", action="store_true", help=f"shrink each failure class's first run (up to {SHRINK_LIMIT_S:g}s each)")
    add_json_options(swarm)
    swarm.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR",
                       help="where the results file and the failures' scenario and repro files go (default: out/)")
    add_mutant_option(swarm)
    add_target_option(swarm)
    swarm.set_defaults(handler=_swarm)


def _swarm_worker(args: argparse.Namespace) -> int:
    """One of a campaign's `-j` workers: the orders come on stdin, the runs' summaries go out on stdout."""
    from sim.scenario.names import registry
    from sim.swarm.workers import answer_channel, serve
    from sim.swarm.workload_loader import load_workloads

    workloads = load_workloads([Path(path) for path in args.paths], registry(), args.target)
    return serve(workloads, args.root, sys.stdin, answer_channel())


def add_swarm_worker(commands: Any) -> None:
    """The internal command each `swarm -j N` worker process runs (sim.swarm.workers)."""
    worker = commands.add_parser("swarm-worker")
    worker.add_argument("paths", nargs="+")
    worker.add_argument("--root", type=int, required=True)
    worker.add_argument("--target")  # the campaign's, parsed; this process was started with it loaded
    worker.set_defaults(handler=_swarm_worker)


def add_merge(commands: Any) -> None:
    merge = commands.add_parser("merge", help="fold the results of swarm shards into one verdict")
    merge.add_argument("results", nargs="+", metavar="RESULT.json", help="results files written by python -m sim swarm")
    merge.add_argument("--json", action="store_true", help="print the merged results as one JSON document")
    merge.set_defaults(handler=_merge)
