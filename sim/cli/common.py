"""What every command shares: exit statuses, the usage error, loading scenarios, common options."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.cli.progress import Progress
from sim.core import children, stopping
from sim.scenario import targets
from sim.scenario.catalogue import SCENARIOS_DIR
from sim.strategies.by_name import STRATEGIES

if TYPE_CHECKING:
    from sim.mutation.coverage_map import Obtained

PROG = "python -m sim"  # how the commands name themselves, unless run as the `compaction-sim` console script
EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_USAGE = 2
DEFAULT_OUT = Path("out")
COVERAGE_MAP = DEFAULT_OUT / "coverage-map.json"  # which reference lines each scenario runs (sim/mutation/coverage_map.py)
STRATEGY_CHOICES = list(STRATEGIES)
CATALOGUE = str(SCENARIOS_DIR)


class UsageError(Exception):
    """Bad input from the user: printed as one line on stderr, exit 2."""


def positive_int(text: str) -> int:
    """An argparse type: a count of runs, seeds or repeats, which must be at least 1 to prove anything."""
    return _int_at_least(text, 1, "a positive integer")


def seed_int(text: str) -> int:
    """An argparse type: a root seed, which is 0 or more (as in a scenario's `explore.seed`)."""
    return _int_at_least(text, 0, "an integer of at least 0")


def _int_at_least(text: str, low: int, expected: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
    return value


def load_scenarios(paths: Sequence[str], target: str | None = None) -> list[Any]:
    """Scenario files or folders, validated against this checkout's registry (ScenarioError on bad input), on
    `target` if given (`--target`), else each on its own."""
    from sim.scenario.loader import load_paths, on_target
    from sim.scenario.names import registry

    missing = [path for path in paths if not Path(path).exists()]
    if missing:
        raise UsageError(f"{missing[0]}: no such scenario file or folder (the catalogue is {CATALOGUE}, which "
                         f"commands use when given no PATH)")
    scenarios = load_paths([Path(p) for p in paths], registry())
    return scenarios if target is None else [on_target(scenario, target) for scenario in scenarios]


def add_target_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--target", metavar="TARGET",
                         help='run the scenarios on this system instead of their own: "reference" or a release like '
                              '"hermes==0.19.0" (which runs in a process of its own)')


def coverage_map(scenarios: Sequence[Any], jobs: int, lines: Progress) -> Obtained:
    """The catalogue's coverage map for a mutation check, built or reused, and said which on stderr."""
    from sim.mutation.coverage_map import obtain

    lines.say("coverage map: the reference lines each scenario runs, to run each mutant only where it can be killed")
    obtained = obtain(scenarios, COVERAGE_MAP, jobs)
    lines.say(obtained.summary())
    return obtained


def add_mutant_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--mutant", metavar="NAME", help="against a copy of the reference with this curated mutant applied (python -m sim list mutants)")


def add_report_option(command: argparse.ArgumentParser, what: str) -> None:
    command.add_argument("--report", type=Path, metavar="FILE.html", help=f"write {what} as one self-contained HTML page")


def add_json_options(command: argparse.ArgumentParser) -> None:
    """`--json`, and `--progress` to keep the progress lines on stderr under it."""
    command.add_argument("--json", action="store_true", help="print one JSON document on stdout (progress lines off)")
    command.add_argument("--progress", action="store_true", help="with --json: still print progress lines on stderr")


def speaker(args: argparse.Namespace) -> str:
    """How a command names itself on stderr: `python -m sim run`, or `compaction-sim run` as the console script."""
    return f"{getattr(args, 'prog', PROG)} {args.command}"


def progress(args: argparse.Namespace, total: int | None) -> Progress:
    """One line on stderr per finished unit: on by default, off under --json unless --progress."""
    return Progress(speaker(args), total, enabled=not args.json or args.progress)


def exit_interrupted(args: argparse.Namespace, count: int, unit: str = "run", of: int | None = None) -> int:
    """An interrupted command's last line (on stderr, under --json too: it is no progress line), and its exit status."""
    total = "" if of is None else f" of {of}"
    print(f"{speaker(args)}: {stopping.interrupted_after(count, unit)}{total}", file=sys.stderr)
    return stopping.EXIT_INTERRUPTED


def write_html(path: Path, run: Any, replay: str, mutant: str | None) -> None:
    from sim.reports.html_report import write_report

    write_report(run, replay, path, mutant)
    print(f"report: {path}", file=sys.stderr)


def rerun_on_target(scenarios: Sequence[Any], argv: Sequence[str]) -> int | None:
    """Run this command in the process of the scenarios' target when it is not this process's (its exit status);
    None when it runs here. Scenarios of several targets are a usage error: one command runs one target."""
    wanted = sorted({scenario.target for scenario in scenarios})
    if len(wanted) > 1:
        raise UsageError(f"these scenarios run on {', '.join(wanted)}: give one target's scenarios (or --target), or "
                         "compare targets with python -m sim releases")
    if not wanted or wanted[0] == targets.loaded():
        return None
    return in_target_process(wanted[0], argv)


def in_target_process(target: str, argv: Sequence[str]) -> int:
    """Re-run this command (with `argv`) in a child process that loads `target` first; its exit status. A stop
    request is passed to the child, which stops as the command does (a swarm keeps its results), so this process
    only waits for it."""
    env = {**os.environ, targets.TARGET_ENV: target}
    with stopping.graceful():
        code = children.run([sys.executable, "-m", "sim", *argv], env=env).returncode
    return stopping.child_exit(code)
