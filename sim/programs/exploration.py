"""Any program under the simulator: `explore` searches its schedules for a failure, `replay` reruns one.

A program is an async function taking a Runtime first (`async def main(rt, *args)`), or a plain callable
that uses threads (`def main(*args)`, see `sim.programs.runnable`). `explore` runs it once per seed under one
strategy object until a run fails (an exception escapes, a deadlock, a budget overrun), the run or time
budget is spent, or a systematic search has covered its space. It freezes the wall clock once for the whole
search (a freeze per run would cost more than the runs), shrinks the failure to the fewest deviations from
the unsteered schedule that still fail the same way, and writes it as a repro file when asked to; `replay`
reruns a failure or a repro file byte for byte.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sim.core import stopping
from sim.core.search import exhaustion, search
from sim.core.timefreeze import frozen_time
from sim.core.world import RunOutcome, RunResult, World
from sim.kernel.decisions import Recorded, non_default
from sim.kernel.errors import DivergenceError
from sim.programs.failure import Failure
from sim.programs.runnable import DEFAULT_MAX_STEPS, Program, Settings, program_name
from sim.programs.shrinker import ProgramShrinker
from sim.strategies.by_name import DEFAULT_STRATEGY, strategy_for
from sim.strategies.replay import ReplayStrategy
from sim.strategies.serialization import expand, sparse
from sim.strategies.strategy import Strategy
from sim.threads.unmodelled import NotSimulated

DEFAULT_RUNS = 1000
DEFAULT_SHRINK_S = 10.0
REPRO_FORMAT = 2  # 2 added the program's kind and preemption; a format-1 file is an async program's


@dataclass(frozen=True)
class Exploration:
    """What one search did: how many runs, under which strategy, and the first failure if there was one.

    `failure` is the shrunk failure (when shrinking was on), `found` the run the search first failed in;
    `interrupted`, that a stop request (`sim.core.stopping`) ended the search between two runs.
    """

    program: str
    strategy: Strategy
    runs: int
    cpu_s: float
    failure: Failure | None
    found: Failure | None = None
    interrupted: bool = False

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def exhausted(self) -> bool | None:
        return exhaustion(self.strategy)

    def __str__(self) -> str:
        ran = f"{self.program}: {self.runs} runs under {self.strategy.name}, {self.cpu_s:.2f}s"
        if self.failure is None:
            cut = f" ({stopping.interrupted_after(self.runs)})" if self.interrupted else ""
            return f"{ran}{', its whole bounded space' if self.exhausted else ''}: no failure{cut}"
        found = self.found or self.failure
        shrunk = ""
        if found is not self.failure:
            shrunk = (f"\n  shrunk from {_deviations(found)} to {_deviations(self.failure)} "
                      f"(run {found.seed}, found by {found.run.strategy})")
        return f"{ran}{shrunk}\n{self.failure}"


def _deviations(failure: Failure) -> str:
    count = non_default(failure.decisions)
    return f"{count} decision{'s' if count != 1 else ''}"


def explore(
    program: Callable[..., Any],
    *args: Any,
    strategy: str | Strategy = DEFAULT_STRATEGY,
    runs: int | None = None,
    time_budget_s: float | None = None,
    seed: int = 0,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_time_s: float = math.inf,
    preemption: str = "lines",
    shrink: bool = True,
    shrink_time_s: float = DEFAULT_SHRINK_S,
    repro_dir: Path | str | None = None,
    repro_name: str | None = None,
) -> Exploration:
    """Run `program` on seeds `seed`, `seed`+1, ... until the first failure or the budget.

    The budget is `runs` runs or `time_budget_s` CPU seconds (DEFAULT_RUNS runs if neither is given).
    `strategy` is a name from `sim.strategies.by_name` or a strategy object. `preemption` says where a
    thread program's threads may be switched besides blocking calls and clock reads: "lines" of its own code
    (the default), "opcodes", or "sync" (nowhere else). A failure is shrunk (unless `shrink` is False) for
    at most `shrink_time_s` CPU seconds, and written to `repro_dir` (nothing is written if it is None) as a
    repro file that `replay` takes, named after `repro_name` (default: the program) and the seed.
    """
    budget_runs, budget_s = _budget(runs, time_budget_s)
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a whole number of at least 0, not {seed!r}")
    target = Program(program, args, Settings(max_steps, max_time_s, preemption))
    searcher = strategy_for(strategy) if isinstance(strategy, str) else strategy
    started = time.process_time()
    with frozen_time(), target.batch():  # the shrinker's runs share them too
        searched = search(itertools.count(seed), lambda run_seed: _failure(target, World(run_seed, searcher, max_steps=max_steps,
                                                                                            max_time_s=max_time_s)),
                          runs=budget_runs, time_budget_s=budget_s, strategy=searcher, until=_failed)
        found = searched.last
        failure = ProgramShrinker(target, found, shrink_time_s).shrink() if found is not None and shrink else found
    if failure is not None and repro_dir is not None:
        failure = replace(failure, repro=write_program_repro(failure, target, Path(repro_dir), name=repro_name))
    return Exploration(target.name, searcher, searched.runs, time.process_time() - started, failure, found, searched.interrupted)


def _budget(runs: int | None, time_budget_s: float | None) -> tuple[int | None, float | None]:
    """The CLI's rules: one budget at most, runs a whole number from 1, a time above 0."""
    if runs is not None and time_budget_s is not None:
        raise ValueError("give runs or time_budget_s, not both")
    if runs is not None and (not isinstance(runs, int) or isinstance(runs, bool) or runs < 1):
        raise ValueError(f"runs must be a whole number of at least 1, not {runs!r}")
    if time_budget_s is not None and not time_budget_s > 0:
        raise ValueError(f"time_budget_s must be above 0, not {time_budget_s!r}")
    return (DEFAULT_RUNS if runs is None and time_budget_s is None else runs), time_budget_s


def _failed(failure: Failure | None) -> bool:
    return failure is not None


def _failure(target: Program, world: World) -> Failure | None:
    """The run's failure, with the settings to replay it; a call the runtime does not model is raised."""
    failure = Failure.of(target.run(world))
    if failure is not None and isinstance(failure.error, NotSimulated):
        raise failure.error
    return None if failure is None else replace(failure, settings=target.settings)


def replay(
    recording: Failure | str | Path | Sequence[Recorded],
    program: Callable[..., Any],
    *args: Any,
    seed: int = 0,
    max_steps: int | None = None,
    max_time_s: float | None = None,
    preemption: str | None = None,
) -> RunResult:
    """Run `program` again under a recording: a Failure, a repro file, or a decision list (run at `seed`).

    A Failure or a repro file must give the very same run: DivergenceError if its trace digest differs.
    The settings (budgets, preemption) default to the recording's, else to `explore`'s.
    """
    expected = None
    settings = Settings()
    decisions: Sequence[Recorded]
    if isinstance(recording, Failure):
        decisions, seed, expected = recording.decisions, recording.seed, recording.run.digest()
        settings = recording.settings or settings
    elif isinstance(recording, (str, Path)):
        document = read_program_repro(Path(recording), program)
        decisions, seed, expected = expand(document["decisions"], document["decision_points"]), document["seed"], document["digest"]
        settings = Settings(document["max_steps"], _from_json_time(document["max_time_s"]), document.get("preemption", "lines"))
    else:
        decisions = list(recording)
    settings = Settings(settings.max_steps if max_steps is None else max_steps,
                        settings.max_time_s if max_time_s is None else max_time_s,
                        settings.preemption if preemption is None else preemption)
    target = Program(program, args, settings)
    with frozen_time(), target.batch():
        result = target.run(World(seed, ReplayStrategy(decisions), max_steps=settings.max_steps, max_time_s=settings.max_time_s))
    if expected is not None and result.digest() != expected:
        raise DivergenceError(f"the replayed run differs from the recorded one (trace digest {result.digest()[:16]}, "
                              f"recorded {expected[:16]}): the program changed, or it is not deterministic")
    return result


# ---- repro files --------------------------------------------------------------------------------


def write_program_repro(failure: Failure, target: Program, out_dir: Path, *, name: str | None = None) -> Path:
    """The failing run as a repro file in `out_dir`, named after `name` (default: the program) and the seed."""
    run, settings = failure.run, target.settings
    document = {
        "format": REPRO_FORMAT,
        "program": target.name,
        "kind": "threads" if target.threaded else "async",
        "seed": run.seed,
        "strategy": run.strategy,
        "outcome": str(run.outcome),
        "failure": failure.headline(),
        "task": failure.task,
        "max_steps": settings.max_steps,
        "max_time_s": None if math.isinf(settings.max_time_s) else settings.max_time_s,
        "preemption": settings.preemption,
        "digest": run.digest(),
        "decision_points": len(run.decisions),
        "decisions": sparse(run.decisions),
    }
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name or target.name.rsplit(":", 1)[-1]).strip("_")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}-seed{run.seed}.repro.json"
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return path


def read_program_repro(path: Path, program: Callable[..., Any]) -> dict[str, Any]:
    """A program's repro file, checked for the keys replay needs and for the program it was recorded from.

    A program recorded as a script's `__main__:f` replays as `module:f` (the same function imported)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a repro file ({error})") from None
    for key, kind in (("program", str), ("seed", int), ("max_steps", int), ("digest", str), ("decisions", list),
                      ("decision_points", int)):
        if not isinstance(document, dict) or not isinstance(document.get(key), kind):
            raise ValueError(f"{path}: {key}: expected {kind.__name__} in a program's repro file")
    if not _same_program(document["program"], program_name(program)):
        raise ValueError(f"{path}: recorded from {document['program']}, not from {program_name(program)}")
    return document


def _same_program(recorded: str, given: str) -> bool:
    recorded_module, _, recorded_name = recorded.partition(":")
    given_module, _, given_name = given.partition(":")
    return recorded_name == given_name and (recorded_module == given_module or "__main__" in (recorded_module, given_module))


def _from_json_time(value: float | None) -> float:
    return math.inf if value is None else float(value)


__all__ = ["Exploration", "Failure", "RunOutcome", "explore", "replay"]
