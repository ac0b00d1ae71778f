"""Shrinking a program's failure: the same failure with fewer deviations from the unsteered schedule.

A failure `sim.explore` finds carries every scheduling choice and random draw that happened to happen. The
shrinker runs the decision passes (`sim.shrinking.decision_passes`) against the program: a candidate counts when its
run fails the same way (the same outcome, and for an exception the same type, raised by a thread or task of
the same name) and has fewer non-default decisions, then fewer decisions, then smaller values. Every
accepted candidate's decisions are the ones its run recorded, so the result replays strictly, byte for byte.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sim.core.world import World
from sim.kernel.decisions import non_default
from sim.programs.failure import Failure
from sim.shrinking.decision_passes import DecisionPasses, Decisions
from sim.strategies.prefix import PrefixReplay

if TYPE_CHECKING:
    from sim.programs.runnable import Program


class _OutOfTime(Exception):
    """The time limit ran out; the smallest failure found so far is the result."""


def _kind(failure: Failure) -> tuple[Any, ...]:
    """What makes two failures the same failure."""
    return failure.outcome, type(failure.error).__name__, failure.task


def _size(failure: Failure) -> tuple[Any, ...]:
    decisions = failure.decisions
    return non_default(decisions), len(decisions), tuple(decision.choice for decision in decisions)


class ProgramShrinker(DecisionPasses):
    """Greedy decision passes over one program failure, within `time_limit_s` CPU seconds."""

    def __init__(self, program: Program, failure: Failure, time_limit_s: float) -> None:
        self.program = program
        self.original = failure
        self.best = failure
        self.runs = 0
        self._deadline = time.process_time() + time_limit_s
        self._tried: set[Decisions] = set()

    def shrink(self) -> Failure:
        """Every pass until none makes progress or the time runs out; the smallest failure found."""
        try:
            progress = True
            while progress:
                progress = False
                for run_pass in self.decision_passes():
                    progress = run_pass() or progress
        except _OutOfTime:
            pass
        return self.best

    def _best_decisions(self) -> Decisions:
        return tuple(self.best.decisions)

    def _try_decisions(self, decisions: Decisions) -> bool:
        if decisions in self._tried:
            return False
        if time.process_time() > self._deadline:
            raise _OutOfTime
        self._tried.add(decisions)
        self.runs += 1
        settings = self.program.settings
        world = World(self.best.seed, PrefixReplay(decisions), max_steps=settings.max_steps, max_time_s=settings.max_time_s)
        candidate = Failure.of(self.program.run(world))
        if candidate is None or _kind(candidate) != _kind(self.best) or _size(candidate) >= _size(self.best):
            return False
        candidate.run.strategy = f"{self.original.run.strategy}, shrunk"
        self.best = candidate
        return True
