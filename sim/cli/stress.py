"""`stress`: the reference for real, several OS processes on one SQLite file, killed at random and checked.

Also reachable as `python -m reference stress` (reference/__main__.py hands the arguments over).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from contract.events import CommitArchived, CommitPublished, FenceCancelWon, LeaseAcquired, RealStoreBusyFired, TurnPersisted
from sim.cli.common import EXIT_OK, EXIT_VIOLATION, UsageError, speaker
from sim.core import stopping


def _stress(args: argparse.Namespace) -> int:
    from sim.mutation.mutants import load_mutants
    from sim.stress.stress_run import StressOptions, StressRun

    if args.duration <= 0 or args.processes < 1:
        raise UsageError("--duration must be positive and --processes at least 1")
    if args.stress_mutant is not None and args.stress_mutant not in load_mutants():
        raise UsageError(f"--mutant {args.stress_mutant}: no such mutant in mutants/")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="stress-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if any(workdir.iterdir()):
        raise UsageError(f"--workdir {workdir}: must be empty (the run writes its database and logs there)")
    options = StressOptions(args.duration, args.processes, args.seed, workdir, args.stress_mutant)
    with stopping.graceful("stopping: the workers stop cleanly, then the run is checked (press Ctrl+C again to stop at once)"):
        report = StressRun(options, lambda line: print(line, file=sys.stderr, flush=True)).run()
    document = _document(report)
    failed = bool(report.result.violations) or report.result.integrity != ["ok"]
    if args.json:
        print(json.dumps(document, sort_keys=True))
    else:
        _print(document)
    if failed or args.workdir is not None:
        print(f"database and logs: {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir)
    if report.interrupted:
        print(f"{speaker(args)}: interrupted after {report.elapsed_s:.1f}s of striking", file=sys.stderr)
        return stopping.EXIT_INTERRUPTED
    return EXIT_VIOLATION if failed else EXIT_OK


def _document(report: Any) -> dict[str, Any]:
    counts, events = report.counts, report.events
    return {
        "processes": report.options.processes, "duration_s": report.options.duration_s, "seed": report.options.seed,
        "mutant": report.options.mutant, "elapsed_s": round(report.elapsed_s, 1), "interrupted": report.interrupted,
        "kills": counts.kills, "sigint": counts.sigint, "sigkill": counts.sigkill, "pauses": counts.pauses,
        "restarts": counts.restarts,
        "exit_codes": counts.exits,
        "events": sum(events.values()),
        "acknowledged_messages": events.get(TurnPersisted.kind, 0),
        "commits": events.get(CommitArchived.kind, 0) + events.get(CommitPublished.kind, 0),
        "rotations": events.get(CommitPublished.kind, 0),
        "leases_acquired": events.get(LeaseAcquired.kind, 0),
        "hard_cancels": events.get(FenceCancelWon.kind, 0),
        "database_locked": events.get(RealStoreBusyFired.kind, 0),
        "planted_reclaims": report.result.reclaimed,
        "integrity": report.result.integrity,
        "invariants_checked": list(report.result.invariants),
        "violations": [violation.as_dict() for violation in report.result.violations],
    }


def _print(document: dict[str, Any]) -> None:
    for key in ("processes", "duration_s", "seed", "mutant", "interrupted", "kills", "sigint", "sigkill", "pauses", "restarts", "events",
                "acknowledged_messages", "commits", "rotations", "leases_acquired", "hard_cancels", "database_locked",
                "planted_reclaims", "integrity"):
        print(f"{key:>22}: {document[key]}")
    print(f"{'invariants checked':>22}: {len(document['invariants_checked'])}")
    for violation in document["violations"]:
        print(f"VIOLATION {violation['invariant']}: {violation['explanation']}")
    if not document["violations"]:
        print("all invariants hold")


def add_stress(commands: Any) -> None:
    stress = commands.add_parser("stress", help="run the reference for real: processes on one SQLite file, killed at random")
    stress.add_argument("--duration", type=float, default=60.0, help="seconds of striking before the clean stop (default 60)")
    stress.add_argument("--processes", type=int, default=4, help="worker processes at once (default 4)")
    stress.add_argument("--seed", type=int, default=0, help="seeds the schedule of actions and signals")
    stress.add_argument("--mutant", dest="stress_mutant", metavar="NAME",
                        help="the workers run a copy of the reference with this curated mutant applied")
    stress.add_argument("--workdir", type=Path, help="an empty folder for the database and logs (kept); default a temporary one, kept only on a violation")
    stress.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    stress.set_defaults(handler=_stress)
