"""What `run` and `replay` print: the verdict table, and for a failure its timeline, explanation and repro.

A failure is only useful if a person can act on it: the violated invariant in one line, the events around
its witnesses (witnesses marked `>`), and the one command that replays the run exactly.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from contract.history import HistoryEvent
from sim.core.trace import render_text
from sim.scenario.catalogue import content_hash, scenario_reference
from sim.scenario.runner import RunReport, Verdict
from sim.strategies.serialization import sparse

CONTEXT_EVENTS = 6
REPRO_FORMAT = 2  # 2: the scenario relative to its repository root, its hash and text, and the mutant
SEAL_HEX = 16


def verdict_table(verdicts: Iterable[Verdict], more_problems: Mapping[str, Sequence[str]] | None = None) -> str:
    """One row per scenario; `more_problems` (by scenario name) are failures found outside its runs."""
    rows = [("scenario", "runs", "steps", "invariants", "violations", "time", "verdict")]
    for verdict in verdicts:
        passed = verdict.passed and not (more_problems or {}).get(verdict.scenario.name)
        rows.append((
            verdict.scenario.name, str(verdict.runs), str(verdict.steps), str(verdict.invariants_checked),
            str(verdict.violating_runs), f"{verdict.cpu_s:.2f}s", verdict_state(verdict, passed),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths))) for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def verdict_state(verdict: Verdict, passed: bool) -> str:
    """pass, FAIL, or stopped: a stop request ended its runs before any failed."""
    if passed:
        return "pass"
    return "stopped" if verdict.interrupted and not verdict.violating_runs else "FAIL"


def timeline_around(history: Sequence[HistoryEvent], witnesses: Sequence[int]) -> str:
    """The events within a few of each witness, in order, witnesses marked with `>`."""
    if not witnesses:
        shown = list(history[-2 * CONTEXT_EVENTS:])
    else:
        keep = {i for seq in witnesses for i in range(seq - CONTEXT_EVENTS, seq + CONTEXT_EVENTS + 1) if 0 <= i < len(history)}
        shown = [history[i] for i in sorted(keep)]
    lines = []
    previous = None
    for event, text in zip(shown, render_text(shown).splitlines()):
        if previous is not None and event.seq != previous + 1:
            lines.append("   ...")
        lines.append(("> " if event.seq in witnesses else "  ") + text)
        previous = event.seq
    return "\n".join(lines)


def repro_document(report: RunReport, mutant: str | None) -> dict[str, Any]:
    """What replays the run anywhere: the scenario by root-relative path, hash and text, and the mutant it ran under.

    The text is kept so that when the file has changed since, replay can say what differs.
    """
    violation = report.violations[0]
    path = Path(report.scenario.path)
    return {
        "format": REPRO_FORMAT,
        "scenario": scenario_reference(path),
        "scenario_sha256": content_hash(path),
        "scenario_text": path.read_text(encoding="utf-8"),
        "mutant": mutant,
        "name": report.scenario.name,
        "seed": report.seed,
        "strategy": report.result.strategy,
        "invariant": violation.invariant,
        "explanation": violation.explanation,
        "digest": report.result.digest(),
        "decision_points": len(report.result.decisions),
        "decisions": sparse(report.result.decisions),
        "seal": seal({"seed": report.seed, "invariant": violation.invariant, "decisions": sparse(report.result.decisions)}),
    }


def seal(values: Mapping[str, Any]) -> dict[str, str]:
    """A digest of each value a hand may edit and a replay cannot tell edited: a run replays from its decisions
    whatever seed the file names, its trace does not say which invariant the file claims, and an edited decision
    would read as code that changed since. A hand edit breaks the seal, and is named as such."""
    return {key: hashlib.sha256(f"{key}={value!r}".encode()).hexdigest()[:SEAL_HEX] for key, value in values.items()}


def write_repro(report: RunReport, out_dir: Path, *, mutant: str | None = None) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{report.scenario.name}-seed{report.seed}.repro.json"
    path.write_text(json.dumps(repro_document(report, mutant), indent=1) + "\n", encoding="utf-8")
    return path


def replay_command(repro: Path, mutant: str | None = None) -> str:
    """The command that replays `repro` from any directory; it names the mutant the run was made under."""
    return f"python -m sim replay {shlex.quote(str(repro.resolve()))}" + (f" --mutant {shlex.quote(mutant)}" if mutant else "")


def failure_block(report: RunReport, repro: Path | None, *, mutant: str | None = None) -> str:
    violation = report.violations[0]
    lines = [
        f"FAIL {report.scenario.name}: {violation.invariant} (seed {report.seed}, {report.result.steps} steps, "
        f"{len(sparse(report.result.decisions))} decisions)",
        f"  {violation.explanation}",
        "",
        timeline_around(report.result.history, violation.witnesses),
    ]
    if repro is not None:
        lines += ["", f"  repro: {repro}", f"  replay: {replay_command(repro, mutant)}"]
    return "\n".join(lines)


def verdict_json(verdict: Verdict, repro: Path | None, *, mutant: str | None = None,
                 more_problems: Sequence[str] = ()) -> dict[str, Any]:
    failing = verdict.failing
    problems = verdict.problems() + list(more_problems)
    return {
        "scenario": verdict.scenario.name,
        "path": str(verdict.scenario.path),
        "passed": not problems,
        "interrupted": verdict.interrupted,
        "problems": problems,
        "runs": verdict.runs,
        "steps": verdict.steps,
        "invariants_checked": verdict.invariants_checked,
        "violating_runs": verdict.violating_runs,
        "faults_fired": verdict.fired,
        "seconds": round(verdict.cpu_s, 4),
        "violation": None if failing is None else {**failing.violations[0].as_dict(), "seed": failing.seed},
        "violated": [] if failing is None else sorted({violation.invariant for violation in failing.violations}),
        "replay": None if repro is None else replay_command(repro, mutant),
    }
