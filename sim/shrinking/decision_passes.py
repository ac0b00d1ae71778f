"""The passes that make a failing run's decision list smaller, shared by the scenario and program shrinkers.

A decision list is a run's choice sequence (`sim.kernel.decisions`). Each pass proposes edited lists to
`_try_decisions`, which runs one under lenient replay (`PrefixReplay`: a choice that no longer fits takes
the default) and adopts the run it produced when it fails the same way and is smaller; `_best_decisions` is
the list of the smallest failing run so far. A pass returns whether it made the run smaller. In order: the
unsteered run, the shortest prefix, chunks deleted, chunks set back to the default (fewer preemptions), and
each remaining choice lowered toward 0.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.kernel.decisions import Recorded, non_default

Decisions = tuple[Recorded, ...]


class DecisionPasses:
    """Mixed into a shrinker that knows how to try a decision list and which one is the best so far."""

    def _best_decisions(self) -> Decisions:
        raise NotImplementedError

    def _try_decisions(self, decisions: Decisions) -> bool:
        raise NotImplementedError

    def decision_passes(self) -> tuple[Callable[[], bool], ...]:
        """The passes, each skipped once no choice deviates from the default: every list of defaults replays the
        unsteered run, whose recorded decisions are then already the smallest."""
        return tuple(self._deviating_only(run_pass) for run_pass in
                     (self._to_fifo, self._truncate, self._delete_chunks, self._zero_chunks, self._lower_values))

    def _deviating_only(self, run_pass: Callable[[], bool]) -> Callable[[], bool]:
        def guarded() -> bool:
            return bool(non_default(self._best_decisions())) and run_pass()

        guarded.__name__ = run_pass.__name__
        return guarded

    def _to_fifo(self) -> bool:
        """The unsteered run: no deviation left to explain, if the failure does not need one."""
        return self._try_decisions(())

    def _truncate(self) -> bool:
        """Binary search for a short prefix: past the end of the list every choice is the default."""
        decisions = self._best_decisions()
        low, high, improved = 0, len(decisions), False
        while low < high:
            middle = (low + high) // 2
            if self._try_decisions(decisions[:middle]):
                high, improved = middle, True
            else:
                low = middle + 1
        return improved

    def _delete_chunks(self) -> bool:
        return self._chunked(lambda decisions, start, size: decisions[:start] + decisions[start + size:])

    def _zero_chunks(self) -> bool:
        """Fewer preemptions: whole runs of choices set back to the default at once, then single ones."""
        return self._chunked(lambda decisions, start, size: (
            decisions[:start] + tuple(d.with_choice(0) for d in decisions[start:start + size]) + decisions[start + size:]
        ))

    def _chunked(self, edit: Callable[[Decisions, int, int], Decisions]) -> bool:
        """Apply `edit` to chunks of halving size, the whole list first, from the end of the list to its start."""
        improved = False
        size = max(1, len(self._best_decisions()))
        while True:
            start = len(self._best_decisions()) - size
            while start >= 0:
                improved = self._try_decisions(edit(self._best_decisions(), start, size)) or improved
                start -= size
            if size == 1:
                return improved
            size //= 2

    def _lower_values(self) -> bool:
        """Binary search each remaining non-default choice down toward 0 (a draw's value, a later task)."""
        improved = False
        for position in reversed(range(len(self._best_decisions()))):
            low = 0
            while position < len(self._best_decisions()) and low < self._best_decisions()[position].choice:
                decisions = self._best_decisions()
                middle = (low + decisions[position].choice) // 2
                lowered = decisions[:position] + (decisions[position].with_choice(middle),) + decisions[position + 1:]
                if self._try_decisions(lowered):
                    improved = True
                else:
                    low = middle + 1
        return improved
