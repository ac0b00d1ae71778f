"""The other tools on the thread bugs, measured in the same run as the simulator: frontrun and interleave-test.

Each runs in a child process of its own (`peer_runner.py`): frontrun under its launcher, which the package
installs as the `frontrun` command (it refuses to explore without it); interleave-test on a Python 3.12 or
newer that has it installed (`--peer-python`, else the first `python3.12`/`python3.13` on the PATH that can
import it). A tool that is not installed is reported as such, with how to get it, never silently left out.
The figures per tool and strategy: runs to the first failure over the same root seeds and cap as the
simulator's (a systematic search without a seed runs once), and runs per CPU second of the child.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sim.bench.figures import summary

RUNNER = Path(__file__).resolve().parent / "peer_runner.py"
PEER_PYTHONS = ("python3.12", "python3.13", "python3.14")


def frontrun_command() -> tuple[list[str] | None, str]:
    """The command that runs the peer runner under frontrun's launcher, or None and why not."""
    launcher = shutil.which("frontrun")
    if launcher is None:
        return None, "frontrun is not installed (pip install 'compaction-sim[peers]' installs frontrun 0.7.0)"
    return [launcher, sys.executable, "-P", str(RUNNER), "frontrun"], ""


def interleave_command(python: str | None) -> tuple[list[str] | None, str]:
    """The command that runs the peer runner on a Python that has interleave-test, or None and why not."""
    candidates = [python] if python else [found for name in PEER_PYTHONS if (found := shutil.which(name))]
    for candidate in candidates:
        probe = subprocess.run([candidate, "-c", "import interleave_test"], capture_output=True)
        if probe.returncode == 0:
            return [candidate, "-P", str(RUNNER), "interleave-test"], ""
    tried = ", ".join(candidates) or "no python3.12 or newer on the PATH"
    return None, f"interleave-test needs Python >= 3.12 with it installed (pip install interleave-test); tried: {tried}"


def measure_peers(bugs: Sequence[str], roots: int, cap: int, peer_python: str | None,
                  on_done: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every peer tool on every bug: {"tools": {tool: available or why not}, "bugs": {bug: {strategy: figures}}}."""
    tools: dict[str, str] = {}
    by_bug: dict[str, dict[str, Any]] = {name: {} for name in bugs}
    for tool, (command, missing) in (("frontrun", frontrun_command()), ("interleave-test", interleave_command(peer_python))):
        if command is None:
            tools[tool] = missing
            continue
        done = subprocess.run([*command, "--roots", str(roots), "--cap", str(cap), "--bugs", ",".join(bugs)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            tools[tool] = f"failed (exit {done.returncode}): {done.stderr.strip()[-300:]}"
            continue
        tools[tool] = "measured"
        for bug, strategies in json.loads(done.stdout).items():
            for strategy, searches in strategies.items():
                by_bug[bug][strategy] = figures(searches, cap)
        if on_done is not None:
            on_done(f"{tool}: {len(bugs)} bugs")
    return {"tools": tools, "bugs": by_bug}


def figures(searches: Sequence[dict[str, Any]], cap: int) -> dict[str, Any]:
    """The simulator's summary of runs to detection, with runs per CPU second and what stopped searches short."""
    runs = sum(search["runs"] for search in searches)
    cpu_s = sum(search["cpu_s"] for search in searches)
    notes = sorted({search["note"] for search in searches if search["note"]})
    return {**summary([search["first_failure"] for search in searches], cap), "runs_total": runs,
            "runs_per_cpu_s": round(runs / cpu_s, 1) if cpu_s else None, "notes": notes}
