"""The command line: a thin layer over the Python API. Exit 0 all hold, 1 a violation, 2 bad input or usage.

`--json` prints one JSON document on stdout and nothing else there; every failure prints the command that
replays it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_USAGE = 2
DEFAULT_OUT = Path("out")


class UsageError(Exception):
    """Bad input from the user: printed as one line on stderr, exit 2."""


def _scenarios(paths: Sequence[str]) -> list[Any]:
    from sim.registry import registry
    from sim.scenario.loader import load_paths

    return load_paths([Path(p) for p in paths], registry())


# ---- run ---------------------------------------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    from sim import report
    from sim.scenario.runner import check

    scenarios = _scenarios(args.paths)
    verdicts, documents, blocks, failures = [], [], [], []
    for scenario in scenarios:
        scenario = _with_strategy(scenario, args.strategy or scenario.explore.strategy)
        verdict = check(scenario, runs=args.runs, seed=args.seed)
        verdicts.append(verdict)
        repro = shrunk = None
        if verdict.failing is not None:
            repro = report.write_repro(verdict.failing, args.out)
            blocks.append(report.failure_block(verdict.failing, repro))
            # shrink and --report: see "run: shrink, --report" below
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


def _under_mutant(args: argparse.Namespace) -> int:
    """Re-run this command in a subprocess whose `reference` package has the mutant applied."""
    from sim.mutants import NAME_ENV, StaleMutant, load_mutants, overlay, overlay_process

    mutants = load_mutants()
    if args.mutant not in mutants:
        raise UsageError(f"--mutant {args.mutant}: no such mutant in mutants/ (known: {', '.join(sorted(mutants))})")
    argv = [a for a in sys.argv[1:] if a not in ("--mutant", args.mutant)]
    try:
        with overlay(mutants[args.mutant]) as folder:
            command, env = overlay_process(folder, argv)
            return subprocess.run(command, env={**env, NAME_ENV: args.mutant}).returncode
    except StaleMutant as stale:
        raise UsageError(str(stale)) from None


# ---- replay ------------------------------------------------------------------------------------


def _load_repro(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such repro file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: not a repro file ({error})") from None
    for key, kind in (("scenario", str), ("seed", int), ("decisions", list), ("decision_points", int)):
        if not isinstance(document, dict) or not isinstance(document.get(key), kind):
            raise UsageError(f"{path}: {key}: expected {kind.__name__} in a repro file")
    return document


def _recorded_decisions(path: Path, document: dict[str, Any]) -> list[Any]:
    """A repro's decision list, expanded from the non-default choices it stores to every choice point."""
    from sim.strategies.base import expand

    try:
        return expand(document["decisions"], document["decision_points"])
    except (TypeError, ValueError) as error:
        raise UsageError(f"{path}: decisions: expected [position, kind, ...] entries within decision_points ({error})") from None


def _replay(args: argparse.Namespace) -> int:
    from sim import report
    from sim.kernel.errors import DivergenceError
    from sim.scenario.runner import run_once

    if args.seed is not None:
        scenario = _scenarios([args.target])[0]
        result = run_once(scenario, args.seed)
        expected_digest = None
    else:
        repro_path = Path(args.target)
        document = _load_repro(repro_path)
        scenario = _scenarios([document["scenario"]])[0]
        try:
            result = run_once(scenario, document["seed"], _recorded_decisions(repro_path, document))
        except DivergenceError as divergence:
            raise UsageError(f"{repro_path}: the recording no longer fits the code: {divergence}") from None
        expected_digest = document.get("digest")
    print(result.result.trace_text())
    if args.report is not None:
        _write_html(args.report, result, _replay_text(args))
    if expected_digest is not None and expected_digest != result.result.digest():
        raise UsageError(f"{args.target}: the recording no longer fits the code: the replayed trace differs from the "
                         f"recorded one (digest {result.result.digest()[:16]}, recorded {expected_digest[:16]})")
    if expected_digest is not None:
        print(f"\ntrace digest {result.result.digest()[:16]}: identical to the recording")
    if result.violations:
        print("\n" + report.failure_block(result, None))
        return EXIT_VIOLATION
    print(f"\n{scenario.name} seed {result.seed}: all invariants hold")
    return EXIT_OK


# ---- shrink, and run: shrink, --report (begin) -------------------------------------------------

SHRINK_LIMIT_S = 30.0
AUTO_SHRINK_LIMIT_S = 10.0  # `run` shrinks each failure on the way; a longer search is `shrink --time-limit`


def _shrink(args: argparse.Namespace) -> int:
    """Shrink a repro's run; exit 1, since the shrunk run still shows the violation."""
    from sim import report
    from sim.shrink import ShrinkError, shrink

    if args.time_limit <= 0:
        raise UsageError("--time-limit must be positive")
    repro_path = Path(args.repro)
    document = _load_repro(repro_path)
    if not isinstance(document.get("invariant"), str):
        raise UsageError(f"{repro_path}: invariant: expected str in a repro file")
    scenario = _scenarios([document["scenario"]])[0]
    try:
        result = shrink(scenario, document["seed"], _recorded_decisions(repro_path, document), document["invariant"],
                        source=repro_path, out_dir=args.out or repro_path.parent, time_limit=args.time_limit)
    except ShrinkError as error:
        raise UsageError(f"{repro_path}: {error}") from None
    if args.report is not None:
        _write_html(args.report, result.report, report.replay_command(result.repro_path))
    print(json.dumps(result.as_dict(), sort_keys=True) if args.json else result.summary())
    return EXIT_VIOLATION


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
    _write_html(path, failing, report.replay_command(repro))


def _replay_text(args: argparse.Namespace) -> str:
    """The command that replays what `replay` just ran: the repro file, or the scenario at its seed."""
    import shlex

    from sim import report

    if args.seed is None:
        return report.replay_command(Path(args.target))
    return f"python -m sim replay {shlex.quote(args.target)} --seed {args.seed}"


def _write_html(path: Path, run: Any, replay: str) -> None:
    from sim.html_report import write_report

    write_report(run, replay, path)
    print(f"report: {path}", file=sys.stderr)


def _add_report_option(command: argparse.ArgumentParser, what: str) -> None:
    command.add_argument("--report", type=Path, metavar="FILE.html", help=f"write {what} as one self-contained HTML page")


def _add_shrink(commands: Any) -> None:
    shrink = commands.add_parser("shrink", help="minimise a repro's faults, drives and decisions while the same invariant fails")
    shrink.add_argument("repro", metavar="REPRO_FILE")
    shrink.add_argument("--time-limit", type=float, default=SHRINK_LIMIT_S, metavar="S", help=f"stop searching after S seconds (default {SHRINK_LIMIT_S:g})")
    shrink.add_argument("--out", type=Path, metavar="DIR", help="where the shrunk scenario and repro go (default: beside REPRO_FILE)")
    shrink.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    _add_report_option(shrink, "the shrunk run")
    _add_mutant_option(shrink)
    shrink.set_defaults(handler=_shrink)


# ---- shrink, and run: shrink, --report (end) ---------------------------------------------------


# ---- list --------------------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    if args.what == "scenarios":
        for scenario in _scenarios(args.paths or ["scenarios"]):
            print(f"{scenario.name:<48} {scenario.race or '':<5} {scenario.reported or scenario.description or ''}")
    elif args.what == "faults":
        from faults import FAULT_KINDS

        for kind, fault in FAULT_KINDS.items():
            print(f"{kind:<26} {fault.where:<7} {(sys.modules[fault.__module__].__doc__ or '').splitlines()[0]}")
    else:
        from sim.invariants import INVARIANTS

        for name, invariant in INVARIANTS.items():
            print(f"{name:<40} {','.join(invariant.races):<14} {invariant.description}")
    return EXIT_OK


# ---- check-determinism -------------------------------------------------------------------------


def _digests(args: argparse.Namespace) -> int:
    from sim.scenario.runner import run_once
    from sim.timefreeze import frozen_time

    result: dict[str, list[str]] = {}
    with frozen_time():
        for scenario in _scenarios(args.paths):
            result[scenario.name] = [run_once(scenario, seed).result.digest() for seed in range(args.seeds)]
    print(json.dumps(result, sort_keys=True))
    return EXIT_OK


def _check_determinism(args: argparse.Namespace) -> int:
    _scenarios(args.paths)  # bad input is reported here, once, not by both subprocesses
    runs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-m", "sim", "digests", *args.paths, "--seeds", str(args.seeds)],
                              capture_output=True, text=True, env=env)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return EXIT_VIOLATION
        runs.append(json.loads(done.stdout))
    first, second = runs
    differences = [(name, seed) for name in first for seed, (a, b) in enumerate(zip(first[name], second[name])) if a != b]
    total = sum(len(digests) for digests in first.values())
    for name, seed in differences:
        print(f"DIFFERS {name} seed {seed}: {first[name][seed][:16]} (PYTHONHASHSEED=1) vs {second[name][seed][:16]} (PYTHONHASHSEED=2)")
    print(f"{len(first)} scenarios x {args.seeds} seeds = {total} runs in two processes: {len(differences)} differences")
    return EXIT_VIOLATION if differences else EXIT_OK


# ---- bench -------------------------------------------------------------------------------------


def _bench(args: argparse.Namespace) -> int:
    if args.target == "detection":
        return _bench_detection(args)
    if args.target == "kernel":
        from sim.bench.kernel import bench_kernel

        result = bench_kernel(repeats=args.repeats)
    else:
        from sim.bench.scenarios import bench_scenarios

        result = bench_scenarios(_scenarios(args.paths or ["scenarios"]), runs=args.runs or 20)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        for key, value in result.items():
            print(f"{key:>26}: {value}")
    return EXIT_OK


# ---- mutate --revert (begin) -------------------------------------------------------------------


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
    from sim.revert_check import check as revert_check

    return revert_check(args.revert, args.test_args, paths=args.paths, repo=args.repo, as_json=args.json)


def _mutate_curated(args: argparse.Namespace) -> int:
    """Every curated mutant (or the named ones) against the catalogue; exit 1 if one survives or is missed."""
    import time

    from sim.mutate import kill_matrix, render_matrix, result_json, sanity_pass
    from sim.mutants import load_mutants

    scenarios = _scenarios(args.scenarios)
    known = load_mutants()
    names = args.mutant_names or sorted(known)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise UsageError(f"--mutant: no such mutant in mutants/: {', '.join(unknown)}")
    problem = sanity_pass(scenarios[0].path)
    if problem is not None:
        print(f"python -m sim mutate: sanity pass failed: {problem}", file=sys.stderr)
        return EXIT_VIOLATION
    started = time.monotonic()
    results = kill_matrix(scenarios, names, args.jobs, args.out)
    elapsed = time.monotonic() - started
    failed = [r for r in results if r.stale or not r.killed or r.missed_expected()]
    figures = {"mutants": len(results), "seconds": round(elapsed, 1), "mutants_per_minute": round(len(results) / elapsed * 60, 1), "jobs": args.jobs}
    if args.json:
        print(json.dumps({"sanity": "ok", **figures, "passed": not failed, "mutants": [result_json(r) for r in results]}, sort_keys=True))
        return EXIT_VIOLATION if failed else EXIT_OK
    print("sanity pass: a forced failure is reported as a failure\n")
    print(render_matrix(results, [s.name for s in scenarios]))
    for result in results:
        if result.killed:
            scenario, command = next(iter(result.killed_by.items()))
            print(f"{result.name}: killed by {scenario}: {command}")
    for result in failed:
        reason = result.stale or (f"expected killers did not kill: {', '.join(result.missed_expected())}" if result.killed else "survived every scenario")
        print(f"{result.name}: {reason}")
    print(f"\n{len(results)} mutants in {elapsed:.1f}s ({figures['mutants_per_minute']} per minute, {args.jobs} jobs): "
          f"{len(results) - len(failed)} killed as expected, {len(failed)} not")
    return EXIT_VIOLATION if failed else EXIT_OK


def _add_mutate(commands: Any) -> None:
    mutate = commands.add_parser("mutate", help="mutation checks: the curated kill matrix, --operators for generated mutants, or --revert REV to check a fix commit the way reviewers do")
    mutate.add_argument("--mutant", dest="mutant_names", nargs="+", metavar="NAME", help="curated: only these mutants (default: all)")
    mutate.add_argument("--scenarios", nargs="+", default=["scenarios"], metavar="PATH", help="curated and operators: the catalogue (default: scenarios/)")
    mutate.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="curated and operators: mutants run at once")
    mutate.add_argument("--out", type=Path, default=DEFAULT_OUT / "mutants", metavar="DIR", help="curated: where killers' repro files go")
    mutate.add_argument("--revert", metavar="REV", help="the fix commit: revert its non-test files, expect the tests to fail")
    mutate.add_argument("--paths", nargs="+", metavar="GLOB", help="revert only REV's files matching these fnmatch globs")
    mutate.add_argument("--repo", metavar="DIR", help="the git repository (default: the current directory's)")
    mutate.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    mutate.add_argument("test_args", nargs=argparse.REMAINDER, metavar="-- TEST_ARGS", help="pytest arguments: test files or folders and options")
    _add_operator_options(mutate)
    mutate.set_defaults(handler=_mutate)


# ---- mutate --revert (end) ---------------------------------------------------------------------


# ---- mutate --operators (begin) ----------------------------------------------------------------

OPERATOR_OPTIONS = ("seed", "budget", "max", "timeout", "min_score")
DEFAULT_MUTANT_TIMEOUT_S = 120.0
DEFAULT_MIN_SCORE = 85.0


def _mutate_operators(args: argparse.Namespace) -> int:
    """Sampled operator mutants against the catalogue; exit 1 when the score is under --min-score."""
    from sim import operators
    from sim.mutate import sanity_pass

    if args.revert or args.repo or args.paths or args.test_args or args.mutant_names:
        raise UsageError("--operators takes none of --revert, --repo, --paths, --mutant or test arguments")
    if any(value is not None and value <= 0 for value in (args.budget, args.max, args.timeout)):
        raise UsageError("--budget, --max and --timeout must be positive")
    scenarios = _scenarios(args.scenarios)
    timeout = args.timeout or DEFAULT_MUTANT_TIMEOUT_S
    problem = sanity_pass(scenarios[0].path) or operators.baseline_problem(args.scenarios, timeout)
    if problem is not None:
        print(f"python -m sim mutate --operators: {problem}", file=sys.stderr)
        return EXIT_VIOLATION
    report = operators.mutate_operators(args.scenarios, seed=args.seed or 0, limit=args.max, budget=args.budget,
                                        timeout=timeout, jobs=args.jobs)
    min_score = DEFAULT_MIN_SCORE if args.min_score is None else args.min_score
    passed = report.score() >= min_score
    if args.json:
        print(json.dumps({**operators.report_json(report), "min_score": min_score, "passed": passed}, sort_keys=True))
    else:
        print("baseline: the catalogue passes on the unmutated reference; a forced failure is reported as a failure\n")
        print(operators.render(report))
        print(f"\n{'passed' if passed else 'FAILED'}: score {report.score():.1f}% against --min-score {min_score:g}%")
    return EXIT_OK if passed else EXIT_VIOLATION


def _add_operator_options(mutate: argparse.ArgumentParser) -> None:
    mutate.add_argument("--operators", action="store_true", help="generated operator mutants of reference/, scored by the catalogue")
    mutate.add_argument("--seed", type=int, help="operators: the sample's seed (default 0)")
    mutate.add_argument("--max", type=int, metavar="N", help="operators: sample at most N mutants (default: every candidate)")
    mutate.add_argument("--budget", type=float, metavar="SECONDS", help="operators: launch no mutant after this much wall time (default: no limit)")
    mutate.add_argument("--timeout", type=float, metavar="SECONDS", help=f"operators: a catalogue run longer than this is a kill by timeout (default {DEFAULT_MUTANT_TIMEOUT_S:g})")
    mutate.add_argument("--min-score", type=float, metavar="PERCENT", help=f"operators: exit 1 below this mutation score (default {DEFAULT_MIN_SCORE:g})")


# ---- mutate --operators (end) ------------------------------------------------------------------


# ---- explore, bench detection (begin) -----------------------------------------------------------

STRATEGY_CHOICES = ["random", "pct", "dfs", "portfolio"]


def _explore(args: argparse.Namespace) -> int:
    """Search one scenario until the budget runs out (exit 0) or the first violation (exit 1)."""
    from sim import report
    from sim.explore import Shard, explore

    scenarios = _scenarios([args.path])
    if len(scenarios) != 1:
        raise UsageError(f"{args.path}: explore takes one scenario file, found {len(scenarios)} scenarios")
    scenario = scenarios[0]
    try:
        shard = Shard.parse(args.shard)
    except ValueError as error:
        raise UsageError(f"--shard: {error}") from None
    strategy = args.strategy or scenario.explore.strategy
    if strategy == "dfs" and shard.count > 1:
        raise UsageError("--shard: dfs walks one schedule tree, which seeds do not split; run it unsharded")
    for option, value in (("--runs", args.runs), ("--time-budget", args.time_budget)):
        if value is not None and value <= 0:
            raise UsageError(f"{option}: expected a positive number, got {value:g}")
    runs = args.runs if args.runs is not None or args.time_budget is not None else scenario.explore.runs
    found = explore(scenario, strategy, first_seed=scenario.explore.seed if args.seed is None else args.seed,
                    shard=shard, runs=runs, time_budget=args.time_budget)
    repro = None if found.verdict.failing is None else report.write_repro(found.verdict.failing, args.out)
    if args.json:
        print(json.dumps(_exploration_json(found, strategy, repro), sort_keys=True))
    else:
        print(_exploration_text(found, strategy, repro))
    return EXIT_OK if found.verdict.failing is None else EXIT_VIOLATION


def _exploration_summary(found: Any, strategy: str) -> str:
    verdict = found.verdict
    return (f"{verdict.scenario.name}: {strategy}, shard {found.shard} (seeds {found.first_seed + found.shard.index} "
            f"step {found.shard.count}), {verdict.runs} runs, {verdict.steps} steps, {verdict.seconds:.2f}s")


def _exhaustion_line(found: Any) -> str | None:
    if found.exhausted is None:
        return None
    budget = f"{found.strategy.budget} delays"
    if found.exhausted:
        return f"dfs: the whole bounded space ({budget}) is covered: {found.strategy.executions} schedules"
    return f"dfs: the bounded space ({budget}) is not exhausted after {found.strategy.executions} schedules"


def _exploration_text(found: Any, strategy: str, repro: Path | None) -> str:
    from sim import report

    lines = [_exploration_summary(found, strategy)]
    lines += filter(None, [_exhaustion_line(found)])
    if found.verdict.failing is None:
        lines += [f"  note: {problem}" for problem in found.verdict.problems()]
        lines.append("no violation")
    else:
        lines += ["", report.failure_block(found.verdict.failing, repro)]
    return "\n".join(lines)


def _exploration_json(found: Any, strategy: str, repro: Path | None) -> dict[str, Any]:
    from sim import report

    document = report.verdict_json(found.verdict, repro)
    document.update(strategy=strategy, shard=str(found.shard), first_seed=found.first_seed + found.shard.index,
                    seed_step=found.shard.count, exhausted=found.exhausted)
    if found.exhausted is not None:
        document["executions"] = found.strategy.executions
    return document


def _detect(args: argparse.Namespace) -> int:
    """Under one mutant (run with --mutant): runs to first detection per scenario, strategy and root seed."""
    from sim.bench.detection import DETECTION_STRATEGIES, detect

    print(json.dumps(detect(_scenarios(args.paths), DETECTION_STRATEGIES, args.seeds, args.max_runs), sort_keys=True))
    return EXIT_OK


def _bench_detection(args: argparse.Namespace) -> int:
    from sim.bench.detection import bench_detection, render
    from sim.mutants import load_mutants

    result = bench_detection(_scenarios(args.paths or ["scenarios"]), sorted(load_mutants()), root_seeds=args.seeds,
                             max_runs=args.max_runs, coverage_runs=args.runs or 20, jobs=args.jobs)
    print(json.dumps(result, sort_keys=True) if args.json else render(result))
    return EXIT_OK


def _add_search(commands: Any, bench: argparse.ArgumentParser) -> None:
    explore = commands.add_parser("explore", help="search one scenario for a violation until a run or time budget runs out")
    explore.add_argument("path", metavar="SCENARIO")
    budget = explore.add_mutually_exclusive_group()
    budget.add_argument("--runs", type=int, help="runs in this shard (default: the scenario's, unless --time-budget)")
    budget.add_argument("--time-budget", type=float, metavar="SECONDS", help="search for this many seconds (CPU time)")
    explore.add_argument("--strategy", choices=STRATEGY_CHOICES, help="search strategy (default: the scenario's, else portfolio)")
    explore.add_argument("--shard", default="0/1", metavar="I/N",
                         help="run seeds first+I, first+I+N, ...: N machines with shards 0/N..N-1/N never repeat a seed")
    explore.add_argument("--seed", type=int, help="first seed of the whole seed space (default: the scenario's)")
    explore.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    explore.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="where the repro file goes (default: out/)")
    _add_mutant_option(explore)
    explore.set_defaults(handler=_explore)

    detect = commands.add_parser("detect", help=argparse.SUPPRESS)
    detect.add_argument("paths", nargs="+")
    detect.add_argument("--seeds", type=int, default=20)
    detect.add_argument("--max-runs", type=int, default=200)
    detect.add_argument("--json", action="store_true")
    _add_mutant_option(detect)
    detect.set_defaults(handler=_detect)

    bench.add_argument("--seeds", type=int, default=20, help="detection: root seeds per mutant, scenario and strategy")
    bench.add_argument("--max-runs", type=int, default=200, help="detection: runs before a search counts as undetected")
    bench.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="detection: mutants measured at once")


# ---- explore, bench detection (end) -------------------------------------------------------------


# ---- the parser --------------------------------------------------------------------------------


def _add_mutant_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--mutant", metavar="NAME", help="against a copy of the reference with this curated mutant applied")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sim", description="Deterministic simulation of context-compaction races.")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run scenario files or folders and print a verdict table")
    run.add_argument("paths", nargs="+", metavar="PATH")
    run.add_argument("--seed", type=int, help="first seed (default: the scenario's)")
    run.add_argument("--runs", type=int, help="runs per scenario (default: the scenario's)")
    run.add_argument("--strategy", choices=STRATEGY_CHOICES, help="exploration strategy (default: the scenario's, else portfolio)")
    run.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    run.add_argument("--trace-out", type=Path, metavar="DIR", help="write the JSONL trace of each failing run here")
    run.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="where repro files go (default: out/)")
    run.add_argument("--no-shrink", action="store_true", help=f"do not shrink each failing run (by default each gets up to {AUTO_SHRINK_LIMIT_S:g}s)")
    _add_report_option(run, "the first failing run")
    _add_mutant_option(run)
    run.set_defaults(handler=_run)

    replay = commands.add_parser("replay", help="replay a repro file (or a scenario at --seed) and print its timeline")
    replay.add_argument("target", metavar="REPRO_FILE|SCENARIO")
    replay.add_argument("--seed", type=int, help="run this seed of the scenario instead of a repro file")
    _add_report_option(replay, "the replayed run")
    _add_mutant_option(replay)
    replay.set_defaults(handler=_replay)

    listing = commands.add_parser("list", help="list scenarios, faults or invariants")
    listing.add_argument("what", choices=["scenarios", "faults", "invariants"])
    listing.add_argument("paths", nargs="*", metavar="PATH")
    listing.set_defaults(handler=_list)

    determinism = commands.add_parser("check-determinism", help="run each seed in two processes with different PYTHONHASHSEED and compare trace digests")
    determinism.add_argument("paths", nargs="+", metavar="PATH")
    determinism.add_argument("--seeds", type=int, default=5)
    determinism.set_defaults(handler=_check_determinism)

    digests = commands.add_parser("digests", help=argparse.SUPPRESS)
    digests.add_argument("paths", nargs="+")
    digests.add_argument("--seeds", type=int, default=5)
    digests.set_defaults(handler=_digests)

    bench = commands.add_parser("bench", help="measure the simulator (ratios measured in one run)")
    bench.add_argument("target", choices=["kernel", "scenarios", "detection"])
    bench.add_argument("paths", nargs="*", metavar="PATH", help="scenarios: files or folders (default: scenarios/)")
    bench.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    bench.add_argument("--repeats", type=int, default=5, help="kernel: measurements per runtime; the best is kept")
    bench.add_argument("--runs", type=int, help="scenarios, detection's coverage: runs per scenario (default 20)")
    bench.set_defaults(handler=_bench)
    _add_search(commands, bench)  # explore, bench detection
    _add_mutate(commands)  # mutate --revert
    _add_shrink(commands)
    return parser


def _check_overlay() -> None:
    """Under a mutant, the mutated copy must be the `reference` in use, or a survivor would be meaningless."""
    from sim.mutants import OVERLAY_ENV

    folder = os.environ.get(OVERLAY_ENV)
    if folder:
        import reference

        if not str(Path(reference.__file__).resolve()).startswith(str(Path(folder).resolve())):
            raise UsageError(f"the mutant overlay {folder} is not the reference in use ({reference.__file__})")


def main(argv: Sequence[str] | None = None) -> int:
    from sim.scenario.errors import ScenarioError

    args = build_parser().parse_args(argv)
    try:
        _check_overlay()
        return _under_mutant(args) if getattr(args, "mutant", None) else args.handler(args)
    except (ScenarioError, UsageError) as error:
        print(f"python -m sim {args.command}: {error}", file=sys.stderr)
        return EXIT_USAGE
