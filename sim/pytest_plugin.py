"""A pytest plugin: scenario files are test items, and `@pytest.mark.sim` runs a test under exploration.

Scenario files are collected where the project asks for them (the ini option `sim_scenarios`, folders
relative to the root; this project lists `scenarios`) and wherever they are named on the command line
(`pytest my.toml`), never elsewhere: a `scenarios/level1.toml` of an unrelated project is not ours. Each
becomes one item that explores the scenario and passes when its expectation holds (no violation, every
fault fired, every coverage mark reached). A failing item shows the
violated invariant, the timeline around its witnesses and the command that replays it. Items are
independent, so `pytest -n auto` spreads them over workers. `--sim-must-fail-under` also runs each scenario
under every mutant its `must_fail_under` names (one child process per mutant, the scenario's own seeds and
runs) and fails the item if one does not make it fail.

A test marked `@pytest.mark.sim(runs=500, strategy="portfolio")` is run by `sim.explore` as a program: an
`async def test_x(rt)`, where `rt` is each run's simulated Runtime, or a plain `def test_x()` that uses
threads, run by the thread runtime (other fixtures are made once and shared by all the runs). A failure
shows the exception (out of its exception groups) or the deadlock report, shrunk, and the command that
replays it: `--sim-replay REPRO` runs the recorded schedule once, byte for byte. Repro files go to
`--sim-repro-dir` (default: `out/` under the root).

With `--sim-swarm-runs N`, a workload in `scenarios/swarm/` (generated runs, `sim.swarm`) becomes one item per
batch of ten run indices, N runs in all, from the root seed `--sim-seed`; a failing batch names each failure
class once, with its run written out as a scenario file and its replay. Without it workloads are not collected.

Options: `--sim-seed`, `--sim-runs` (for scenarios and marked tests), `--sim-swarm-runs`, `--sim-must-fail-under`,
`--sim-replay`, `--sim-repro-dir`.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sim.scenario import targets

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr  # what Item.repr_failure returns; pytest exports no public name

SCENARIO_FOLDER = "scenarios"
SWARM_FOLDER = "swarm"  # scenarios/swarm/: generated workloads
SWARM_BATCH = 10  # generated runs per item, so a long campaign spreads over xdist workers
REPRO_FOLDER = "out"
MARKER = "sim"
MARKER_OPTIONS = ("runs", "time_budget_s", "strategy", "seed", "max_steps", "max_time_s", "preemption")
SCENARIO_PATHS_INI = "sim_scenarios"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("compaction-sim")
    group.addoption("--sim-seed", type=int, default=None,
                    help="first seed for every scenario and @pytest.mark.sim test (default: the scenario's or marker's)")
    group.addoption("--sim-runs", type=int, default=None,
                    help="runs per scenario and @pytest.mark.sim test (default: the scenario's or marker's)")
    group.addoption("--sim-swarm-runs", type=int, default=None,
                    help=f"run each workload in scenarios/swarm/ this many times, as items of {SWARM_BATCH} runs (default: workloads are not collected)")
    group.addoption("--sim-must-fail-under", action="store_true", default=False,
                    help="also check must_fail_under: under each mutant it names, the scenario must report a violation")
    group.addoption("--sim-replay", type=Path, default=None, metavar="REPRO",
                    help="run the selected @pytest.mark.sim test once, under the schedule this repro file recorded")
    group.addoption("--sim-repro-dir", type=Path, default=None, metavar="DIR",
                    help=f"where failing runs are written as repro files (default: {REPRO_FOLDER}/ under the root)")
    parser.addini(SCENARIO_PATHS_INI, type="paths", default=[],
                  help="folders (relative to the ini file) whose scenario .toml files are collected as tests")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}({', '.join(f'{o}=...' for o in MARKER_OPTIONS)}): run this "
                            "`async def test(rt)`, or plain `def test()` that uses threads, under sim.explore; a "
                            "failure prints the command that replays it")


def _asked_for(config: pytest.Config, file_path: Path) -> bool:
    """Whether the project listed a folder holding this file (`sim_scenarios`), or the command line named it."""
    folders = [Path(str(folder)) for folder in config.getini(SCENARIO_PATHS_INI)]
    named = [Path(str(config.invocation_params.dir), arg.split("::")[0]).resolve() for arg in config.args]
    path = file_path.resolve()
    return path in named or any(path.is_relative_to(folder.resolve()) for folder in folders)


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.suffix != ".toml" or not _asked_for(parent.config, file_path):
        return None
    if SWARM_FOLDER not in (file_path.parent.name, file_path.parent.parent.name):  # a target's workloads sit below it
        return ScenarioFile.from_parent(parent, path=file_path)
    # Workloads only on request, like `run` leaves them to `swarm`: a campaign is not a catalogue check.
    swarm_runs = parent.config.getoption("--sim-swarm-runs")
    if swarm_runs and file_path.parent.name == SWARM_FOLDER and file_path.parent.parent.name == SCENARIO_FOLDER:
        return SwarmFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield ScenarioItem.from_parent(self, name=self.path.stem)


class ScenarioFailed(Exception):
    """The scenario's expectation did not hold; the message is the full report."""


def _claim_problems(scenario: Any, out: Path) -> list[str]:
    """The scenario's `must_fail_under` claims that do not hold (each mutant in its own child process)."""
    from sim.mutation.kill_matrix import claim_problems, kill_matrix
    from sim.mutation.mutants import load_mutants, require

    names = list(scenario.expect.must_fail_under)
    require(names, load_mutants())
    return claim_problems(kill_matrix([scenario], names, 1, out / "mutants", claims_only=True)).get(scenario.name, [])


class _SimItem(pytest.Item):
    """An item whose failure is a verdict: shown as the harness writes it, not as a Python traceback."""

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, ScenarioFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)


class ScenarioItem(_SimItem):
    def runtest(self) -> None:
        from sim.reports import text_report
        from sim.scenario.loader import load_scenario
        from sim.scenario.names import registry
        from sim.scenario.runner import check

        scenario = load_scenario(self.path, registry())
        config = self.config
        if scenario.target != targets.loaded():
            self._run_on_target(scenario)
            return
        verdict = check(scenario, runs=config.getoption("--sim-runs"), seed=config.getoption("--sim-seed"))
        out = Path(str(config.rootpath)) / "out"
        claims = _claim_problems(scenario, out) if verdict.passed and config.getoption("--sim-must-fail-under") else []
        if verdict.passed and not claims:
            return
        lines = [f"{scenario.name}: " + "; ".join(verdict.problems() + claims)]
        if verdict.failing is not None:
            lines += ["", text_report.failure_block(verdict.failing, text_report.write_repro(verdict.failing, out))]
        raise ScenarioFailed("\n".join(lines))

    def _run_on_target(self, scenario: Any) -> None:
        """A scenario of another target runs in that target's process; a target this machine lacks is a skip that
        names it and how to install it."""
        reason = targets.unavailable(scenario.target)
        if reason is not None:
            pytest.skip(f"{scenario.target}: {reason}")
        options = [f"--{name}={value}" for name, value in (("runs", self.config.getoption("--sim-runs")),
                                                           ("seed", self.config.getoption("--sim-seed"))) if value is not None]
        done = subprocess.run([sys.executable, "-m", "sim", "run", str(self.path), *options,
                               "--out", str(Path(str(self.config.rootpath)) / REPRO_FOLDER)],
                              capture_output=True, text=True, env={**os.environ, targets.TARGET_ENV: scenario.target})
        if done.returncode != 0:
            raise ScenarioFailed(f"{scenario.name} on {scenario.target}:\n{done.stdout}{done.stderr}")

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.name}"


# ---- generated workloads (scenarios/swarm/) ----------------------------------------------------------


class SwarmFile(pytest.File):
    """A workload: its campaign's runs as items of SWARM_BATCH consecutive run indices."""

    def collect(self) -> Iterator[pytest.Item]:
        from sim.scenario.names import registry
        from sim.swarm.workload_loader import load_workload

        load_workload(self.path, registry())  # a bad workload is one collection error, not one per batch
        runs = self.config.getoption("--sim-swarm-runs")
        for start in range(0, runs, SWARM_BATCH):
            end = min(start + SWARM_BATCH, runs)
            yield SwarmBatch.from_parent(self, name=f"runs{start}-{end - 1}", indices=range(start, end))


class SwarmBatch(_SimItem):
    def __init__(self, *, indices: range, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.indices = indices

    def runtest(self) -> None:
        from sim.scenario.names import registry
        from sim.swarm.export import export_run
        from sim.swarm.generated_runs import run_indices
        from sim.swarm.results import failure_classes
        from sim.swarm.workload_loader import load_workload

        workload = load_workload(self.path, registry())
        root_seed = self.config.getoption("--sim-seed") or 0
        summaries, _ = run_indices([workload], root_seed, self.indices)
        classes = failure_classes(summaries)
        if not classes:
            return
        out = Path(str(self.config.rootpath)) / REPRO_FOLDER / SWARM_FOLDER
        lines = [f"{workload.name}: {sum(map(len, classes.values()))} of {len(self.indices)} generated runs failed"]
        for key, runs in classes.items():
            exported = export_run(workload, root_seed, runs[0].index, key[0], out)
            lines += ["", f"{key[0]} ({', '.join(key[1:]) or 'no witnesses'}): runs {', '.join(str(run.index) for run in runs)}",
                      f"  {exported.report.violations[0].explanation}", f"  scenario: {exported.scenario}",
                      f"  replay: {exported.replay(None)}"]
        raise ScenarioFailed("\n".join(lines))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"workload {self.path.stem} {self.name}"


# ---- @pytest.mark.sim tests -------------------------------------------------------------------------


class ExplorationFailed(Exception):
    """A marked test failed in one of its runs; the message is the failure and how to replay it."""


@pytest.fixture
def rt(request: pytest.FixtureRequest) -> None:
    """The simulated Runtime of each run of a `@pytest.mark.sim` test (the plugin passes it in)."""
    if request.node.get_closest_marker(MARKER) is None:
        pytest.fail("the rt fixture is the simulated Runtime of a @pytest.mark.sim test; mark the test", pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    __tracebackhide__ = True
    marker = pyfuncitem.get_closest_marker(MARKER)
    if marker is None:
        return None
    _check_marker(marker)
    program = _program(pyfuncitem)
    replaying = pyfuncitem.config.getoption("--sim-replay")
    if replaying is not None:
        _replay(pyfuncitem, program, replaying)
    else:
        _explore(pyfuncitem, program, dict(marker.kwargs))
    return True


def _check_marker(marker: pytest.Mark) -> None:
    """Only the keywords `sim.explore` takes from a marker; a misspelt one is named, with what it resembles."""
    __tracebackhide__ = True
    if marker.args:
        pytest.fail(f"@pytest.mark.{MARKER} takes keywords only ({', '.join(MARKER_OPTIONS)})", pytrace=False)
    for keyword in marker.kwargs:
        if keyword not in MARKER_OPTIONS:
            close = difflib.get_close_matches(keyword, MARKER_OPTIONS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (it takes {', '.join(MARKER_OPTIONS)})"
            pytest.fail(f"@pytest.mark.{MARKER}: no keyword {keyword!r}{hint}", pytrace=False)


def _program(item: pytest.Function) -> Any:
    """The test as a program: async with the run's Runtime as `rt`, or plain (thread runtime); fixtures shared."""
    __tracebackhide__ = True
    test = item.obj
    shared = {name: item.funcargs[name] for name in item._fixtureinfo.argnames if name != "rt"}
    if inspect.iscoroutinefunction(test):
        if "rt" not in item.fixturenames:
            pytest.fail(f"@pytest.mark.{MARKER}: an `async def` test takes `rt`, the run's simulated Runtime", pytrace=False)

        @functools.wraps(test)
        async def program(runtime: Any) -> Any:
            return await test(rt=runtime, **shared)

        return program
    if "rt" in item.fixturenames:
        pytest.fail(f"@pytest.mark.{MARKER}: `rt` is the Runtime of an `async def` test; a plain `def` test runs "
                    "under the thread runtime and takes no `rt`", pytrace=False)

    @functools.wraps(test)
    def threads() -> Any:
        return test(**shared)

    return threads


def _repro_dir(config: pytest.Config) -> Path:
    return config.getoption("--sim-repro-dir") or Path(str(config.rootpath)) / REPRO_FOLDER


def _explore(item: pytest.Function, program: Any, options: dict[str, Any]) -> None:
    __tracebackhide__ = True
    from sim.programs.exploration import explore

    config = item.config
    if config.getoption("--sim-runs") is not None:
        options.pop("time_budget_s", None)
        options["runs"] = config.getoption("--sim-runs")
    if config.getoption("--sim-seed") is not None:
        options["seed"] = config.getoption("--sim-seed")
    try:
        found = explore(program, repro_dir=_repro_dir(config), repro_name=item.name, **options)
    except (TypeError, ValueError) as error:
        pytest.fail(f"@pytest.mark.{MARKER}: {error}", pytrace=False)
    if found.failure is None:
        return
    command = f"python -m pytest {shlex.quote(item.nodeid)} --sim-replay {shlex.quote(str(found.failure.repro))}"
    raise ExplorationFailed(f"{found}\n  replay: {command}") from found.failure.error


def _replay(item: pytest.Function, program: Any, repro: Path) -> None:
    __tracebackhide__ = True
    from sim.programs.exploration import replay
    from sim.programs.failure import Failure

    try:
        failure = Failure.of(replay(repro, program))
    except ValueError as error:
        pytest.fail(str(error), pytrace=False)
    if failure is not None:
        raise ExplorationFailed(f"replayed {repro}:\n{failure}") from failure.error
