"""Shrinking a failing run: fewer faults and drives, a shorter decision list, fewer deviations from the default.

A failure found by exploration carries everything that happened to happen: faults that played no part, a
drive nobody needed, dozens of scheduling choices that changed nothing. A person debugging it needs the
smallest run that still breaks the SAME invariant. The shrinker edits a candidate (which faults and drives
to keep, a lowered compaction threshold, and a decision list), runs it under a lenient replay, which always
produces some run, and keeps the candidate when the invariant still fails and the run is smaller. A smaller
plan is steered first by the best run's schedule of task names (`FollowSchedule`), which survives a removed
drive, then by its decision list (`PrefixReplay`), then not at all; a drive that does not drop alone is tried
again with the threshold lowered by what it wrote, and with the faults counted by hits firing one hit earlier.
"Smaller" compares, in order: faults, drives, the threshold, the hits counted faults fire at, non-default
choices, decisions, then the chosen values; every accepted candidate is strictly smaller, so the passes reach
a fixed point (or the time limit) and never cycle. The decisions of an accepted candidate are the ones the
kernel recorded, so they replay strictly, byte for byte.

The result is written as a scenario file (the original's world, only the kept faults and drives) and a
repro file recorded by a strict replay of that file, which is what `python -m sim replay` will do.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.vocabulary import message_tokens
from sim.core import stopping
from sim.core.timefreeze import frozen_time
from sim.core.words import counted
from sim.kernel.decisions import Recorded, non_default
from sim.reports.text_report import replay_command, write_repro
from sim.scenario.loader import load_scenario
from sim.scenario.model import DriveSpec, Scenario
from sim.scenario.names import registry
from sim.scenario.runner import RunReport, run_once
from sim.scenario.toml_writer import toml_text
from sim.shrinking.decision_passes import DecisionPasses
from sim.strategies.follow import FollowSchedule, Recording, Schedule
from sim.strategies.prefix import PrefixReplay

SHRUNK_SUFFIX = "_shrunk"
DRIVE_TASK = re.compile(r"drive\.(\d+)\.(.*)")  # a drive's task name, as `sim.scenario.drives` starts it
# Config fields whose lower value lets fewer drives reach the same state: with a lower compaction threshold,
# fewer turns fill the transcript to the size at which the failing compaction starts.
THRESHOLD = "threshold_tokens"
LOWERED_CONFIG = (THRESHOLD,)
CLAIMS_DROPPED = ("must_fail_under", "coverage")  # what the original proved; the shrunk run proves only its failure
DROPPED_NAMED = 6  # dropped faults or drives a shrunk description names, before "N more"


class ShrinkError(Exception):
    """The run to shrink does not fail with its invariant, so there is nothing to shrink."""


class _Stop(Exception):
    """The time limit ran out, or the user asked to stop; the smallest run found so far is the result."""


@dataclass(frozen=True)
class ShrinkCandidate:
    """What the shrinker varies: indices of the original's faults and drives to keep, and a decision list."""

    faults: tuple[int, ...]
    drives: tuple[int, ...]
    decisions: tuple[Recorded, ...]
    config: tuple[tuple[str, int], ...] = ()  # lowered values of LOWERED_CONFIG fields, over the world's own
    nth: tuple[tuple[int, int], ...] = ()  # (fault index, the hit it fires at) for every fault counted by hits


@dataclass(frozen=True)
class Size:
    """How big a failing run is, in the terms a person reading it cares about."""

    decisions: int  # non-default choices: the entries of the repro's decision list
    points: int  # every choice point of the run, defaults included
    faults: int
    drives: int
    steps: int

    @classmethod
    def of(cls, candidate: ShrinkCandidate, report: RunReport) -> Size:
        return cls(non_default(candidate.decisions), len(candidate.decisions), len(candidate.faults),
                   len(candidate.drives), report.result.steps)


@dataclass(frozen=True)
class ShrinkResult:
    name: str
    invariant: str
    before: Size
    after: Size
    report: RunReport
    scenario_path: Path
    repro_path: Path
    runs: int
    seconds: float
    timed_out: bool
    mutant: str | None = None  # the curated mutant the run was shrunk under, which its replay needs
    interrupted: bool = False  # a stop request ended the search (sim.core.stopping)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "invariant": self.invariant,
            "before": dataclasses.asdict(self.before),
            "after": dataclasses.asdict(self.after),
            "runs": self.runs,
            "seconds": round(self.seconds, 3),
            "timed_out": self.timed_out,
            "interrupted": self.interrupted,
            "scenario": str(self.scenario_path),
            "repro": str(self.repro_path),
            "replay": replay_command(self.repro_path, self.mutant),
        }

    def summary(self) -> str:
        """Before/after sizes as a small table, then where the shrunk run is and how to replay it."""
        limit = ", stopped by the user" if self.interrupted else ", stopped at the time limit" if self.timed_out else ""
        lines = [f"shrunk {self.name} ({self.invariant}) in {self.seconds:.1f}s, {self.runs} runs{limit}:",
                 f"  {'':<20}{'before':>8}{'after':>8}"]
        for field in dataclasses.fields(Size):
            label = "choice points" if field.name == "points" else field.name
            lines.append(f"  {label:<20}{getattr(self.before, field.name):>8}{getattr(self.after, field.name):>8}")
        lines += [f"  scenario: {self.scenario_path}", f"  repro: {self.repro_path}", f"  replay: {replay_command(self.repro_path, self.mutant)}"]
        return "\n".join(lines)


def _key(candidate: ShrinkCandidate) -> tuple[Any, ...]:
    decisions = candidate.decisions
    return (len(candidate.faults), len(candidate.drives), tuple(value for _, value in candidate.config),
            tuple(hit for _, hit in candidate.nth), non_default(decisions), len(decisions),
            tuple(decision.choice for decision in decisions))


def _clock() -> float:
    """CPU seconds: runs are CPU-bound, and while they execute the wall clock is frozen to virtual time."""
    return time.process_time()


class Shrinker(DecisionPasses):
    """Greedy passes over one failing run; each pass reports whether it made the run smaller."""

    def __init__(self, scenario: Scenario, seed: int, invariant: str, decisions: Sequence[Recorded], deadline: float) -> None:
        """Run the recorded decisions first: the run they produce is the one to shrink."""
        self.scenario = scenario
        self.seed = seed
        self.invariant = invariant
        self.runs = 0
        self._deadline = deadline
        self._tried: set[tuple[ShrinkCandidate, Schedule | None]] = set()
        lowerable = tuple((field, scenario.world.config[field]) for field in LOWERED_CONFIG if field in scenario.world.config)
        counted = tuple((i, fault.trigger.nth) for i, fault in enumerate(scenario.faults) if fault.trigger.nth is not None)
        everything = ShrinkCandidate(
            tuple(range(len(scenario.faults))), tuple(range(len(scenario.drives))), tuple(decisions), lowerable, counted,
        )
        report, schedule = self._run(everything)
        if not self._fails(report):
            found = report.violations[0].invariant if report.violations else "no violation"
            raise ShrinkError(f"the recorded run does not violate {invariant} (it shows {found})")
        self.best, self.best_report, self.best_schedule = self._canonical(everything, report), report, schedule
        self.before = Size.of(self.best, report)

    def shrink(self, on_pass: Callable[[str, Size], None] | None = None) -> bool:
        """Run every pass until none makes progress; False if the time limit or a stop request came first.

        `on_pass` hears of each finished pass, with the smallest run so far (progress lines).
        """
        passes = (self._drop_plan_entries, self._lower_config, *self.decision_passes())
        try:
            progress = True
            while progress:
                progress = False
                for run_pass in passes:
                    progress = run_pass() or progress
                    if on_pass is not None:
                        on_pass(run_pass.__name__.strip("_").replace("_", " "), Size.of(self.best, self.best_report))
        except _Stop:
            return False
        return True

    # ---- trying a candidate --------------------------------------------------------------------

    def scenario_for(self, candidate: ShrinkCandidate) -> Scenario:
        world, nth = self.scenario.world, dict(candidate.nth)
        faults = tuple(
            dataclasses.replace(fault, trigger=dataclasses.replace(fault.trigger, nth=nth.get(i, fault.trigger.nth)))
            for i, fault in enumerate(self.scenario.faults)
        )
        return dataclasses.replace(
            self.scenario,
            world=dataclasses.replace(world, config={**world.config, **dict(candidate.config)}),
            faults=tuple(faults[i] for i in candidate.faults),
            drives=tuple(self.scenario.drives[i] for i in candidate.drives),
        )

    def _run(self, candidate: ShrinkCandidate, schedule: Schedule | None = None) -> tuple[RunReport, Schedule]:
        """The candidate's run, steered by its decision list, or by `schedule` when given; and its schedule."""
        self.runs += 1
        recording = Recording(PrefixReplay(candidate.decisions) if schedule is None else FollowSchedule(schedule))
        report = run_once(self.scenario_for(candidate), self.seed, strategy=recording)
        return report, recording.schedule()

    def _fails(self, report: RunReport) -> bool:
        return bool(report.violations) and report.violations[0].invariant == self.invariant

    @staticmethod
    def _canonical(candidate: ShrinkCandidate, report: RunReport) -> ShrinkCandidate:
        return dataclasses.replace(candidate, decisions=tuple(report.result.decisions))

    def _try(self, candidate: ShrinkCandidate, schedule: Schedule | None = None) -> bool:
        """Adopt the candidate's actual run if it fails the same way and is smaller than the best so far.

        With `schedule`, the run follows it by task name instead of the candidate's decision list.
        """
        if (candidate == self.best and schedule is None) or (candidate, schedule) in self._tried:
            return False
        if _clock() > self._deadline or stopping.requested():
            raise _Stop
        self._tried.add((candidate, schedule))
        report, recorded = self._run(candidate, schedule)
        canonical = self._canonical(candidate, report)
        if not self._fails(report) or _key(canonical) >= _key(self.best):
            return False
        self.best, self.best_report, self.best_schedule = canonical, report, recorded
        return True

    def _best_decisions(self) -> tuple[Recorded, ...]:
        return self.best.decisions

    def _try_decisions(self, decisions: Sequence[Recorded]) -> bool:
        return self._try(dataclasses.replace(self.best, decisions=tuple(decisions)))

    def _try_plan(self, faults: tuple[int, ...], drives: tuple[int, ...]) -> bool:
        """A smaller plan, steered three ways until one fails the same way.

        First the best run's schedule followed by name, which survives a removed task; then its decision
        list by position; then the unsteered run (no decisions at all). A scenario keeps one drive at
        least: one where nothing is driven proves nothing, and the loader refuses it.
        """
        if not drives:
            return False
        smaller = dataclasses.replace(self.best, faults=faults, drives=drives)
        schedule = self.best_schedule.renamed(_drive_renaming(self.best.drives, drives))
        return (
            self._try(smaller, schedule) or self._try(smaller) or self._try(dataclasses.replace(smaller, decisions=()))
            or self._try_compensated(smaller, schedule) or self._try_hits_compensated(smaller, schedule)
        )

    def _try_compensated(self, smaller: ShrinkCandidate, schedule: Schedule) -> bool:
        """`smaller` with the compaction threshold lowered by what its dropped turns wrote.

        A generated run fills the transcript with dozens of turns before the one whose compaction fails. Dropped
        alone, they leave the threshold out of reach; lowered alone, the threshold starts a compaction turns
        early. Both at once keep the turn that started the failing compaction starting it.
        """
        dropped = sum(_written_tokens(self.scenario.drives[i]) for i in self.best.drives if i not in smaller.drives)
        config = dict(smaller.config)
        if not dropped or config.get(THRESHOLD, 0) - dropped < 1:
            return False
        lowered = dataclasses.replace(smaller, config=tuple({**config, THRESHOLD: config[THRESHOLD] - dropped}.items()))
        return self._try(lowered, schedule) or self._try(dataclasses.replace(lowered, decisions=()))

    def _try_hits_compensated(self, smaller: ShrinkCandidate, schedule: Schedule) -> bool:
        """`smaller` with each kept fault that fires at the nth hit of its point firing one hit earlier.

        A dropped drive may have passed the point itself (a turn whose compaction called the provider); without
        it, the hit the failure needs comes one earlier, and the fault would fire past the moment it mattered.
        """
        kept = set(smaller.faults)
        if not any(i in kept and hit > 1 for i, hit in smaller.nth):
            return False
        earlier = tuple((i, hit - 1 if i in kept and hit > 1 else hit) for i, hit in smaller.nth)
        lowered = dataclasses.replace(smaller, nth=earlier)
        return self._try(lowered, schedule) or self._try(dataclasses.replace(lowered, decisions=()))

    # ---- the passes ----------------------------------------------------------------------------

    def _drop_plan_entries(self) -> bool:
        """Delta debugging over the faults and drives together: halves first, then quarters, down to one.

        The fewer there are, the less there is to explain; a generated run carries dozens that play no
        part, and removing them a chunk at a time costs a few runs where one at a time costs one each.
        """
        improved = False
        size = max(1, (len(self.best.faults) + len(self.best.drives)) // 2)
        while True:
            entries = [("faults", i) for i in self.best.faults] + [("drives", i) for i in self.best.drives]
            removed_any = False
            start = len(entries) - size
            while start > -size:
                chunk = set(entries[max(start, 0):start + size])
                faults = tuple(i for i in self.best.faults if ("faults", i) not in chunk)
                drives = tuple(i for i in self.best.drives if ("drives", i) not in chunk)
                if self._try_plan(faults, drives):
                    removed_any = improved = True
                start -= size
            if size == 1 and not removed_any:
                return improved
            size = max(1, size // 2) if not removed_any else size

    def _lower_config(self) -> bool:
        """Binary search each lowerable config value down toward 1, so the next drop pass can remove drives.

        A generated run may need a dozen turns only to fill the transcript up to its compaction threshold.
        """
        improved = False
        for position, (field, _) in enumerate(self.best.config):
            low = 1
            while low < self.best.config[position][1]:
                middle = (low + self.best.config[position][1]) // 2
                config = self.best.config[:position] + ((field, middle),) + self.best.config[position + 1:]
                lowered = dataclasses.replace(self.best, config=config)
                if self._try(lowered, self.best_schedule) or self._try(dataclasses.replace(lowered, decisions=())):
                    improved = True
                else:
                    low = middle + 1
        return improved


def _written_tokens(drive: DriveSpec) -> int:
    """About what a turn (or a platform message) adds to its transcript: its text and a reply that echoes it."""
    text = drive.turn if drive.turn is not None else drive.message
    return 0 if text is None else 2 * message_tokens(text) + 1


def _drive_renaming(kept: Sequence[int], smaller: Sequence[int]) -> Callable[[str], str | None]:
    """How the drive tasks of a run with drives `kept` are named in a run with `smaller` (a subset of them).

    A drive's task is named `drive.<position>.<action>` (`sim.scenario.drives`): its position among the
    scenario's drives, which moves when an earlier drive is removed; a removed drive's task is gone.
    """
    position_of = {index: position for position, index in enumerate(smaller)}

    def rename(name: str) -> str | None:
        match = DRIVE_TASK.fullmatch(name)
        if match is None:
            return name
        position = position_of.get(kept[int(match.group(1))])
        return None if position is None else f"drive.{position}.{match.group(2)}"

    return rename


# ---- the whole job ----------------------------------------------------------------------------


def shrink(scenario: Scenario, seed: int, decisions: Sequence[Recorded], invariant: str, *, source: Path,
           out_dir: Path, time_limit: float, mutant: str | None = None,
           on_pass: Callable[[str, Size], None] | None = None) -> ShrinkResult:
    """Shrink the run of `scenario` at `seed` under `decisions`, which violates `invariant`, and write it out.

    `source` is the repro the run came from, named in the shrunk scenario's header; after `time_limit` CPU
    seconds, or once a stop is requested (sim.core.stopping), the smallest run found so far is the result. `mutant`
    names the curated mutant this process runs
    under, so the shrunk repro records it.
    """
    started = _clock()
    with frozen_time():
        shrinker = Shrinker(scenario, seed, invariant, decisions, started + time_limit)
        finished = shrinker.shrink(on_pass)
        after = Size.of(shrinker.best, shrinker.best_report)
        scenario_path = write_scenario(shrinker, source, out_dir, after)
        report = run_once(load_scenario(scenario_path, registry()), seed, shrinker.best.decisions)
    if not report.violations or report.violations[0].invariant != invariant:
        raise ShrinkError(f"{scenario_path}: the strict replay of the shrunk run does not violate {invariant}")
    return ShrinkResult(scenario.name, invariant, shrinker.before, after, report, scenario_path,
                        write_repro(report, out_dir, mutant=mutant), shrinker.runs, _clock() - started,
                        not finished and not stopping.requested(), mutant, not finished and stopping.requested())


def write_scenario(shrinker: Shrinker, source: Path, out_dir: Path, after: Size) -> Path:
    """The original scenario file with only the kept faults and drives, under a new name and a header."""
    original = Path(shrinker.scenario.path)
    document = tomllib.loads(original.read_text(encoding="utf-8"))
    name = shrinker.scenario.name + SHRUNK_SUFFIX
    document["name"] = name
    document["description"] = shrunk_description(shrinker, document)
    for i, hit in shrinker.best.nth:
        document["fault"][i]["nth"] = hit
    for key, kept in (("fault", shrinker.best.faults), ("drive", shrinker.best.drives)):
        if key in document:
            document[key] = [document[key][i] for i in kept]
    if shrinker.best.config:
        world = document.setdefault("world", {})
        world["config"] = {**world.get("config", {}), **dict(shrinker.best.config)}
    for claim in CLAIMS_DROPPED:
        document.get("expect", {}).pop(claim, None)
    before = shrinker.before
    header = [
        f"Shrunk from {source} (seed {shrinker.seed}), which violates {shrinker.invariant}; scenario {original}.",
        f"Kept {after.faults} of {before.faults} faults and {after.drives} of {before.drives} drives; "
        f"decisions {before.decisions} -> {after.decisions}, choice points {before.points} -> "
        f"{after.points}, steps {before.steps} -> {after.steps}.",
        *(f"Config {field} lowered from {shrinker.scenario.world.config[field]} to {value}, so fewer drives reach "
          "the failing state." for field, value in shrinker.best.config if value != shrinker.scenario.world.config[field]),
        *(f"Fault {shrinker.best.faults.index(i) + 1} fires at hit {hit} of its point, not {shrinker.scenario.faults[i].trigger.nth}: "
          "a dropped drive passed that point too." for i, hit in shrinker.best.nth
          if i in shrinker.best.faults and hit != shrinker.scenario.faults[i].trigger.nth),
        "The decision list that replays the violation is in the repro file written beside this one; the "
        "original's must_fail_under and coverage are left out, since this run proves only its own failure.",
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.toml"
    path.write_text("".join(f"# {line}\n" for line in header) + "\n" + toml_text(document), encoding="utf-8")
    return path


def shrunk_description(shrinker: Shrinker, document: dict[str, Any]) -> str:
    """The original's description, then what the shrink dropped (each fault by kind, each drive by its action)
    and lowered: what a reader of the shrunk file no longer sees, and would otherwise have to diff to learn."""
    original = shrinker.scenario.description or shrinker.scenario.reported or ""
    dropped = [_dropped(document.get("fault", []), shrinker.best.faults, "fault", _fault_label),
               _dropped(document.get("drive", []), shrinker.best.drives, "drive", _drive_label)]
    lowered = [f"{field} lowered from {shrinker.scenario.world.config[field]} to {value}"
               for field, value in shrinker.best.config if value != shrinker.scenario.world.config[field]]
    said = "; ".join(filter(None, dropped)) or "nothing dropped"
    return " ".join(filter(None, [original.rstrip(".") + "." if original else "",
                                  f"Shrunk from {shrinker.scenario.name}: {'; '.join([said, *lowered])}."]))


def _dropped(entries: list[dict[str, Any]], kept: Sequence[int], noun: str, label: Callable[[dict[str, Any]], str]) -> str:
    """`dropped 2 of 5 drives (turn "a question", compress)`, or "" when every one was kept; a long list ends in
    `N more`."""
    gone = [label(entry) for index, entry in enumerate(entries) if index not in kept]
    if not gone:
        return ""
    named = gone[:DROPPED_NAMED] + ([f"{len(gone) - DROPPED_NAMED} more"] if len(gone) > DROPPED_NAMED else [])
    return f"dropped {len(gone)} of {counted(len(entries), noun)} ({', '.join(named)})"


def _fault_label(fault: dict[str, Any]) -> str:
    return f"{fault['kind']} at {fault['point']}" if "point" in fault else str(fault["kind"])


def _drive_label(drive: dict[str, Any]) -> str:
    for action in ("turn", "message", "title"):
        if action in drive:
            return f"{action} {json.dumps(drive[action], ensure_ascii=False)}"
    return str(drive.get("command", "drive"))
