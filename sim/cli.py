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
OVERLAY_ENV = "COMPACTION_SIM_MUTANT_OVERLAY"


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
    verdicts, documents, blocks = [], [], []
    for scenario in scenarios:
        if args.strategy:
            scenario = _with_strategy(scenario, args.strategy)
        verdict = check(scenario, runs=args.runs, seed=args.seed)
        verdicts.append(verdict)
        repro = None
        if verdict.failing is not None:
            repro = report.write_repro(verdict.failing, args.out)
            blocks.append(report.failure_block(verdict.failing, repro))
        if args.trace_out is not None and verdict.failing is not None:
            _write_trace(verdict.failing, args.trace_out)
        documents.append(report.verdict_json(verdict, repro))
        if not args.json and sys.stderr.isatty():
            print(f"  {scenario.name}: {'pass' if verdict.passed else 'FAIL'}", file=sys.stderr)
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
    from sim.mutants import StaleMutant, load_mutants, overlay

    mutants = load_mutants()
    if args.mutant not in mutants:
        raise UsageError(f"--mutant {args.mutant}: no such mutant in mutants/ (known: {', '.join(sorted(mutants))})")
    argv = [a for a in sys.argv[1:] if a not in ("--mutant", args.mutant)]
    try:
        with overlay(mutants[args.mutant]) as folder:
            # -P keeps the current directory off sys.path, so the overlay's `reference` shadows this checkout's.
            env = {**os.environ, OVERLAY_ENV: str(folder),
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}
            return subprocess.run([sys.executable, "-P", "-m", "sim", *argv], env=env).returncode
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
    for key, kind in (("scenario", str), ("seed", int), ("decisions", list)):
        if not isinstance(document, dict) or not isinstance(document.get(key), kind):
            raise UsageError(f"{path}: {key}: expected {kind.__name__} in a repro file")
    return document


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
            result = run_once(scenario, document["seed"], [tuple(d) for d in document["decisions"]])
        except DivergenceError as divergence:
            raise UsageError(f"{repro_path}: the recording no longer fits the code: {divergence}") from None
        expected_digest = document.get("digest")
    print(result.result.trace_text())
    if expected_digest is not None:
        same = expected_digest == result.result.digest()
        print(f"\ntrace digest {result.result.digest()[:16]}: {'identical to the recording' if same else 'DIFFERS from the recording'}")
    if result.violations:
        print("\n" + report.failure_block(result, None))
        return EXIT_VIOLATION
    print(f"\n{scenario.name} seed {result.seed}: all invariants hold")
    return EXIT_OK


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
    """`--revert REV`: the reviewer's check of a fix commit; otherwise the curated kill matrix."""
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
    mutate = commands.add_parser("mutate", help="mutation checks: the curated kill matrix, or --revert REV to check a fix commit the way reviewers do")
    mutate.add_argument("--mutant", dest="mutant_names", nargs="+", metavar="NAME", help="curated: only these mutants (default: all)")
    mutate.add_argument("--scenarios", nargs="+", default=["scenarios"], metavar="PATH", help="curated: the catalogue (default: scenarios/)")
    mutate.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="curated: mutants run at once")
    mutate.add_argument("--out", type=Path, default=DEFAULT_OUT / "mutants", metavar="DIR", help="curated: where killers' repro files go")
    mutate.add_argument("--revert", metavar="REV", help="the fix commit: revert its non-test files, expect the tests to fail")
    mutate.add_argument("--paths", nargs="+", metavar="GLOB", help="revert only REV's files matching these fnmatch globs")
    mutate.add_argument("--repo", metavar="DIR", help="the git repository (default: the current directory's)")
    mutate.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    mutate.add_argument("test_args", nargs=argparse.REMAINDER, metavar="-- TEST_ARGS", help="pytest arguments: test files or folders and options")
    mutate.set_defaults(handler=_mutate)


# ---- mutate --revert (end) ---------------------------------------------------------------------


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
    run.add_argument("--strategy", choices=["random"], help="exploration strategy (default: the scenario's)")
    run.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    run.add_argument("--trace-out", type=Path, metavar="DIR", help="write the JSONL trace of each failing run here")
    run.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="where repro files go (default: out/)")
    _add_mutant_option(run)
    run.set_defaults(handler=_run)

    replay = commands.add_parser("replay", help="replay a repro file (or a scenario at --seed) and print its timeline")
    replay.add_argument("target", metavar="REPRO_FILE|SCENARIO")
    replay.add_argument("--seed", type=int, help="run this seed of the scenario instead of a repro file")
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
    bench.add_argument("target", choices=["kernel", "scenarios"])
    bench.add_argument("paths", nargs="*", metavar="PATH", help="scenarios: files or folders (default: scenarios/)")
    bench.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    bench.add_argument("--repeats", type=int, default=5, help="kernel: measurements per runtime; the best is kept")
    bench.add_argument("--runs", type=int, help="scenarios: runs per scenario (default 20)")
    bench.set_defaults(handler=_bench)
    _add_mutate(commands)  # mutate --revert
    return parser


def _check_overlay() -> None:
    """Under a mutant, the mutated copy must be the `reference` in use, or a survivor would be meaningless."""
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
