"""The command line: a thin layer over the Python API, one module per command.

Exit 0 all hold, 1 a violation, 2 bad input or usage, 130 interrupted. `--json` prints one JSON document on
stdout and nothing else there; every failure prints the command that replays it. `python -m sim` and the
`compaction-sim` console script are the same entry (`entry`), which makes Ctrl+C and SIGTERM stop requests
(`sim.core.stopping`).

Under `--mutant NAME` a command re-runs itself in a child process whose `reference` package is a mutated
copy; the parent tells the child which overlay and which mutant through two environment variables, and any
child whether its parent passes its stop requests on, through a third; `_from_parent` reads them here and
nowhere else. Below this module everything is an argument.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sim.cli.bench import add_bench, add_swarm_detect, add_swarm_race
from sim.cli.common import EXIT_USAGE, PROG, STRATEGY_CHOICES, UsageError, speaker
from sim.cli.determinism import add_determinism, add_digests
from sim.cli.explore import add_detect, add_explore
from sim.cli.listing import add_list
from sim.cli.mutate import add_mutate, add_trace_lines
from sim.cli.releases import add_releases
from sim.cli.replay import add_replay, recorded_mutant
from sim.cli.run import add_run
from sim.cli.shrink import add_shrink
from sim.cli.stress import add_stress
from sim.cli.swarm import add_merge, add_swarm, add_swarm_worker
from sim.scenario import targets

__all__ = ["STRATEGY_CHOICES", "build_parser", "entry", "main"]

# Commands one `python -m sim` runs in another (under each mutant, under each PYTHONHASHSEED); not for users.
INTERNAL = {"digests": add_digests, "detect": add_detect, "swarm-detect": add_swarm_detect, "swarm-race": add_swarm_race,
            "swarm-worker": add_swarm_worker, "trace-lines": add_trace_lines}


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Deterministic simulation of context-compaction races.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    for add in (add_run, add_replay, add_shrink, add_explore, add_mutate, add_list, add_determinism, add_bench, add_stress, add_swarm,
                add_merge, add_releases):
        add(commands)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("compaction-sim")
    except PackageNotFoundError:
        return "(not installed: run from a checkout)"


def _internal_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog)
    commands = parser.add_subparsers(dest="command", required=True)
    for add in INTERNAL.values():
        add(commands)
    return parser


@dataclass(frozen=True)
class FromParent:
    """What a parent `python -m sim` told this one: the overlay whose `reference` it must import, and its mutant."""

    overlay: Path | None
    mutant: str | None
    stops: str | None  # "listening" or "stopping": the parent passes its stop requests on (sim.core.stopping)


def _from_parent() -> FromParent:
    """The one place that reads the environment variables a parent process sets (see sim.mutation.mutants, sim.core.stopping).

    The stop variable is taken out of the environment: a process this one starts otherwise than through
    `sim.core.children` (a stress worker, a test run) has no parent passing stop requests on.
    """
    from sim.core.stopping import BY_PARENT_ENV
    from sim.mutation.mutants import NAME_ENV, OVERLAY_ENV

    overlay = os.environ.get(OVERLAY_ENV)
    return FromParent(Path(overlay) if overlay else None, os.environ.get(NAME_ENV) or None, os.environ.pop(BY_PARENT_ENV, None))


def under_mutant(mutant: str, argv: Sequence[str]) -> int:
    """Re-run this command in a child process whose `reference` package has the mutant applied; the child
    stops as the command does, so this process only waits for it."""
    from sim.core import children, stopping
    from sim.mutation.mutants import StaleMutant, load_mutants, mutant_process, overlay, require

    mutants = load_mutants()
    require([mutant], mutants)
    rest = [a for a in argv if a not in ("--mutant", mutant)]
    try:
        with overlay(mutants[mutant]) as folder, stopping.graceful():
            command, env = mutant_process(folder, mutant, rest)
            code = children.run(command, env=env).returncode
    except StaleMutant as stale:
        raise UsageError(str(stale)) from None
    return stopping.child_exit(code)


def check_overlay(parent: FromParent) -> None:
    """Under a mutant, the mutated copy must be the `reference` in use, or a survivor would be meaningless."""
    if parent.overlay is not None:
        import reference

        if not str(Path(reference.__file__).resolve()).startswith(str(parent.overlay.resolve())):
            raise UsageError(f"the mutant overlay {parent.overlay} is not the reference in use ({reference.__file__})")


def _mutant_to_apply(args: argparse.Namespace, parent: FromParent) -> str | None:
    """The mutant this command must re-run under: `--mutant`, or else the one its repro file records; None in
    the child that already runs under one (whose command checks that it is the right one)."""
    if parent.mutant is not None:
        return None
    wanted = getattr(args, "mutant", None)
    if wanted is None and (wanted := recorded_mutant(args)) is not None:
        print(f"{speaker(args)}: under mutant {wanted}, as the repro records", file=sys.stderr)
    return wanted


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    from sim.core import stopping
    from sim.mutation.mutants import CatalogueError
    from sim.scenario.scenario_error import ScenarioError

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _internal_parser(prog) if argv and argv[0] in INTERNAL else build_parser(prog)
    args = parser.parse_args(argv)
    args.argv = argv
    args.prog = prog
    parent = _from_parent()
    args.under_mutant = parent.mutant
    try:
        targets.enter_loaded()
        check_overlay(parent)
        mutant = _mutant_to_apply(args, parent)
        return under_mutant(mutant, argv) if mutant is not None else args.handler(args)
    except (ScenarioError, UsageError, CatalogueError, targets.TargetUnavailable) as error:
        print(f"{speaker(args)}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except stopping.Stopped:
        print(f"{speaker(args)}: {stopping.interrupted_after(stopping.runs_finished())}", file=sys.stderr)
        return stopping.EXIT_INTERRUPTED


def _invoked_as(program: str) -> str:
    """The name the user typed: the console script's own (`compaction-sim`), or `python -m sim`."""
    name = Path(program).name
    return PROG if name in ("__main__.py", "") else name


def entry() -> int:
    """The process entry (`python -m sim`, `compaction-sim`): Ctrl+C and SIGTERM stop the command (sim.core.stopping)."""
    from sim.core import stopping

    prog = _invoked_as(sys.argv[0])
    by_parent = _from_parent().stops
    stopping.install(by_parent, prog)
    try:
        return main(prog=prog)
    except KeyboardInterrupt:
        if by_parent is None:  # a child's parent says it for both
            print(f"{prog}: interrupted at once", file=sys.stderr)
        return stopping.EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): nothing left to say, and no traceback for it at exit either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        stopping.settled()
