"""`check-determinism`: each seed run in two processes with different PYTHONHASHSEED, digests compared.

Scenario files and folders, and programs (`--programs MODULE:FUNCTION` or `MODULE:MAPPING`, async or thread
programs as `sim.explore` takes them, each seed run under one portfolio in seed order, the same in both
processes). Every program runs in one batch (one patched standard library, as a campaign's searches share
it), the second process in reverse order: a program whose runs depend on what an earlier one left behind in
the batch shows as a difference. The two processes run the internal `digests` command; their progress lines
(one per scenario or program) go straight to this process's stderr, labelled with their PYTHONHASHSEED.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from sim.cli.common import (
    CATALOGUE,
    EXIT_OK,
    EXIT_VIOLATION,
    UsageError,
    add_json_options,
    add_target_option,
    exit_interrupted,
    load_scenarios,
    positive_int,
    progress,
    speaker,
)
from sim.cli.progress import Progress, Throttled
from sim.core import stopping
from sim.core.words import counted
from sim.scenario import targets

HASH_SEEDS = ("1", "2")


def _digests(args: argparse.Namespace) -> int:
    from sim.core.timefreeze import frozen_time
    from sim.programs.runnable import batch
    from sim.scenario.runner import run_once

    scenarios = load_scenarios(args.paths, args.target) if args.paths else []
    programs = _programs(args.programs)
    command = f"{args.prog} check-determinism ({args.progress})"  # it speaks for the command that started it
    lines = Progress(command, len(scenarios) + len(programs), enabled=args.progress is not None)
    alive = Throttled(command, enabled=args.progress is not None)
    result: dict[str, list[str]] = {}
    with frozen_time(), stopping.graceful():
        for scenario in scenarios:
            seeds = stopping.Until(range(args.seeds))
            result[scenario.name] = digests = []
            with targets.batch(scenario):  # one batch for a scenario's seeds, as an exploration's
                for seed in seeds:
                    digests.append(run_once(scenario, seed).result.digest())
                    alive.done(f"{scenario.name}: {seed + 1} seeds so far")
            if seeds.cut:
                break
            lines.done(f"{scenario.name}: {args.seeds} seeds")
        ordered = list(programs.items())
        if args.reverse:
            ordered.reverse()
        with batch():
            for name, program in ordered:
                if stopping.requested():
                    break
                result[f"program {name}"] = _program_digests(program, args.seeds)
                lines.done(f"program {name}: {args.seeds} seeds")
    print(json.dumps(result, sort_keys=True))
    return stopping.EXIT_INTERRUPTED if stopping.requested() else EXIT_OK


def _one_target(scenarios: list[Any]) -> str:
    """The target the digest processes run (they load it first); one per check."""
    wanted = sorted({scenario.target for scenario in scenarios}) or [targets.REFERENCE]
    if len(wanted) > 1:
        raise UsageError(f"these scenarios run on {', '.join(wanted)}: check one target's scenarios at a time (or give --target)")
    return wanted[0]


def _programs(references: list[str]) -> dict[str, Any]:
    from sim.programs.runnable import resolve

    found: dict[str, Any] = {}
    for reference in references:
        try:
            found.update(resolve(reference))
        except ValueError as error:
            raise UsageError(f"--programs {error}") from None
    return found


def _program_digests(main: Any, seeds: int) -> list[str]:
    """Each seed's trace digest, the runs in seed order under one portfolio (what an exploration does)."""
    from sim.core.world import World
    from sim.programs.runnable import Program, Settings
    from sim.strategies.portfolio import Portfolio

    program, strategy = Program(main, (), Settings()), Portfolio()
    with program.batch():
        return [program.run(World(seed, strategy)).digest() for seed in range(seeds)]


def _check_determinism(args: argparse.Namespace) -> int:
    from sim.core import children

    paths = args.paths or ([] if args.programs else [CATALOGUE])
    scenarios = load_scenarios(paths, args.target) if paths else []  # bad input is reported here, once
    _programs(args.programs)
    target = _one_target(scenarios)
    lines = progress(args, None)
    runs = []
    with stopping.graceful():
        for hash_seed, order in zip(HASH_SEEDS, ([], ["--reverse"])):
            programs = [option for reference in args.programs for option in ("--programs", reference)] + order
            retarget = ["--target", args.target] if args.target else []
            command = [sys.executable, "-m", "sim", "digests", *paths, *programs, *retarget, "--seeds", str(args.seeds)]
            label = ["--progress", f"PYTHONHASHSEED={hash_seed}"] if lines.enabled else []
            done = children.run(command + label, stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONHASHSEED": hash_seed, targets.TARGET_ENV: target})
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
    return (f"{counted(len(first), 'scenario or program', 'scenarios and programs')} x {counted(seeds, 'seed')} = {counted(compared, 'run')} in two processes: "
            f"{counted(differences, 'difference')}")


def add_determinism(commands: Any) -> None:
    determinism = commands.add_parser("check-determinism", help="run each seed in two processes with different PYTHONHASHSEED and compare trace digests")
    determinism.add_argument("paths", nargs="*", default=[], metavar="PATH",
                             help="scenario files or folders (default: the catalogue, unless --programs is given)")
    determinism.add_argument("--programs", action="append", default=[], metavar="MODULE:NAME",
                             help="programs too: a function, or a dict of name -> program (repeatable)")
    determinism.add_argument("--seeds", type=positive_int, default=5, help="seeds per scenario, from 0 (default 5)")
    add_json_options(determinism)
    add_target_option(determinism)
    determinism.set_defaults(handler=_check_determinism)


def add_digests(commands: Any) -> None:
    """The internal command each of check-determinism's two processes runs."""
    digests = commands.add_parser("digests")
    digests.add_argument("paths", nargs="*")
    digests.add_argument("--programs", action="append", default=[])
    digests.add_argument("--target")
    digests.add_argument("--seeds", type=positive_int, default=5)
    digests.add_argument("--progress", metavar="LABEL", help="print progress lines, labelled so")
    digests.add_argument("--reverse", action="store_true", help="run the programs in reverse order")
    digests.set_defaults(handler=_digests)
