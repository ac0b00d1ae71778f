"""What every command shares: exit statuses, the usage error, loading scenarios, common options."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from sim.strategies.registry import STRATEGIES

EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_USAGE = 2
DEFAULT_OUT = Path("out")
STRATEGY_CHOICES = list(STRATEGIES)


class UsageError(Exception):
    """Bad input from the user: printed as one line on stderr, exit 2."""


def load_scenarios(paths: Sequence[str]) -> list[Any]:
    """Scenario files or folders, validated against this checkout's registry (ScenarioError on bad input)."""
    from sim.registry import registry
    from sim.scenario.loader import load_paths

    return load_paths([Path(p) for p in paths], registry())


def add_mutant_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--mutant", metavar="NAME", help="against a copy of the reference with this curated mutant applied")


def add_report_option(command: argparse.ArgumentParser, what: str) -> None:
    command.add_argument("--report", type=Path, metavar="FILE.html", help=f"write {what} as one self-contained HTML page")


def write_html(path: Path, run: Any, replay: str) -> None:
    from sim.html_report import write_report

    write_report(run, replay, path)
    print(f"report: {path}", file=sys.stderr)
