"""Any async program under the simulator: `explore` searches its schedules for a failure, `replay` reruns one.

A program is an async function taking a Runtime first (`async def main(rt, *args)`), written against the
Runtime API only. `explore` runs it once per seed under one strategy object until a run fails (an
exception escapes, a deadlock, a budget overrun), the run or time budget is spent, or a systematic search
has covered its space. It freezes the wall clock once for the whole search (a freeze per run would cost
more than the runs), and writes the failing run as a repro file that `replay` reruns byte for byte.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from sim.failure import Failure
from sim.kernel.errors import DivergenceError
from sim.search import exhaustion, until_exhausted, within_budget
from sim.strategies.base import Strategy
from sim.strategies.decisions import Recorded
from sim.strategies.registry import DEFAULT_STRATEGY, strategy_for
from sim.strategies.replay import ReplayStrategy
from sim.strategies.serialization import expand, sparse
from sim.timefreeze import frozen_time
from sim.world import RunOutcome, RunResult, World

Program = Callable[..., Awaitable[Any]]

DEFAULT_RUNS = 1000
DEFAULT_MAX_STEPS = 1_000_000
DEFAULT_REPRO_DIR = Path("out")
REPRO_FORMAT = 1


@dataclass(frozen=True)
class Exploration:
    """What one search did: how many runs, under which strategy, and the first failure if there was one."""

    program: str
    strategy: Strategy
    runs: int
    cpu_s: float
    failure: Failure | None

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def exhausted(self) -> bool | None:
        return exhaustion(self.strategy)

    def __str__(self) -> str:
        ran = f"{self.program}: {self.runs} runs under {self.strategy.name}, {self.cpu_s:.2f}s"
        if self.failure is not None:
            return f"{ran}\n{self.failure}"
        return f"{ran}{', its whole bounded space' if self.exhausted else ''}: no failure"


def explore(
    program: Program,
    *args: Any,
    strategy: str | Strategy = DEFAULT_STRATEGY,
    runs: int | None = None,
    time_budget_s: float | None = None,
    seed: int = 0,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_time_s: float = math.inf,
    repro_dir: Path | None = DEFAULT_REPRO_DIR,
    repro_name: str | None = None,
) -> Exploration:
    """Run `program(rt, *args)` on seeds `seed`, `seed`+1, ... until the first failure or the budget.

    The budget is `runs` runs or `time_budget_s` CPU seconds (DEFAULT_RUNS runs if neither is given).
    `strategy` is a name from `sim.strategies.registry` or a strategy object. A failure is written to
    `repro_dir` (not at all if None) as a repro file that `replay` takes, named after `repro_name` (default:
    the program) and the seed.
    """
    if runs is not None and time_budget_s is not None:
        raise ValueError("give runs or time_budget_s, not both")
    if runs is None and time_budget_s is None:
        runs = DEFAULT_RUNS
    searcher = strategy_for(strategy) if isinstance(strategy, str) else strategy
    started, count, failure = time.process_time(), 0, None
    with frozen_time():
        for run_seed in until_exhausted(within_budget(itertools.count(seed), runs, time_budget_s), searcher):
            count += 1
            failure = Failure.of(World(run_seed, searcher, max_steps=max_steps, max_time_s=max_time_s).run(program, *args))
            if failure is not None:
                break
    if failure is not None and repro_dir is not None:
        repro = write_repro(failure, program, repro_dir, max_steps=max_steps, max_time_s=max_time_s, name=repro_name)
        failure = replace(failure, repro=repro)
    return Exploration(program_name(program), searcher, count, time.process_time() - started, failure)


def replay(
    recording: Failure | str | Path | Sequence[Recorded],
    program: Program,
    *args: Any,
    seed: int = 0,
    max_steps: int | None = None,
    max_time_s: float | None = None,
) -> RunResult:
    """Run `program` again under a recording: a Failure, a repro file, or a decision list (run at `seed`).

    A Failure or a repro file must give the very same run: DivergenceError if its trace digest differs.
    The budgets default to the recording's (a repro file keeps them), else to `explore`'s.
    """
    expected = None
    budgets: dict[str, Any] = {"max_steps": DEFAULT_MAX_STEPS, "max_time_s": math.inf}
    if isinstance(recording, Failure):
        decisions, seed, expected = recording.decisions, recording.seed, recording.run.digest()
    elif isinstance(recording, (str, Path)):
        document = read_repro(Path(recording), program)
        decisions, seed, expected = expand(document["decisions"], document["decision_points"]), document["seed"], document["digest"]
        budgets.update(max_steps=document["max_steps"], max_time_s=_from_json_time(document["max_time_s"]))
    else:
        decisions = list(recording)
    budgets.update({key: value for key, value in (("max_steps", max_steps), ("max_time_s", max_time_s)) if value is not None})
    result = World(seed, ReplayStrategy(decisions), **budgets).run(program, *args)
    if expected is not None and result.digest() != expected:
        raise DivergenceError(f"the replayed run differs from the recorded one (trace digest {result.digest()[:16]}, "
                              f"recorded {expected[:16]}): the program changed, or it is not deterministic")
    return result


# ---- repro files --------------------------------------------------------------------------------


def program_name(program: Program) -> str:
    return f"{getattr(program, '__module__', '?')}:{getattr(program, '__qualname__', repr(program))}"


def write_repro(failure: Failure, program: Program, out_dir: Path, *, max_steps: int, max_time_s: float,
                name: str | None = None) -> Path:
    """The failing run as a repro file in `out_dir`, named after `name` (default: the program) and the seed."""
    run = failure.run
    document = {
        "format": REPRO_FORMAT,
        "program": program_name(program),
        "seed": run.seed,
        "strategy": run.strategy,
        "outcome": str(run.outcome),
        "failure": failure.headline(),
        "task": failure.task,
        "max_steps": max_steps,
        "max_time_s": None if math.isinf(max_time_s) else max_time_s,
        "digest": run.digest(),
        "decision_points": len(run.decisions),
        "decisions": sparse(run.decisions),
    }
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name or program_name(program).rsplit(":", 1)[-1]).strip("_")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}-seed{run.seed}.repro.json"
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return path


def read_repro(path: Path, program: Program) -> dict[str, Any]:
    """A program's repro file, checked for the keys replay needs and for the program it was recorded from."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a repro file ({error})") from None
    for key, kind in (("program", str), ("seed", int), ("max_steps", int), ("digest", str), ("decisions", list),
                      ("decision_points", int)):
        if not isinstance(document, dict) or not isinstance(document.get(key), kind):
            raise ValueError(f"{path}: {key}: expected {kind.__name__} in a program's repro file")
    if document["program"] != program_name(program):
        raise ValueError(f"{path}: recorded from {document['program']}, not from {program_name(program)}")
    return document


def _from_json_time(value: float | None) -> float:
    return math.inf if value is None else float(value)


__all__ = ["Exploration", "Failure", "RunOutcome", "explore", "replay"]
