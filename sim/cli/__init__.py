"""The command line: a thin layer over the Python API, one module per command.

Exit 0 all hold, 1 a violation, 2 bad input or usage. `--json` prints one JSON document on stdout and nothing
else there; every failure prints the command that replays it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from sim.cli.bench import add_bench
from sim.cli.common import EXIT_USAGE, STRATEGY_CHOICES, UsageError
from sim.cli.determinism import add_determinism
from sim.cli.explore import add_explore
from sim.cli.listing import add_list
from sim.cli.mutate import add_mutate
from sim.cli.replay import add_replay
from sim.cli.run import add_run
from sim.cli.shrink import add_shrink
from sim.cli.stress import add_stress

__all__ = ["STRATEGY_CHOICES", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sim", description="Deterministic simulation of context-compaction races.")
    commands = parser.add_subparsers(dest="command", required=True)
    for add in (add_run, add_replay, add_list, add_determinism, add_bench, add_explore, add_mutate, add_shrink, add_stress):
        add(commands)
    return parser


def under_mutant(args: argparse.Namespace) -> int:
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


def check_overlay() -> None:
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
        check_overlay()
        return under_mutant(args) if getattr(args, "mutant", None) else args.handler(args)
    except (ScenarioError, UsageError) as error:
        print(f"python -m sim {args.command}: {error}", file=sys.stderr)
        return EXIT_USAGE
