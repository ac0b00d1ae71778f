"""`run`: scenario files or folders over their seeds, with a verdict table; failures get a repro, are shrunk
and can be written as an HTML report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from sim.cli.common import (
    DEFAULT_OUT, EXIT_OK, EXIT_VIOLATION, STRATEGY_CHOICES, add_mutant_option, add_report_option, load_scenarios,
    write_html,
)

AUTO_SHRINK_LIMIT_S = 10.0  # `run` shrinks each failure on the way; a longer search is `shrink --time-limit`


def _run(args: argparse.Namespace) -> int:
    from sim import report
    from sim.scenario.runner import check

    scenarios = load_scenarios(args.paths)
    verdicts, documents, blocks, failures = [], [], [], []
    for scenario in scenarios:
        scenario = _with_strategy(scenario, args.strategy or scenario.explore.strategy)
        verdict = check(scenario, runs=args.runs, seed=args.seed)
        verdicts.append(verdict)
        repro = shrunk = None
        if verdict.failing is not None:
            repro = report.write_repro(verdict.failing, args.out)
            blocks.append(report.failure_block(verdict.failing, repro))
            failures.append((verdict.failing, repro))
            shrunk = None if args.no_shrink else _auto_shrink(verdict.failing, repro, args.out)
            blocks += [] if shrunk is None else [shrunk.summary()]
        if args.trace_out is not None and verdict.failing is not None:
            _write_trace(verdict.failing, args.trace_out)
        documents.append({**report.verdict_json(verdict, repro), "shrink": None if shrunk is None else shrunk.as_dict()})
        if not args.json and sys.stderr.isatty():
            print(f"  {scenario.name}: {'pass' if verdict.passed else 'FAIL'}", file=sys.stderr)
    if args.report is not None:
        _report_first_failure(args.report, failures)
    failed = [v for v in verdicts if not v.passed]
    if args.json:
        print(json.dumps({"scenarios": documents, "passed": not failed}, sort_keys=True))
    else:
        print(report.verdict_table(verdicts))
        for verdict in failed:
            print(f"\n{verdict.scenario.name}: " + "; ".join(verdict.problems()))
        for block in blocks:
            print("\n" + block)
        print(f"\n{len(verdicts) - len(failed)} passed, {len(failed)} failed")
    return EXIT_VIOLATION if failed else EXIT_OK


def _with_strategy(scenario: Any, strategy: str) -> Any:
    import dataclasses

    return dataclasses.replace(scenario, explore=dataclasses.replace(scenario.explore, strategy=strategy))


def _write_trace(failing: Any, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{failing.scenario.name}-seed{failing.seed}.jsonl").write_text(failing.result.trace_jsonl(), encoding="utf-8")


def _auto_shrink(failing: Any, repro: Path, out: Path) -> Any:
    from sim.shrink import shrink

    return shrink(failing.scenario, failing.seed, failing.result.decisions, failing.violations[0].invariant,
                  source=repro, out_dir=out, time_limit=AUTO_SHRINK_LIMIT_S)


def _report_first_failure(path: Path, failures: Sequence[tuple[Any, Path]]) -> None:
    from sim import report

    if not failures:
        print(f"--report: every run held, so {path} was not written", file=sys.stderr)
        return
    failing, repro = failures[0]
    write_html(path, failing, report.replay_command(repro))


def add_run(commands: Any) -> None:
    run = commands.add_parser("run", help="run scenario files or folders and print a verdict table")
    run.add_argument("paths", nargs="+", metavar="PATH")
    run.add_argument("--seed", type=int, help="first seed (default: the scenario's)")
    run.add_argument("--runs", type=int, help="runs per scenario (default: the scenario's)")
    run.add_argument("--strategy", choices=STRATEGY_CHOICES, help="exploration strategy (default: the scenario's, else portfolio)")
    run.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    run.add_argument("--trace-out", type=Path, metavar="DIR", help="write the JSONL trace of each failing run here")
    run.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="where repro files go (default: out/)")
    run.add_argument("--no-shrink", action="store_true", help=f"do not shrink each failing run (by default each gets up to {AUTO_SHRINK_LIMIT_S:g}s)")
    add_report_option(run, "the first failing run")
    add_mutant_option(run)
    run.set_defaults(handler=_run)
