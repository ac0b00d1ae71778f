"""`check-determinism`: each seed run in two processes with different PYTHONHASHSEED, digests compared.

The two processes run the internal `digests` command; their progress lines (one per scenario) go straight
to this process's stderr, labelled with their PYTHONHASHSEED.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from sim.cli.common import CATALOGUE, EXIT_OK, EXIT_VIOLATION, add_json_options, load_scenarios, positive_int, progress
from sim.cli.progress import Progress

HASH_SEEDS = ("1", "2")


def _digests(args: argparse.Namespace) -> int:
    from sim.scenario.runner import run_once
    from sim.timefreeze import frozen_time

    scenarios = load_scenarios(args.paths)
    lines = Progress(f"python -m sim check-determinism ({args.progress})", len(scenarios), enabled=args.progress is not None)
    result: dict[str, list[str]] = {}
    with frozen_time():
        for scenario in scenarios:
            result[scenario.name] = [run_once(scenario, seed).result.digest() for seed in range(args.seeds)]
            lines.done(f"{scenario.name}: {args.seeds} seeds")
    print(json.dumps(result, sort_keys=True))
    return EXIT_OK


def _check_determinism(args: argparse.Namespace) -> int:
    from sim import children

    paths = args.paths or [CATALOGUE]
    load_scenarios(paths)  # bad input is reported here, once, not by both subprocesses
    lines = progress(args, None)
    runs = []
    for hash_seed in HASH_SEEDS:
        command = [sys.executable, "-m", "sim", "digests", *paths, "--seeds", str(args.seeds)]
        label = ["--progress", f"PYTHONHASHSEED={hash_seed}"] if lines.enabled else []
        done = children.run(command + label, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONHASHSEED": hash_seed})
        if done.returncode != 0:
            print(f"python -m sim check-determinism: the run with PYTHONHASHSEED={hash_seed} failed (exit {done.returncode})", file=sys.stderr)
            return EXIT_VIOLATION
        runs.append(json.loads(done.stdout))
    first, second = runs
    differences = [(name, seed) for name in first for seed, (a, b) in enumerate(zip(first[name], second[name])) if a != b]
    total = sum(len(digests) for digests in first.values())
    summary = f"{len(first)} scenarios x {args.seeds} seeds = {total} runs in two processes: {len(differences)} differences"
    if args.json:
        print(json.dumps({"scenarios": len(first), "seeds": args.seeds, "runs": total, "passed": not differences,
                          "differences": [{"scenario": name, "seed": seed} for name, seed in differences]}, sort_keys=True))
        return EXIT_VIOLATION if differences else EXIT_OK
    for name, seed in differences:
        print(f"DIFFERS {name} seed {seed}: {first[name][seed][:16]} (PYTHONHASHSEED=1) vs {second[name][seed][:16]} (PYTHONHASHSEED=2)")
    print(summary)
    return EXIT_VIOLATION if differences else EXIT_OK


def add_determinism(commands: Any) -> None:
    determinism = commands.add_parser("check-determinism", help="run each seed in two processes with different PYTHONHASHSEED and compare trace digests")
    determinism.add_argument("paths", nargs="*", default=[], metavar="PATH", help="scenario files or folders (default: the catalogue)")
    determinism.add_argument("--seeds", type=positive_int, default=5, help="seeds per scenario, from 0 (default 5)")
    add_json_options(determinism)
    determinism.set_defaults(handler=_check_determinism)


def add_digests(commands: Any) -> None:
    """The internal command each of check-determinism's two processes runs."""
    digests = commands.add_parser("digests")
    digests.add_argument("paths", nargs="+")
    digests.add_argument("--seeds", type=positive_int, default=5)
    digests.add_argument("--progress", metavar="LABEL", help="print progress lines, labelled so")
    digests.set_defaults(handler=_digests)
