"""`explore`: one scenario searched until a budget or the first violation, sharded across machines; and the
hidden `detect` command that `bench detection` runs under each mutant."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sim.cli.common import (
    DEFAULT_OUT,
    EXIT_OK,
    EXIT_VIOLATION,
    STRATEGY_CHOICES,
    UsageError,
    add_json_options,
    add_mutant_option,
    exit_interrupted,
    load_scenarios,
    positive_int,
    seed_int,
    speaker,
)
from sim.cli.progress import Throttled
from sim.core import stopping


def _explore(args: argparse.Namespace) -> int:
    """Search one scenario until the budget runs out (exit 0) or the first violation (exit 1)."""
    from sim.reports import text_report
    from sim.scenario.runner import search_scenario

    scenarios = load_scenarios([args.path])
    if len(scenarios) != 1:
        raise UsageError(f"{args.path}: explore takes one scenario file, found {len(scenarios)} scenarios")
    scenario = scenarios[0]
    shard = parse_shard(args.shard)
    strategy = args.strategy or scenario.explore.strategy
    if strategy == "dfs" and shard.count > 1:
        raise UsageError("--shard: dfs walks one schedule tree, which seeds do not split; run it unsharded")
    if args.time_budget is not None and args.time_budget <= 0:
        raise UsageError(f"--time-budget: expected a positive number, got {args.time_budget:g}")
    runs = args.runs if args.runs is not None or args.time_budget is not None else scenario.explore.runs
    lines = Throttled(speaker(args), enabled=not args.json or args.progress)
    with stopping.graceful():
        found = search_scenario(scenario, strategy, first_seed=scenario.explore.seed if args.seed is None else args.seed,
                        shard=shard, runs=runs, time_budget_s=args.time_budget,
                        on_run=lambda run: lines.done(f"{lines.count + 1} runs, latest seed {run.seed}"))
    mutant = args.under_mutant
    repro = None if found.verdict.failing is None else text_report.write_repro(found.verdict.failing, args.out, mutant=mutant)
    if args.json:
        print(json.dumps(_exploration_json(found, strategy, repro, mutant), sort_keys=True))
    else:
        print(_exploration_text(found, strategy, repro, mutant))
    if found.verdict.interrupted:
        return exit_interrupted(args, found.verdict.runs)
    return EXIT_OK if found.verdict.failing is None else EXIT_VIOLATION


def parse_shard(text: str) -> Any:
    """`I/N` with 1 <= I <= N, counted from 1 like `run_tests.sh --slice`; the library's Shard counts from 0."""
    from sim.core.search import Shard

    index, slash, count = text.partition("/")
    if not (slash and index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise UsageError(f"--shard: expected I/N with 1 <= I <= N (like 1/4), got {text!r}")
    return Shard(int(index) - 1, int(count))


def shard_text(shard: Any) -> str:
    return f"{shard.index + 1}/{shard.count}"


def _exploration_summary(found: Any, strategy: str) -> str:
    verdict = found.verdict
    return (f"{verdict.scenario.name}: {strategy}, shard {shard_text(found.shard)} (seeds {found.first_seed + found.shard.index} "
            f"step {found.shard.count}), {verdict.runs} runs, {verdict.steps} steps, {verdict.cpu_s:.2f}s")


def _exhaustion_line(found: Any) -> str | None:
    if found.exhausted is None:
        return None
    budget = f"{found.strategy.bound} preemptions"
    if found.exhausted:
        return f"dfs: the whole bounded space ({budget}) is covered: {found.strategy.executions} schedules"
    return f"dfs: the bounded space ({budget}) is not exhausted after {found.strategy.executions} schedules"


def _exploration_text(found: Any, strategy: str, repro: Path | None, mutant: str | None) -> str:
    from sim.reports import text_report

    lines = [_exploration_summary(found, strategy)]
    lines += filter(None, [_exhaustion_line(found)])
    if found.verdict.failing is None:
        lines += [f"  note: {problem}" for problem in found.verdict.problems()]
        lines.append("no violation so far" if found.verdict.interrupted else "no violation")
    else:
        lines += ["", text_report.failure_block(found.verdict.failing, repro, mutant=mutant)]
    return "\n".join(lines)


def _exploration_json(found: Any, strategy: str, repro: Path | None, mutant: str | None) -> dict[str, Any]:
    from sim.reports import text_report

    document = text_report.verdict_json(found.verdict, repro, mutant=mutant)
    document.update(strategy=strategy, shard=shard_text(found.shard), first_seed=found.first_seed + found.shard.index,
                    seed_step=found.shard.count, exhausted=found.exhausted)
    if found.exhausted is not None:
        document["executions"] = found.strategy.executions
    return document


def _detect(args: argparse.Namespace) -> int:
    """Under one mutant (run with --mutant): runs to first detection per scenario, strategy and root seed."""
    from sim.bench.detection import DETECTION_STRATEGIES, detect

    print(json.dumps(detect(load_scenarios(args.paths), DETECTION_STRATEGIES, args.seeds, args.max_runs), sort_keys=True))
    return EXIT_OK


def add_explore(commands: Any) -> None:
    explore = commands.add_parser("explore", help="search one scenario for a violation until a run or time budget runs out")
    explore.add_argument("path", metavar="SCENARIO")
    budget = explore.add_mutually_exclusive_group()
    budget.add_argument("--runs", type=positive_int, help="runs in this shard (default: the scenario's, unless --time-budget)")
    budget.add_argument("--time-budget", type=float, metavar="SECONDS", help="search for this many seconds (CPU time)")
    explore.add_argument("--strategy", choices=STRATEGY_CHOICES, help="search strategy (default: the scenario's, else portfolio)")
    explore.add_argument("--shard", default="1/1", metavar="I/N",
                         help="run seeds first+I-1, first+I-1+N, ...: N machines with shards 1/N..N/N never repeat a seed")
    explore.add_argument("--seed", type=seed_int, help="first seed of the whole seed space (default: the scenario's)")
    add_json_options(explore)
    explore.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="where the repro file goes (default: out/)")
    add_mutant_option(explore)
    explore.set_defaults(handler=_explore)


def add_detect(commands: Any) -> None:
    """The internal command `bench detection` runs under each mutant."""
    detect = commands.add_parser("detect")
    detect.add_argument("paths", nargs="+")
    detect.add_argument("--seeds", type=positive_int, default=20)
    detect.add_argument("--max-runs", type=positive_int, default=200)
    detect.add_argument("--json", action="store_true")
    add_mutant_option(detect)
    detect.set_defaults(handler=_detect)
