"""Coverage feedback: later runs of a campaign biased toward what earlier runs left unreached.

Plain swarm draws every run from (workload, root seed, run index) alone. With feedback, run i also sees a
`Bias` folded from the signatures (`sim.swarm.signature`) of the runs before its batch, in index order:
- each fault kind's point is picked with weights that favour points where that kind has fired in few runs
  (half uniform, half by 1 / (1 + runs it fired there), so an unreachable point cannot starve the others);
- each action or fault kind whose chance of being enabled is strictly between 0 and 1 has that chance scaled
  (x0.5 to x2, capped to [0.05, 0.95]) by how rare what its runs reached was, against the workload's
  other kinds: a run scores the sum of 1 / (1 + earlier runs that reached the mark) over its marks, and a
  kind's rate is the mean score of the runs it was on in (a kind never on yet gets x2).

The bias only changes thresholds and weights on the same named streams, so a neutral bias draws the plain
run exactly, and a biased run is still an ordinary scripted scenario that exports and replays byte for
byte. Runs of one batch (`BATCH` consecutive indices) share one bias, whatever the number of workers, so a
campaign's draws do not depend on `-j`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sim.swarm.signature import FAULT, ON
from sim.swarm.workload_model import ActionKind, Workload

BATCH = 10  # runs that share one bias: the feedback is folded in once per batch, in index order
FACTOR_RANGE = (0.5, 2.0)
CHANCE_RANGE = (0.05, 0.95)
UNIFORM_SHARE = 0.5  # of a point's weight, so points a kind never reaches keep their plain share only


def enable_key(workload: Workload, family: str, kind: str) -> str:
    """The name a kind's enablement is counted under: per workload, since a kind's worth depends on it."""
    return f"{workload.name}/{family}.{kind}"


@dataclass(frozen=True)
class Bias:
    """What the feedback changes in one run's draws; the empty Bias changes nothing."""

    factors: Mapping[str, float] = field(default_factory=dict)  # enable_key -> factor on its chance
    points: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # fault kind -> weight per drawn point

    def chance(self, key: str, chance: float) -> float:
        if key not in self.factors or not 0.0 < chance < 1.0:
            return chance
        return min(CHANCE_RANGE[1], max(CHANCE_RANGE[0], chance * self.factors[key]))

    def point_weights(self, kind: str) -> tuple[float, ...] | None:
        return self.points.get(kind)


NO_BIAS = Bias()


class Feedback:
    """The counts of a campaign so far: runs per mark, and per enabled kind its runs and their rarity score."""

    def __init__(self) -> None:
        self.runs = 0
        self.reached: Counter[str] = Counter()
        self.runs_on: Counter[str] = Counter()
        self.score_on: dict[str, float] = defaultdict(float)

    def add(self, marks: Iterable[str]) -> None:
        """Fold in the next run's signature (runs must come in index order)."""
        marks = sorted(marks)
        score = sum(1.0 / (1 + self.reached[mark]) for mark in marks if not mark.startswith(ON))
        for mark in marks:
            if mark.startswith(ON):
                self.runs_on[mark[len(ON):]] += 1
                self.score_on[mark[len(ON):]] += score
        self.reached.update(marks)
        self.runs += 1

    def bias(self, workload: Workload) -> Bias:
        """The bias for a run of `workload` given everything folded in so far."""
        if self.runs == 0:
            return NO_BIAS
        return Bias(self._factors(workload), {kind: self._point_weights(kind, draw.points)
                                              for kind, draw in workload.swarm.faults.items() if draw.points})

    def _factors(self, workload: Workload) -> dict[str, float]:
        keys = [enable_key(workload, "fault", kind) for kind in workload.swarm.faults]
        keys += [enable_key(workload, "action", str(kind)) for kind in ActionKind if workload.swarm.actions.of(kind).rate]
        rates = {key: self.score_on[key] / self.runs_on[key] for key in keys if self.runs_on[key]}
        mean = sum(rates.values()) / len(rates) if rates else 0.0
        low, high = FACTOR_RANGE
        return {key: high if key not in rates or mean == 0 else min(high, max(low, rates[key] / mean)) for key in keys}

    def _point_weights(self, kind: str, points: Sequence[str]) -> tuple[float, ...]:
        novelty = [1.0 / (1 + self.reached[f"{FAULT}{kind}@{point}"]) for point in points]
        total = sum(novelty)
        return tuple(UNIFORM_SHARE / len(points) + (1 - UNIFORM_SHARE) * value / total for value in novelty)


def batch_start(index: int) -> int:
    """The first index of the batch `index` falls in: the runs below it are the ones its bias sees."""
    return index - index % BATCH


def replayed_bias(workloads: Sequence[Workload], signatures: Mapping[int, frozenset[str]], index: int) -> Bias:
    """The bias run `index` was drawn with, folded again from the recorded signatures of the runs before its batch."""
    feedback = Feedback()
    for earlier in range(batch_start(index)):
        feedback.add(signatures[earlier])
    return feedback.bias(workloads[index % len(workloads)])
