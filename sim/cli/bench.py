"""`bench`: the simulator measured against the raw loop and trio, the catalogue's run rates, detection, and
the classic concurrency bugs."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from sim.cli.common import CATALOGUE, EXIT_OK, UsageError, add_json_options, load_scenarios, positive_int, progress


def _bench(args: argparse.Namespace) -> int:
    if args.target == "detection":
        return _bench_detection(args)
    if args.target == "classic":
        return _bench_classic(args)
    if args.target == "kernel":
        from sim.bench.kernel import bench_kernel

        result = bench_kernel(repeats=args.repeats)
    else:
        from sim.bench.scenarios import bench_scenarios

        scenarios = load_scenarios(args.paths or [CATALOGUE])
        result = bench_scenarios(scenarios, runs=args.runs or 20, on_done=progress(args, len(scenarios)).done)
    print(json.dumps(result, sort_keys=True) if args.json else render_figures(result))
    return EXIT_OK


def render_figures(result: dict[str, Any], indent: str = "") -> str:
    """`name: value` lines, aligned; a nested table's figures indented under its name."""
    width = max(map(len, result), default=0)
    lines = []
    for key, value in result.items():
        if isinstance(value, dict):
            lines += [f"{indent}{key}:", render_figures(value, indent + "  ")]
        elif isinstance(value, (list, tuple)):
            lines.append(f"{indent}{key:<{width}}  {', '.join(map(str, value))}")
        else:
            lines.append(f"{indent}{key:<{width}}  {value}")
    return "\n".join(lines)


def _bench_detection(args: argparse.Namespace) -> int:
    from sim.bench.detection import DETECTION_STRATEGIES, bench_detection, render
    from sim.mutants import load_mutants
    from sim.mutate import claimed_mutants

    scenarios = load_scenarios(args.paths or [CATALOGUE])
    mutants = sorted(load_mutants())
    claimed = [name for name in claimed_mutants(scenarios) if name in mutants]
    if not claimed:
        raise UsageError("no given scenario names a curated mutant in must_fail_under, so there is nothing to detect")
    lines = progress(args, len(claimed) + len(DETECTION_STRATEGIES))  # each claimed mutant, then coverage per strategy
    result = bench_detection(scenarios, mutants, root_seeds=args.seeds, max_runs=args.max_runs, coverage_runs=args.runs or 20,
                             jobs=args.jobs, on_done=lines.done)
    print(json.dumps(result, sort_keys=True) if args.json else render(result))
    return EXIT_OK


def _bench_classic(args: argparse.Namespace) -> int:
    from sim.bench.classic import bench_classic, render
    from sim.bench.classic_bugs import BUGS

    result = bench_classic(root_seeds=args.seeds, cap=args.cap, on_done=progress(args, len(BUGS)).done)
    print(json.dumps(result, sort_keys=True) if args.json else render(result))
    return EXIT_OK


def add_bench(commands: Any) -> None:
    bench = commands.add_parser("bench", help="measure the simulator (ratios measured in one run)")
    bench.add_argument("target", choices=["kernel", "scenarios", "detection", "classic"])
    bench.add_argument("paths", nargs="*", default=[], metavar="PATH", help="scenarios, detection: files or folders (default: the catalogue)")
    add_json_options(bench)
    bench.add_argument("--repeats", type=positive_int, default=5, help="kernel: measurements per runtime; the best is kept")
    bench.add_argument("--runs", type=positive_int, help="scenarios, detection's coverage: runs per scenario (default 20)")
    bench.add_argument("--seeds", type=positive_int, default=20, help="detection, classic: root seeds per mutant/bug, scenario and strategy")
    bench.add_argument("--cap", type=positive_int, default=2000, help="classic: runs before a search counts as undetected")
    bench.add_argument("--max-runs", type=positive_int, default=200, help="detection: runs before a search counts as undetected")
    bench.add_argument("-j", "--jobs", type=positive_int, default=os.cpu_count() or 1, help="detection: mutants measured at once")
    bench.set_defaults(handler=_bench)
