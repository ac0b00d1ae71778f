"""`run`: scenario files or folders over their seeds, with a verdict table; failures get a repro, are shrunk
and can be written as an HTML report. With `--must-fail-under`, each scenario's claims are checked too: under
every mutant it names, it must report a violation (one whose runs never execute the lines the mutant edits
cannot, and is reported so without being run: sim/mutation/coverage_map.py)."""

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
    STRATEGY_CHOICES,
    UsageError,
    add_json_options,
    add_mutant_option,
    add_report_option,
    add_target_option,
    coverage_map,
    exit_interrupted,
    load_scenarios,
    positive_int,
    progress,
    rerun_on_target,
    seed_int,
    speaker,
    write_html,
)
from sim.cli.progress import Throttled
from sim.core import stopping
from sim.core.words import counted

AUTO_SHRINK_LIMIT_S = 10.0  # `run` shrinks each failure on the way; a longer search is `shrink --time-limit`


def _run(args: argparse.Namespace) -> int:
    from sim.reports import text_report

    if args.must_fail_under and args.under_mutant:
        raise UsageError("--must-fail-under runs each scenario under the mutants it names, so it takes no --mutant")
    scenarios = load_scenarios(args.paths or [CATALOGUE], args.target)
    elsewhere = rerun_on_target(scenarios, args.argv)
    if elsewhere is not None:
        return elsewhere
    lines = progress(args, len(scenarios))
    verdicts, documents, blocks, failures = [], [], [], []
    with stopping.graceful():
        for scenario in scenarios:
            if stopping.requested():
                break
            scenario = _with_strategy(scenario, args.strategy or scenario.explore.strategy)
            scenario = _with_all_invariants(scenario) if args.all_invariants else scenario
            verdict = _check(args, scenario)
            verdicts.append(verdict)
            lines.done(f"{scenario.name}: {text_report.verdict_state(verdict, verdict.passed)}, {verdict.runs} runs, {verdict.cpu_s:.2f}s")
            repro = shrunk = None
            if verdict.failing is not None:
                repro = text_report.write_repro(verdict.failing, args.out, mutant=args.under_mutant)
                blocks.append(text_report.failure_block(verdict.failing, repro, mutant=args.under_mutant))
                failures.append((verdict.failing, repro))
                if not args.no_shrink and not stopping.requested():  # a user who asked to stop waits for no search
                    shrunk = _auto_shrink(verdict.failing, repro, args.out, args.under_mutant)
                blocks += [] if shrunk is None else [shrunk.summary()]
            if args.trace_out is not None and verdict.failing is not None:
                _write_trace(verdict.failing, args.trace_out)
            documents.append((verdict, repro, shrunk))
            if args.stop_at_violation and verdict.failing is not None:
                break
        stopped_early = args.stop_at_violation and failures
        interrupted = (len(verdicts) < len(scenarios) and not stopped_early) or any(verdict.interrupted for verdict in verdicts)
        claims = _check_claims(scenarios, args) if args.must_fail_under and not interrupted else {}
        interrupted = interrupted or stopping.requested()  # the claims' mutants were stopped part-way
    if args.report is not None:
        _report_first_failure(args.report, failures, args.under_mutant)
    failed = [v for v in verdicts if not v.passed or claims.get(v.scenario.name)]
    if args.json:
        print(json.dumps({"scenarios": [_verdict_document(args, claims, *entry) for entry in documents],
                          "passed": not failed and not interrupted, "interrupted": interrupted}, sort_keys=True))
    else:
        print(text_report.verdict_table(verdicts, claims))
        for verdict in failed:
            print(f"\n{verdict.scenario.name}: " + "; ".join(verdict.problems() + claims.get(verdict.scenario.name, [])))
        for block in blocks:
            print("\n" + block)
        print("\n" + _counts(verdicts, failed, len(scenarios) if interrupted else None))
    if interrupted:
        return exit_interrupted(args, sum(verdict.runs for verdict in verdicts))
    return EXIT_VIOLATION if failed else EXIT_OK


def _counts(verdicts: Sequence[Any], failed: Sequence[Any], scenarios: int | None) -> str:
    """`2 passed, 1 failed`; after an interrupt (`scenarios` given), also those stopped part-way and not run."""
    if scenarios is None:
        return f"{len(verdicts) - len(failed)} passed, {len(failed)} failed"
    stopped = [v for v in failed if v.interrupted and not v.violating_runs]
    return (f"{len(verdicts) - len(failed)} passed, {len(failed) - len(stopped)} failed, {len(stopped)} stopped part-way, "
            f"{scenarios - len(verdicts)} not run")


def _check(args: argparse.Namespace, scenario: Any) -> Any:
    """One scenario's exploration, with a line now and then while it lasts (a long one says it is alive)."""
    from sim.scenario.runner import check

    alive = Throttled(speaker(args), enabled=not args.json or args.progress)
    return check(scenario, runs=args.runs, seed=args.seed, force_fail=args.force_fail,
                 on_run=lambda run: alive.done(f"{scenario.name}: {alive.count + 1} runs so far, latest seed {run.seed}"))


def _verdict_document(args: argparse.Namespace, claims: dict[str, list[str]], verdict: Any, repro: Path | None, shrunk: Any) -> dict[str, Any]:
    from sim.reports import text_report

    document = text_report.verdict_json(verdict, repro, mutant=args.under_mutant, more_problems=claims.get(verdict.scenario.name, []))
    return {**document, "shrink": None if shrunk is None else shrunk.as_dict()}


def _check_claims(scenarios: Sequence[Any], args: argparse.Namespace) -> dict[str, list[str]]:
    """Each scenario under each mutant its `must_fail_under` names: scenario -> the claims that do not hold."""
    from sim.mutation.kill_matrix import claim_problems, claimed_mutants, kill_matrix
    from sim.mutation.mutants import load_mutants, require

    names = claimed_mutants(scenarios)
    require(names, load_mutants())
    lines = progress(args, len(names))
    coverage = coverage_map(scenarios, args.jobs, lines).map
    lines.say(f"checking must_fail_under: {counted(len(names), 'mutant')}, each in its own process, against its claimers "
              f"that execute the lines it edits")
    results = kill_matrix(scenarios, names, args.jobs, args.out / "mutants", claims_only=True, coverage=coverage,
                          on_done=lambda result: lines.done(f"mutant {result.name}: killed {len(result.killed_by)} of "
                                                            f"{len(result.expected)} claiming scenarios"))
    return claim_problems(results)


def _with_strategy(scenario: Any, strategy: str) -> Any:
    import dataclasses

    return dataclasses.replace(scenario, explore=dataclasses.replace(scenario.explore, strategy=strategy))


def _with_all_invariants(scenario: Any) -> Any:
    import dataclasses

    return dataclasses.replace(scenario, expect=dataclasses.replace(scenario.expect, invariants="all"))


def _write_trace(failing: Any, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{failing.scenario.name}-seed{failing.seed}.jsonl").write_text(failing.result.trace_jsonl(), encoding="utf-8")


def _auto_shrink(failing: Any, repro: Path, out: Path, mutant: str | None) -> Any:
    from sim.shrinking.scenario_shrinker import shrink

    return shrink(failing.scenario, failing.seed, failing.result.decisions, failing.violations[0].invariant,
                  source=repro, out_dir=out, time_limit=AUTO_SHRINK_LIMIT_S, mutant=mutant)


def _report_first_failure(path: Path, failures: Sequence[tuple[Any, Path]], mutant: str | None) -> None:
    from sim.reports import text_report

    if not failures:
        print(f"--report: every run held, so {path} was not written", file=sys.stderr)
        return
    failing, repro = failures[0]
    write_html(path, failing, text_report.replay_command(repro, mutant), mutant)


def add_run(commands: Any) -> None:
    run = commands.add_parser("run", help="run scenario files or folders and print a verdict table")
    run.add_argument("paths", nargs="*", default=[], metavar="PATH", help="scenario files or folders (default: the catalogue)")
    run.add_argument("--seed", type=seed_int, help="first seed (default: the scenario's)")
    run.add_argument("--runs", type=positive_int, help="runs per scenario (default: the scenario's)")
    run.add_argument("--strategy", choices=STRATEGY_CHOICES, help="exploration strategy (default: the scenario's, else portfolio)")
    add_json_options(run)
    run.add_argument("--trace-out", type=Path, metavar="DIR", help="write the JSONL trace of each failing run here")
    run.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="where repro files go (default: out/)")
    run.add_argument("--no-shrink", action="store_true", help=f"do not shrink each failing run (by default each gets up to {AUTO_SHRINK_LIMIT_S:g}s)")
    run.add_argument("--must-fail-under", action="store_true",
                     help="also check each scenario's must_fail_under: under every mutant it names (its own seeds and runs), "
                          "it must report a violation")
    run.add_argument("-j", "--jobs", type=positive_int, default=os.cpu_count() or 1, help="--must-fail-under: mutants run at once")
    run.add_argument("--force-fail", action="store_true", help=argparse.SUPPRESS)  # mutate's sanity pass: every run fails
    run.add_argument("--all-invariants", action="store_true", help=argparse.SUPPRESS)  # a claim's check: which invariants fire
    # mutate's first kill: no scenario after the first whose runs report a violation
    run.add_argument("--stop-at-violation", action="store_true", help=argparse.SUPPRESS)
    add_report_option(run, "the first failing run")
    add_mutant_option(run)
    add_target_option(run)
    run.set_defaults(handler=_run)
