"""`replay`: a repro file (or a scenario at a seed) again, byte for byte, with its timeline."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from sim.cli.common import EXIT_OK, EXIT_VIOLATION, UsageError, add_mutant_option, add_report_option, load_scenarios, write_html


def load_repro(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such repro file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: not a repro file ({error})") from None
    for key, kind in (("scenario", str), ("seed", int), ("decisions", list), ("decision_points", int)):
        if not isinstance(document, dict) or not isinstance(document.get(key), kind):
            raise UsageError(f"{path}: {key}: expected {kind.__name__} in a repro file")
    return document


def recorded_decisions(path: Path, document: dict[str, Any]) -> list[Any]:
    """A repro's decision list, expanded from the non-default choices it stores to every choice point."""
    from sim.strategies.serialization import expand

    try:
        return expand(document["decisions"], document["decision_points"])
    except (TypeError, ValueError) as error:
        raise UsageError(f"{path}: decisions: expected [position, kind, ...] entries within decision_points ({error})") from None


def _replay(args: argparse.Namespace) -> int:
    from sim import report
    from sim.kernel.errors import DivergenceError
    from sim.scenario.runner import run_once

    if args.seed is not None:
        scenario = load_scenarios([args.target])[0]
        result = run_once(scenario, args.seed)
        expected_digest = None
    else:
        repro_path = Path(args.target)
        document = load_repro(repro_path)
        scenario = load_scenarios([document["scenario"]])[0]
        try:
            result = run_once(scenario, document["seed"], recorded_decisions(repro_path, document))
        except DivergenceError as divergence:
            raise UsageError(f"{repro_path}: the recording no longer fits the code: {divergence}") from None
        expected_digest = document.get("digest")
    print(result.result.trace_text())
    if args.report is not None:
        write_html(args.report, result, _replay_text(args))
    if expected_digest is not None and expected_digest != result.result.digest():
        raise UsageError(f"{args.target}: the recording no longer fits the code: the replayed trace differs from the "
                         f"recorded one (digest {result.result.digest()[:16]}, recorded {expected_digest[:16]})")
    if expected_digest is not None:
        print(f"\ntrace digest {result.result.digest()[:16]}: identical to the recording")
    if result.violations:
        print("\n" + report.failure_block(result, None))
        return EXIT_VIOLATION
    print(f"\n{scenario.name} seed {result.seed}: all invariants hold")
    return EXIT_OK


def _replay_text(args: argparse.Namespace) -> str:
    """The command that replays what `replay` just ran: the repro file, or the scenario at its seed."""
    from sim import report

    if args.seed is None:
        return report.replay_command(Path(args.target))
    return f"python -m sim replay {shlex.quote(args.target)} --seed {args.seed}"


def add_replay(commands: Any) -> None:
    replay = commands.add_parser("replay", help="replay a repro file (or a scenario at --seed) and print its timeline")
    replay.add_argument("target", metavar="REPRO_FILE|SCENARIO")
    replay.add_argument("--seed", type=int, help="run this seed of the scenario instead of a repro file")
    add_report_option(replay, "the replayed run")
    add_mutant_option(replay)
    replay.set_defaults(handler=_replay)
