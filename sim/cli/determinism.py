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

from sim import stopping
from sim.cli.common import (
    CATALOGUE, EXIT_OK, EXIT_VIOLATION, add_json_options, exit_interrupted, load_scenarios, positive_int, progress,
    speaker,
)
from sim.cli.progress import Progress, Throttled
from sim.words import counted

HASH_SEEDS = ("1", "2")


def _digests(args: argparse.Namespace) -> int:
    from sim.scenario.runner import run_once
    from sim.timefreeze import frozen_time

    scenarios = load_scenarios(args.paths)
    command = f"{args.prog} check-determinism ({args.progress})"  # it speaks for the command that started it
    lines = Progress(command, len(scenarios), enabled=args.progress is not None)
    alive = Throttled(command, enabled=args.progress is not None)
    result: dict[str, list[str]] = {}
    with frozen_time(), stopping.graceful():
        for scenario in scenarios:
            seeds = stopping.Until(range(args.seeds))
            result[scenario.name] = digests = []
            for seed in seeds:
                digests.append(run_once(scenario, seed).result.digest())
                alive.done(f"{scenario.name}: {seed + 1} seeds so far")
            if seeds.cut:
                break
            lines.done(f"{scenario.name}: {args.seeds} seeds")
    print(json.dumps(result, sort_keys=True))
    return stopping.EXIT_INTERRUPTED if stopping.requested() else EXIT_OK


def _check_determinism(args: argparse.Namespace) -> int:
    from sim import children

    paths = args.paths or [CATALOGUE]
    load_scenarios(paths)  # bad input is reported here, once, not by both subprocesses
    lines = progress(args, None)
    runs = []
    with stopping.graceful():
        for hash_seed in HASH_SEEDS:
            command = [sys.executable, "-m", "sim", "digests", *paths, "--seeds", str(args.seeds)]
            label = ["--progress", f"PYTHONHASHSEED={hash_seed}"] if lines.enabled else []
            done = children.run(command + label, stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONHASHSEED": hash_seed})
            if stopping.requested():
                runs.append(json.loads(done.stdout or "{}"))
                break
            if done.returncode != 0:
                print(f"{speaker(args)}: the run with PYTHONHASHSEED={hash_seed} failed (exit {done.returncode})", file=sys.stderr)
                return EXIT_VIOLATION
            runs.append(json.loads(done.stdout))
    first, second = (runs + [{}])[:2]
    differences = [(name, seed) for name in first for seed, (a, b) in enumerate(zip(first[name], second.get(name, []))) if a != b]
    compared = sum(min(len(digests), len(second.get(name, []))) for name, digests in first.items())
    interrupted = stopping.requested()
    summary = _summary(first, args.seeds, compared, len(differences), interrupted)
    if args.json:
        print(json.dumps({"scenarios": len(first), "seeds": args.seeds, "runs": compared,
                          "passed": not differences and not interrupted, "interrupted": interrupted,
                          "differences": [{"scenario": name, "seed": seed} for name, seed in differences]}, sort_keys=True))
    else:
        for name, seed in differences:
            print(f"DIFFERS {name} seed {seed}: {first[name][seed][:16]} (PYTHONHASHSEED=1) vs {second[name][seed][:16]} (PYTHONHASHSEED=2)")
        print(summary)
    if interrupted:
        return exit_interrupted(args, sum(map(len, first.values())) + sum(map(len, second.values())))
    return EXIT_VIOLATION if differences else EXIT_OK


def _summary(first: dict[str, list[str]], seeds: int, compared: int, differences: int, interrupted: bool) -> str:
    if interrupted:
        return f"{counted(compared, 'run')} compared in two processes before the interrupt: {counted(differences, 'difference')}"
    return (f"{counted(len(first), 'scenario')} x {counted(seeds, 'seed')} = {counted(compared, 'run')} in two processes: "
            f"{counted(differences, 'difference')}")


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
