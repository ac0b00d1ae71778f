"""A pytest plugin: scenario files are test items, so `pytest scenarios/` runs the catalogue.

Every `*.toml` in a folder named `scenarios` becomes one item that explores the scenario and passes when its
expectation holds (no violation, every fault fired, every coverage mark reached). A failing item shows the
violated invariant, the timeline around its witnesses and the command that replays it. Items are
independent, so `pytest -n auto` spreads them over workers. Options: `--sim-seed`, `--sim-runs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

SCENARIO_FOLDER = "scenarios"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("compaction-sim")
    group.addoption("--sim-seed", type=int, default=None, help="first seed for every scenario (default: the scenario's)")
    group.addoption("--sim-runs", type=int, default=None, help="runs per scenario (default: the scenario's)")


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.suffix == ".toml" and file_path.parent.name == SCENARIO_FOLDER:
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield ScenarioItem.from_parent(self, name=self.path.stem)


class ScenarioFailed(Exception):
    """The scenario's expectation did not hold; the message is the full report."""


class ScenarioItem(pytest.Item):
    def runtest(self) -> None:
        from sim import report
        from sim.registry import registry
        from sim.scenario.loader import load_scenario
        from sim.scenario.runner import check

        scenario = load_scenario(self.path, registry())
        config = self.config
        verdict = check(scenario, runs=config.getoption("--sim-runs"), seed=config.getoption("--sim-seed"))
        if verdict.passed:
            return
        lines = [f"{scenario.name}: " + "; ".join(verdict.problems())]
        if verdict.failing is not None:
            out = Path(str(config.rootpath)) / "out"
            lines += ["", report.failure_block(verdict.failing, report.write_repro(verdict.failing, out))]
        raise ScenarioFailed("\n".join(lines))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ScenarioFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.name}"
