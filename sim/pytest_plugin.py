"""A pytest plugin: scenario files are test items, so `pytest scenarios/` runs the catalogue.

Every `*.toml` in a folder named `scenarios` becomes one item that explores the scenario and passes when its
expectation holds (no violation, every fault fired, every coverage mark reached). A failing item shows the
violated invariant, the timeline around its witnesses and the command that replays it. Items are
independent, so `pytest -n auto` spreads them over workers. Options: `--sim-seed`, `--sim-runs`, and
`--sim-must-fail-under`, which also runs each scenario under every mutant its `must_fail_under` names (one
child process per mutant, the scenario's own seeds and runs) and fails the item if one does not make it fail.
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
    group.addoption("--sim-must-fail-under", action="store_true", default=False,
                    help="also check must_fail_under: under each mutant it names, the scenario must report a violation")


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.suffix == ".toml" and file_path.parent.name == SCENARIO_FOLDER:
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield ScenarioItem.from_parent(self, name=self.path.stem)


class ScenarioFailed(Exception):
    """The scenario's expectation did not hold; the message is the full report."""


def _claim_problems(scenario: Any, out: Path) -> list[str]:
    """The scenario's `must_fail_under` claims that do not hold (each mutant in its own child process)."""
    from sim.mutants import load_mutants, require
    from sim.mutate import claim_problems, kill_matrix

    names = list(scenario.expect.must_fail_under)
    require(names, load_mutants())
    return claim_problems(kill_matrix([scenario], names, 1, out / "mutants", claims_only=True)).get(scenario.name, [])


class ScenarioItem(pytest.Item):
    def runtest(self) -> None:
        from sim import report
        from sim.registry import registry
        from sim.scenario.loader import load_scenario
        from sim.scenario.runner import check

        scenario = load_scenario(self.path, registry())
        config = self.config
        verdict = check(scenario, runs=config.getoption("--sim-runs"), seed=config.getoption("--sim-seed"))
        out = Path(str(config.rootpath)) / "out"
        claims = _claim_problems(scenario, out) if verdict.passed and config.getoption("--sim-must-fail-under") else []
        if verdict.passed and not claims:
            return
        lines = [f"{scenario.name}: " + "; ".join(verdict.problems() + claims)]
        if verdict.failing is not None:
            lines += ["", report.failure_block(verdict.failing, report.write_repro(verdict.failing, out))]
        raise ScenarioFailed("\n".join(lines))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ScenarioFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.name}"
