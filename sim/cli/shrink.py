"""`shrink`: a repro's run made minimal while the same invariant still fails."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sim.cli.common import (
    EXIT_VIOLATION,
    UsageError,
    add_json_options,
    add_mutant_option,
    add_report_option,
    exit_interrupted,
    progress,
    rerun_on_target,
    write_html,
)
from sim.cli.replay import check_mutant, load_repro, recorded_decisions, repro_scenario
from sim.core import stopping

SHRINK_LIMIT_S = 30.0


def _shrink(args: argparse.Namespace) -> int:
    """Shrink a repro's run; exit 1, since the shrunk run still shows the violation."""
    from sim.reports import text_report
    from sim.shrinking.scenario_shrinker import ShrinkError, shrink

    if args.time_limit <= 0:
        raise UsageError("--time-limit must be positive")
    repro_path = Path(args.repro)
    document = load_repro(repro_path)
    if not isinstance(document.get("invariant"), str):
        raise UsageError(f"{repro_path}: invariant: expected str in a repro file")
    check_mutant(repro_path, document, args.under_mutant)
    scenario = repro_scenario(repro_path, document)
    if (elsewhere := rerun_on_target([scenario], args.argv)) is not None:
        return elsewhere
    lines = progress(args, None)
    try:
        with stopping.graceful("stopping after the run in progress; the smallest run so far is written "
                               "(press Ctrl+C again to stop at once)"):
            result = shrink(scenario, document["seed"], recorded_decisions(repro_path, document), document["invariant"],
                            source=repro_path, out_dir=args.out or repro_path.parent, time_limit=args.time_limit,
                            mutant=args.under_mutant,
                            on_pass=lambda name, size: lines.done(f"{name}: {size.faults} faults, {size.drives} drives, "
                                                                  f"{size.decisions} decisions, {size.steps} steps"))
    except ShrinkError as error:
        raise UsageError(f"{repro_path}: {error}") from None
    if args.report is not None:
        write_html(args.report, result.report, text_report.replay_command(result.repro_path, args.under_mutant), args.under_mutant)
    print(json.dumps(result.as_dict(), sort_keys=True) if args.json else result.summary())
    if result.interrupted:
        return exit_interrupted(args, result.runs)
    return EXIT_VIOLATION


def add_shrink(commands: Any) -> None:
    shrink = commands.add_parser("shrink", help="minimise a repro's faults, drives and decisions while the same invariant fails")
    shrink.add_argument("repro", metavar="REPRO_FILE")
    shrink.add_argument("--time-limit", type=float, default=SHRINK_LIMIT_S, metavar="S", help=f"stop searching after S seconds (default {SHRINK_LIMIT_S:g})")
    shrink.add_argument("--out", type=Path, metavar="DIR", help="where the shrunk scenario and repro go (default: beside REPRO_FILE)")
    add_json_options(shrink)
    add_report_option(shrink, "the shrunk run")
    add_mutant_option(shrink)
    shrink.set_defaults(handler=_shrink)
