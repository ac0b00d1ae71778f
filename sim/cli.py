"""The command line: a thin layer over the Python API. Exit 0 all hold, 1 a violation, 2 bad input."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_USAGE = 2


def _bench(args: argparse.Namespace) -> int:
    from sim.bench.kernel import bench_kernel

    report = bench_kernel(repeats=args.repeats)
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        for key, value in report.items():
            print(f"{key:>18}: {value}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sim", description="Deterministic simulation of context-compaction races.")
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("bench", help="measure the simulator (ratios measured in one run)")
    bench.add_argument("target", choices=["kernel"], help="kernel: steps per second against the raw loop and trio")
    bench.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    bench.add_argument("--repeats", type=int, default=5, help="measurements per runtime; the best is kept")
    bench.set_defaults(handler=_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
