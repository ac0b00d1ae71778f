"""`mutate`: the curated kill matrix, generated operator mutants (`--operators`), or the reviewer's check of a
fix commit in any git repository (`--revert REV`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sim.cli.common import (
    CATALOGUE,
    DEFAULT_OUT,
    EXIT_OK,
    EXIT_VIOLATION,
    UsageError,
    add_json_options,
    coverage_map,
    exit_interrupted,
    load_scenarios,
    positive_int,
    progress,
    speaker,
)
from sim.core import stopping
from sim.core.words import counted

OPERATOR_OPTIONS = ("seed", "budget", "max", "timeout", "min_score", "killers", "swarm", "swarm_runs", "only")
KILLERS = ("catalogue", "swarm", "both")
DEFAULT_SWARM_RUNS = 500
DEFAULT_MUTANT_TIMEOUT_S = 120.0
DEFAULT_MIN_SCORE = 85.0
_STOP_NOTE = "stopping: no further mutant, those in progress left unjudged (press Ctrl+C again to stop at once)"


def _mutate(args: argparse.Namespace) -> int:
    """`--revert REV`: the reviewer's check of a fix commit; `--operators`: generated operator mutants;
    otherwise the curated kill matrix."""
    if args.operators:
        return _mutate_operators(args)
    given = [f"--{name.replace('_', '-')}" for name in OPERATOR_OPTIONS if getattr(args, name) is not None]
    if given:
        raise UsageError(f"{', '.join(given)}: only with --operators")
    if args.revert is None:
        if args.repo or args.paths or args.test_args:
            raise UsageError("--repo, --paths and test arguments need --revert REV")
        return _mutate_curated(args)
    if args.full:
        raise UsageError("--full: only for the curated matrix and --operators, not with --revert")
    from sim.mutation.revert_check import check as revert_check

    return revert_check(args.revert, args.test_args, paths=args.paths, repo=args.repo, as_json=args.json)


def _mutate_curated(args: argparse.Namespace) -> int:
    """Every curated mutant (or the named ones) against the scenarios that reach it, or with `--full` against the
    whole catalogue; exit 1 if one survives, is missed or is reached by no scenario."""
    import time

    from sim.mutation.kill_matrix import kill_matrix, result_json, sanity_pass
    from sim.mutation.mutants import load_mutants, require

    scenarios = load_scenarios(args.scenarios)
    known = load_mutants()
    names = args.mutant_names or sorted(known)
    require(names, known)
    lines = progress(args, len(names))
    with stopping.graceful(_STOP_NOTE):
        lines.say("sanity pass: one scenario with every run forced to fail must be reported as failing")
        problem = sanity_pass(scenarios[0].path)
        if stopping.requested():
            return exit_interrupted(args, 0, "mutant", len(names))
        if problem is not None:
            print(f"{speaker(args)}: sanity pass failed: {problem}", file=sys.stderr)
            return EXIT_VIOLATION
        lines.say("sanity pass: ok")
        started = time.monotonic()
        obtained = None if args.full else coverage_map(scenarios, args.jobs, lines)
        if stopping.requested():
            return exit_interrupted(args, 0, "mutant", len(names))
        selection = "all of them (--full)" if args.full else "those that execute the lines it edits, until its first kill"
        lines.say(f"{counted(len(names), 'mutant')} against {counted(len(scenarios), 'scenario')}, each running {selection}; "
                  f"{args.jobs} at once")
        results = kill_matrix(scenarios, names, args.jobs, args.out, coverage=None if obtained is None else obtained.map,
                              on_done=lambda result: lines.done(_curated_line(result)))
    elapsed = time.monotonic() - started
    interrupted = stopping.requested()
    failed = [r for r in results if r.problem()]
    pairs = sum(len(r.killed_by) + len(r.survived) for r in results)
    figures = {"mutants": len(results), "seconds": round(elapsed, 1), "mutants_per_minute": round(len(results) / elapsed * 60, 1),
               "jobs": args.jobs, "full": args.full, "scenario_runs": pairs,
               "coverage_map": None if obtained is None else {"path": str(obtained.path), "traced": obtained.traced,
                                                               "seconds": round(obtained.seconds, 1)}}
    if args.json:
        print(json.dumps({"sanity": "ok", **figures, "passed": not failed and not interrupted, "interrupted": interrupted,
                          "mutants": [result_json(r) for r in results]}, sort_keys=True))
    else:
        _print_matrix(results, failed, scenarios, figures, elapsed)
    if interrupted:
        return exit_interrupted(args, len(results), "mutant", len(names))
    return EXIT_VIOLATION if failed else EXIT_OK


def _print_matrix(results: Sequence[Any], failed: Sequence[Any], scenarios: Sequence[Any], figures: dict[str, Any],
                  elapsed: float) -> None:
    from sim.mutation.kill_matrix import render_matrix

    print("sanity pass: a forced failure is reported as a failure\n")
    print(render_matrix(results, [s.name for s in scenarios]))
    for result in results:
        if result.killed:
            scenario, command = next(iter(result.killed_by.items()))
            print(f"{result.name}: killed by {scenario} ({result.invariants[scenario]}): {command}")
    for result in failed:
        print(f"{result.name}: {result.problem()}")
    print(f"\n{counted(len(results), 'mutant')} in {elapsed:.1f}s ({figures['mutants_per_minute']} per minute, {figures['jobs']} jobs, "
          f"{figures['scenario_runs']} of {len(results) * len(scenarios)} mutant-scenario pairs run): "
          f"{len(results) - len(failed)} killed as expected, {len(failed)} not")


def _curated_line(result: Any) -> str:
    """A finished mutant's progress line: its verdict, its time, and how many scenarios it ran of those reaching it."""
    ran = len(result.killed_by) + len(result.survived)
    reach = "" if result.reaching is None else f", ran {ran} of the {result.reaching} scenarios that reach it"
    return f"{result.name}: {result.verdict}, {result.seconds:.1f}s{reach}"


def _mutate_operators(args: argparse.Namespace) -> int:
    """Sampled operator mutants against the catalogue; exit 1 when the score is under --min-score."""
    from sim.mutation import operators
    from sim.mutation.kill_matrix import sanity_pass

    if args.revert or args.repo or args.paths or args.test_args or args.mutant_names:
        raise UsageError("--operators takes none of --revert, --repo, --paths, --mutant or test arguments")
    if any(value is not None and value <= 0 for value in (args.budget, args.max, args.timeout)):
        raise UsageError("--budget, --max and --timeout must be positive")
    if args.only is not None and (args.seed is not None or args.max is not None):
        raise UsageError("--only names the mutants itself: it takes neither --seed nor --max")
    if args.only is not None:
        try:
            operators.chosen(operators.all_candidates(operators.reference_sources()), args.only)
        except ValueError as error:
            raise UsageError(f"--only: {error}") from None
    scenarios = load_scenarios(args.scenarios)
    judged_by = args.killers or "catalogue"
    if judged_by == "catalogue" and (args.swarm is not None or args.swarm_runs is not None):
        raise UsageError("--swarm and --swarm-runs need --killers swarm or both")
    killers = operators.Killers(
        scenarios=tuple(map(str, args.scenarios)) if judged_by != "swarm" else (),
        workloads=tuple(args.swarm or ()) if judged_by != "catalogue" else None,
        swarm_runs=args.swarm_runs or DEFAULT_SWARM_RUNS,
    )
    timeout = args.timeout or DEFAULT_MUTANT_TIMEOUT_S
    lines = progress(args, None)
    with stopping.graceful(_STOP_NOTE):
        lines.say(f"sanity pass and baseline: a forced failure must be reported, the unmutated reference must pass ({judged_by})")
        problem = sanity_pass(scenarios[0].path) or operators.baseline_problem(killers, timeout)
        if stopping.requested():
            return exit_interrupted(args, 0, "mutant")
        if problem is not None:
            print(f"{speaker(args)} --operators: {problem}", file=sys.stderr)
            return EXIT_VIOLATION
        selection = None
        if killers.scenarios and not args.full:
            selection = operators.Selection(coverage_map(scenarios, args.jobs, lines).map, tuple(scenarios))
        report = operators.mutate_operators(killers, seed=args.seed or 0, limit=args.max, budget=args.budget,
                                            timeout=timeout, jobs=args.jobs, only=args.only,
                                            on_done=lambda run: lines.done(f"{run.candidate.id}: {run.verdict}, {run.seconds:.1f}s"),
                                            selection=selection)
    if stopping.requested():
        if args.json:
            print(json.dumps({**operators.report_json(report), "passed": False, "interrupted": True}, sort_keys=True))
        else:
            print(operators.render(report))
        return exit_interrupted(args, len(report.runs), "mutant", len(report.launch))
    min_score = DEFAULT_MIN_SCORE if args.min_score is None else args.min_score
    passed = report.score() >= min_score
    if args.json:
        print(json.dumps({**operators.report_json(report), "min_score": min_score, "passed": passed}, sort_keys=True))
    else:
        print("baseline: the catalogue passes on the unmutated reference; a forced failure is reported as a failure\n")
        print(operators.render(report))
        print(f"\n{'passed' if passed else 'FAILED'}: score {report.score():.1f}% against --min-score {min_score:g}%")
    return EXIT_OK if passed else EXIT_VIOLATION


def add_mutate(commands: Any) -> None:
    mutate = commands.add_parser("mutate", help="mutation checks: the curated kill matrix, --operators for generated mutants, or --revert REV to "
                                                "check a fix commit the way reviewers do")
    mutate.add_argument("--mutant", dest="mutant_names", nargs="+", metavar="NAME", help="curated: only these mutants (default: all)")
    mutate.add_argument("--scenarios", nargs="+", default=[CATALOGUE], metavar="PATH",
                        help="curated and operators: the catalogue (default: the scenarios/ shipped with this package)")
    mutate.add_argument("-j", "--jobs", type=positive_int, default=os.cpu_count() or 1, help="curated and operators: mutants run at once")
    mutate.add_argument("--full", action="store_true",
                        help="curated and operators: run each mutant against the whole catalogue, not only the scenarios "
                             "that execute the lines it edits (and, for curated mutants, not only until the first kill)")
    mutate.add_argument("--out", type=Path, default=DEFAULT_OUT / "mutants", metavar="DIR", help="curated: where killers' repro files go")
    mutate.add_argument("--revert", metavar="REV", help="the fix commit: revert its non-test files, expect the tests to fail")
    mutate.add_argument("--paths", nargs="+", metavar="GLOB", help="revert only REV's files matching these fnmatch globs")
    mutate.add_argument("--repo", metavar="DIR", help="the git repository (default: the current directory's)")
    add_json_options(mutate)
    mutate.add_argument("test_args", nargs=argparse.REMAINDER, metavar="-- TEST_ARGS", help="pytest arguments: test files or folders and options")
    _add_operator_options(mutate)
    mutate.set_defaults(handler=_mutate)


def _add_operator_options(mutate: argparse.ArgumentParser) -> None:
    mutate.add_argument("--operators", action="store_true", help="generated operator mutants of reference/, scored by the catalogue")
    mutate.add_argument("--seed", type=int, help="operators: the sample's seed (default 0)")
    mutate.add_argument("--max", type=positive_int, metavar="N", help="operators: sample at most N mutants (default: every candidate)")
    mutate.add_argument("--budget", type=float, metavar="SECONDS", help="operators: launch no mutant after this much wall time (default: no limit)")
    mutate.add_argument("--timeout", type=float, metavar="SECONDS",
                        help=f"operators: a catalogue run longer than this is a kill by timeout (default {DEFAULT_MUTANT_TIMEOUT_S:g})")
    mutate.add_argument("--killers", choices=KILLERS,
                        help="operators: what judges each mutant: the catalogue, generated swarm runs, or both (default catalogue)")
    mutate.add_argument("--swarm", nargs="*", metavar="PATH",
                        help="operators: the swarm workloads for --killers swarm/both (default: scenarios/swarm/)")
    mutate.add_argument("--swarm-runs", type=positive_int, metavar="N",
                        help=f"operators: generated runs per mutant for --killers swarm/both (default {DEFAULT_SWARM_RUNS})")
    mutate.add_argument("--only", nargs="+", metavar="ID",
                        help="operators: judge only these candidate ids (<file>:<line>:<col>:<operator>, as a report names them), not a sample")
    mutate.add_argument("--min-score", type=float, metavar="PERCENT", help=f"operators: exit 1 below this mutation score (default {DEFAULT_MIN_SCORE:g})")


def _trace_lines(args: argparse.Namespace) -> int:
    """The reference lines each scenario's runs execute, and those loading them executes (the coverage map's part)."""
    from sim.mutation.coverage_map import trace_document

    print(json.dumps(trace_document(args.paths), sort_keys=True))
    return EXIT_OK


def add_trace_lines(commands: Any) -> None:
    """The internal command `mutate` runs to build its coverage map, on a share of the catalogue."""
    trace = commands.add_parser("trace-lines")
    trace.add_argument("paths", nargs="+", type=Path)
    trace.add_argument("--json", action="store_true")
    trace.set_defaults(handler=_trace_lines)
