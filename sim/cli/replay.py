"""`replay`: a repro file (or a scenario at a seed) again, byte for byte, with its timeline.

A repro file records the mutant its run was made under, and replay applies it again without being told;
it finds the scenario from any directory (sim.scenario.catalogue) and refuses one that has changed since, showing
what differs, rather than replaying a different scenario.
"""

from __future__ import annotations

import argparse
import difflib
import json
import shlex
from pathlib import Path
from typing import Any

from sim.cli.common import EXIT_OK, EXIT_VIOLATION, UsageError, add_mutant_option, add_report_option, load_scenarios, rerun_on_target, seed_int, write_html

DIFF_LINES_MAX = 20
UNMODIFIED = "no mutant (the unmodified reference)"
EDITED_HINTS = {
    "seed": "a repro replays its recorded decisions, whatever the seed: to run the scenario at another seed, give "
            "python -m sim replay the scenario file and --seed",
    "invariant": "a repro names the invariant its run violated, and the replay shows it",
    "decisions": "a repro replays exactly the decisions it recorded: to steer a run otherwise, shrink it or explore",
}


def load_repro(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such repro file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: not a repro file ({error})") from None
    if isinstance(document, dict) and isinstance(document.get("program"), str) and "scenario" not in document:
        raise UsageError(f"{path}: a program's repro file (of {document['program']}): replay it from Python with "
                         f"sim.replay({str(path)!r}, program), or a marked test with python -m pytest NODEID --sim-replay {path}")
    for key, kind in (("scenario", str), ("seed", int), ("decisions", list), ("decision_points", int)):
        if not isinstance(document, dict) or not isinstance(document.get(key), kind):
            raise UsageError(f"{path}: {key}: expected {kind.__name__} in a repro file")
    _check_seal(path, document)
    return document


def _check_seal(path: Path, document: dict[str, Any]) -> None:
    """The seal notices a seed, invariant or decision list edited by hand, which a replay would not tell from a
    change to the code (a file written before seals has none)."""
    from sim.reports.text_report import seal

    sealed = document.get("seal")
    if not isinstance(sealed, dict):
        return
    for key, hint in EDITED_HINTS.items():
        if key in sealed and seal({key: document.get(key)})[key] != sealed[key]:
            value, noun = ("this list", "decision list") if key == "decisions" else (repr(document.get(key)), key)
            raise UsageError(f"{path}: {key}: {value} is not the {noun} this run was recorded with (the file was edited "
                             f"since it was written); {hint}")


def recorded_decisions(path: Path, document: dict[str, Any]) -> list[Any]:
    """A repro's decision list, expanded from the non-default choices it stores to every choice point."""
    from sim.strategies.serialization import expand

    try:
        return expand(document["decisions"], document["decision_points"])
    except (TypeError, ValueError) as error:
        raise UsageError(f"{path}: decisions: expected [position, kind, ...] entries within decision_points ({error})") from None


def recorded_mutant(args: argparse.Namespace) -> str | None:
    """The mutant the repro file this command reads was recorded under; None if none, or if it is no repro."""
    target = args.target if args.command == "replay" and args.seed is None else getattr(args, "repro", None)
    if target is None:
        return None
    try:
        document = json.loads(Path(target).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None  # the command itself reports what is wrong with the file
    mutant = document.get("mutant") if isinstance(document, dict) else None
    return mutant if isinstance(mutant, str) else None


def check_mutant(path: Path, document: dict[str, Any], active: str | None) -> None:
    """The run must replay against the code it was recorded on: the same mutant, or none."""
    if "mutant" not in document:
        return  # an older repro: the digest check still catches a replay against other code
    recorded = document["mutant"]
    if recorded != active:
        raise UsageError(f"{path}: recorded under {f'mutant {recorded}' if recorded else UNMODIFIED}, "
                         f"replayed under {f'mutant {active}' if active else UNMODIFIED}")


def repro_scenario(path: Path, document: dict[str, Any]) -> Any:
    """The scenario a repro names, found from any directory, and still the file it was recorded from."""
    from sim.scenario.catalogue import content_hash, find_scenario

    reference = document["scenario"]
    found = find_scenario(reference, path)
    if found is None:
        raise UsageError(f"{path}: scenario {reference}: not found under the repository above the repro file, the one "
                         f"above the current directory, or the installed catalogue")
    recorded = document.get("scenario_sha256")
    if recorded is not None and content_hash(found) != recorded:
        raise UsageError(f"{path}: scenario {found} has changed since the repro was recorded "
                         f"(sha256 {content_hash(found)[:12]}, recorded {recorded[:12]}):\n"
                         + _difference(document.get("scenario_text"), found))
    return load_scenarios([str(found)])[0]


def _difference(recorded_text: Any, current: Path) -> str:
    if not isinstance(recorded_text, str):
        return "  (the repro does not hold the recorded text)"
    lines = list(difflib.unified_diff(recorded_text.splitlines(), current.read_text(encoding="utf-8").splitlines(),
                                      "recorded", str(current), lineterm="", n=1))
    shown = lines[:DIFF_LINES_MAX] + ([f"... {len(lines) - DIFF_LINES_MAX} more lines"] if len(lines) > DIFF_LINES_MAX else [])
    return "\n".join(f"  {line}" for line in shown)


def _replay(args: argparse.Namespace) -> int:
    from sim.kernel.errors import DivergenceError
    from sim.reports import text_report
    from sim.scenario.runner import run_once

    if args.seed is not None:
        scenario = load_scenarios([args.target])[0]
        if (elsewhere := rerun_on_target([scenario], args.argv)) is not None:
            return elsewhere
        result = run_once(scenario, args.seed)
        expected_digest = None
    else:
        repro_path = Path(args.target)
        document = load_repro(repro_path)
        check_mutant(repro_path, document, args.under_mutant)
        scenario = repro_scenario(repro_path, document)
        if (elsewhere := rerun_on_target([scenario], args.argv)) is not None:
            return elsewhere
        try:
            result = run_once(scenario, document["seed"], recorded_decisions(repro_path, document))
        except DivergenceError as divergence:
            raise UsageError(f"{repro_path}: the recording no longer fits the code: {divergence}") from None
        expected_digest = document.get("digest")
    print(result.result.trace_text())
    if args.report is not None:
        write_html(args.report, result, _replay_text(args), args.under_mutant)
    if expected_digest is not None and expected_digest != result.result.digest():
        raise UsageError(f"{args.target}: the recording no longer fits the code: the replayed trace differs from the "
                         f"recorded one (digest {result.result.digest()[:16]}, recorded {expected_digest[:16]})")
    if expected_digest is not None:
        print(f"\ntrace digest {result.result.digest()[:16]}: identical to the recording")
    if result.violations:
        print("\n" + text_report.failure_block(result, None, mutant=args.under_mutant))
        return EXIT_VIOLATION
    print(f"\n{scenario.name} seed {result.seed}: all invariants hold")
    return EXIT_OK


def _replay_text(args: argparse.Namespace) -> str:
    """The command that replays what `replay` just ran: the repro file, or the scenario at its seed."""
    from sim.reports import text_report

    if args.seed is None:
        return text_report.replay_command(Path(args.target), args.under_mutant)
    mutant = f" --mutant {shlex.quote(args.under_mutant)}" if args.under_mutant else ""
    return f"python -m sim replay {shlex.quote(str(Path(args.target).resolve()))} --seed {args.seed}{mutant}"


def add_replay(commands: Any) -> None:
    replay = commands.add_parser("replay", help="replay a repro file (or a scenario at --seed) and print its timeline")
    replay.add_argument("target", metavar="REPRO_FILE|SCENARIO")
    replay.add_argument("--seed", type=seed_int, help="run this seed of the scenario instead of a repro file")
    add_report_option(replay, "the replayed run")
    add_mutant_option(replay)
    replay.set_defaults(handler=_replay)
