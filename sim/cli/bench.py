"""`bench`: the simulator measured against the raw loop and trio, the catalogue's run rates, detection, and
the classic concurrency bugs."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from sim.cli.common import EXIT_OK, load_scenarios


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

        result = bench_scenarios(load_scenarios(args.paths or ["scenarios"]), runs=args.runs or 20)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        for key, value in result.items():
            print(f"{key:>26}: {value}")
    return EXIT_OK


def _bench_detection(args: argparse.Namespace) -> int:
    from sim.bench.detection import bench_detection, render
    from sim.mutants import load_mutants

    result = bench_detection(load_scenarios(args.paths or ["scenarios"]), sorted(load_mutants()), root_seeds=args.seeds,
                             max_runs=args.max_runs, coverage_runs=args.runs or 20, jobs=args.jobs)
    print(json.dumps(result, sort_keys=True) if args.json else render(result))
    return EXIT_OK


def _bench_classic(args: argparse.Namespace) -> int:
    from sim.bench.classic import bench_classic, print_progress, render

    result = bench_classic(root_seeds=args.seeds, cap=args.cap, progress=print_progress)
    print(json.dumps(result, sort_keys=True) if args.json else render(result))
    return EXIT_OK


def add_bench(commands: Any) -> None:
    bench = commands.add_parser("bench", help="measure the simulator (ratios measured in one run)")
    bench.add_argument("target", choices=["kernel", "scenarios", "detection", "classic"])
    bench.add_argument("paths", nargs="*", metavar="PATH", help="scenarios: files or folders (default: scenarios/)")
    bench.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    bench.add_argument("--repeats", type=int, default=5, help="kernel: measurements per runtime; the best is kept")
    bench.add_argument("--runs", type=int, help="scenarios, detection's coverage: runs per scenario (default 20)")
    bench.add_argument("--seeds", type=int, default=20, help="detection, classic: root seeds per mutant/bug, scenario and strategy")
    bench.add_argument("--cap", type=int, default=2000, help="classic: runs before a search counts as undetected")
    bench.add_argument("--max-runs", type=int, default=200, help="detection: runs before a search counts as undetected")
    bench.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="detection: mutants measured at once")
    bench.set_defaults(handler=_bench)
