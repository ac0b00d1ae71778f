"""`releases`: the same scenarios on several targets side by side (the reference, hermes-agent release by release).

Each target's scenarios run in a process of that target (`python -m sim run --target T --json`); a cell says
what its runs showed, whatever the scenario expects: `pass` (every applicable invariant held), `FAIL <invariant>`
(the first violation, with its seed), `n/a` (none of the invariants it names applies to the target), or
`not expressible` (the target cannot do one of its drives, faults or settings: the reason is printed under the
table). Exit 0 once the table is printed: a failing cell is a finding about a release, not a fault of the
command; exit 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sim.cli.common import EXIT_OK, UsageError, add_json_options, load_scenarios, positive_int, progress
from sim.scenario import targets
from sim.scenario.scenario_error import ScenarioError


def _releases(args: argparse.Namespace) -> int:
    from sim.core import children
    from sim.scenario.loader import on_target

    try:
        wanted = [targets.parse(name.strip()) for name in args.targets.split(",") if name.strip()]
    except ValueError as error:
        raise UsageError(f"--targets: {error}") from None
    if not wanted:
        raise UsageError("--targets: expected targets separated by commas, like hermes==0.19.0,reference")
    scenarios = load_scenarios(args.paths)
    lines = progress(args, len(wanted))
    cells: dict[str, dict[str, str]] = {scenario.name: {} for scenario in scenarios}
    reasons: list[str] = []
    for target in wanted:
        runnable = []
        for scenario in scenarios:
            try:
                runnable.append(on_target(scenario, target))
            except ScenarioError as error:
                cells[scenario.name][target] = "not expressible"
                reasons.append(f"{scenario.name} on {target}: {error}")
        if runnable:
            command = [sys.executable, "-m", "sim", "run", *(str(s.path) for s in runnable), "--target", target, "--json",
                       "--no-shrink", "--out", str(args.out / target.replace("==", "-")), *(["--runs", str(args.runs)] if args.runs else [])]
            done = children.run(command, stdout=subprocess.PIPE, text=True, env=_env(target))
            for scenario, verdict in zip(runnable, _verdicts(done, target)):
                cells[scenario.name][target] = _cell(verdict)
        lines.done(f"{target}: {len(runnable)} of {len(scenarios)} scenarios")
    if args.json:
        print(json.dumps({"targets": wanted, "cells": cells, "not_expressible": reasons}, sort_keys=True))
    else:
        print(_table(cells, wanted))
        for reason in reasons:
            print(f"  {reason}")
    return EXIT_OK


def _env(target: str) -> dict[str, str]:
    return {**os.environ, targets.TARGET_ENV: target}


def _verdicts(done: subprocess.CompletedProcess[str], target: str) -> list[dict[str, Any]]:
    try:
        return json.loads(done.stdout)["scenarios"]
    except (json.JSONDecodeError, KeyError):
        raise UsageError(f"the run on {target} failed (exit {done.returncode}); run it alone to see why: "
                         f"python -m sim run PATH --target {target}") from None


def _cell(verdict: dict[str, Any]) -> str:
    if verdict["invariants_checked"] == 0:
        return "n/a"
    violation = verdict["violation"]
    if violation is None:
        return "pass"
    return f"FAIL {', '.join(verdict['violated'])} (seed {violation['seed']})"


def _table(cells: dict[str, dict[str, str]], wanted: list[str]) -> str:
    rows = [("scenario", *wanted)] + [(name, *(row.get(target, "") for target in wanted)) for name, row in cells.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def add_releases(commands: Any) -> None:
    releases = commands.add_parser("releases", help="run scenarios on several targets and print a scenario x target table")
    releases.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or folders")
    releases.add_argument("--targets", required=True, metavar="T,T,...",
                          help='targets separated by commas, like "hermes==0.16.0,hermes==0.19.0,reference"')
    releases.add_argument("--runs", type=positive_int, help="runs per scenario (default: the scenario's)")
    releases.add_argument("--out", type=Path, default=Path("out") / "releases", metavar="DIR", help="where repro files go")
    add_json_options(releases)
    releases.set_defaults(handler=_releases)
