"""`check-determinism`: each seed run in two processes with different PYTHONHASHSEED, digests compared."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from sim.cli.common import EXIT_OK, EXIT_VIOLATION, load_scenarios


def _digests(args: argparse.Namespace) -> int:
    from sim.scenario.runner import run_once
    from sim.timefreeze import frozen_time

    result: dict[str, list[str]] = {}
    with frozen_time():
        for scenario in load_scenarios(args.paths):
            result[scenario.name] = [run_once(scenario, seed).result.digest() for seed in range(args.seeds)]
    print(json.dumps(result, sort_keys=True))
    return EXIT_OK


def _check_determinism(args: argparse.Namespace) -> int:
    load_scenarios(args.paths)  # bad input is reported here, once, not by both subprocesses
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


def add_determinism(commands: Any) -> None:
    determinism = commands.add_parser("check-determinism", help="run each seed in two processes with different PYTHONHASHSEED and compare trace digests")
    determinism.add_argument("paths", nargs="+", metavar="PATH")
    determinism.add_argument("--seeds", type=int, default=5)
    determinism.set_defaults(handler=_check_determinism)

    digests = commands.add_parser("digests", help=argparse.SUPPRESS)
    digests.add_argument("paths", nargs="+")
    digests.add_argument("--seeds", type=int, default=5)
    digests.set_defaults(handler=_digests)
