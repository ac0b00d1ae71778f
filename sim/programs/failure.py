"""What made a run fail, read out of the run: the exception, the task that raised it, or the deadlock.

A task's exception reaches the root task wrapped in one exception group per nursery it crossed, often
beside the Cancelled its siblings got; `unwrap` (`sim.kernel.errors`) digs out the one that matters, and the task that raised
it is the first task (in the order tasks ended) whose exception is or contains it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sim.core.world import RunOutcome, RunResult
from sim.kernel.decisions import Decision, non_default
from sim.kernel.errors import Deadlock, SimulationError, leaves, unwrap

if TYPE_CHECKING:
    from sim.programs.runnable import Settings


def raising_task(error: BaseException, task_errors: Sequence[tuple[str, BaseException]]) -> str | None:
    """The first task to end by `error` or by a group containing it: the task that raised it."""
    for task, raised in task_errors:
        if raised is error or any(leaf is error for leaf in leaves(raised)):
            return task
    return None


@dataclass(frozen=True)
class Failure:
    """A failed run: why (`error`, unwrapped), where (`task`), and the run itself, with its repro file once written."""

    error: BaseException
    task: str | None
    run: RunResult
    repro: Path | None = None
    settings: Settings | None = None  # how the run was made (budgets, preemption), for a replay to do the same

    @classmethod
    def of(cls, run: RunResult) -> Failure | None:
        """The failure of a run, or None if it ended well."""
        if run.outcome is RunOutcome.OK or run.error is None:
            return None
        error = run.error if isinstance(run.error, SimulationError) else unwrap(run.error)
        return cls(error, raising_task(error, run.task_errors), run)

    @property
    def outcome(self) -> RunOutcome:
        return self.run.outcome

    @property
    def seed(self) -> int:
        return self.run.seed

    @property
    def decisions(self) -> list[Decision]:
        return self.run.decisions

    @property
    def deadlock(self) -> Deadlock | None:
        """The deadlock report (every blocked task, what it waits on, who holds it, the cycle), if it was one."""
        return self.error if isinstance(self.error, Deadlock) else None

    def headline(self) -> str:
        if isinstance(self.error, SimulationError):
            return self.error.summary  # it names the outcome already: "deadlock: ...", "step budget of ..."
        where = f" in task {self.task!r}" if self.task else ""
        return f"{self.outcome}{where}: {type(self.error).__name__}: {self.error}"

    def __str__(self) -> str:
        run = self.run
        lines = [self.headline()]
        if isinstance(self.error, SimulationError):
            lines += self.error.report
        lines.append(f"  seed {run.seed}, strategy {run.strategy}, {run.steps} steps, "
                     f"{non_default(run.decisions)} decisions (of {len(run.decisions)} choice points)")
        if self.repro is not None:
            lines.append(f"  repro: {self.repro}")
        return "\n".join(lines)
