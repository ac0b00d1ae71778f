"""The public API for any async program: `sim.explore`, `sim.replay`, failures read out of a run, repro
files, the `@pytest.mark.sim` marker, and the README's example, executed as written."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, checkout_env

import sim
from sim.kernel.errors import DivergenceError

README_SECTION = "## Any program under the simulator"


def readme_examples() -> list[str]:
    """The python code blocks of the README's section on exploring programs, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index(README_SECTION):]
    section = section[:section.index("\n## ", len(README_SECTION))]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


# ---- programs ----------------------------------------------------------------------------------


async def counted(rt: Any) -> None:
    """Two tasks each run three checkpoints: nothing can fail."""
    async def worker() -> None:
        for _ in range(3):
            await rt.checkpoint()

    async with rt.open_nursery() as nursery:
        nursery.start_soon(worker)
        nursery.start_soon(worker)


async def raises_in_a_child(rt: Any) -> None:
    async def sibling() -> None:
        await rt.sleep(10)

    async def failing() -> None:
        await rt.sleep(1)
        raise KeyError("no such account")

    async with rt.open_nursery() as outer:
        outer.start_soon(sibling, name="sibling")
        async with rt.open_nursery() as inner:
            inner.start_soon(failing, name="auditor")


async def lock_order(rt: Any) -> None:
    """Two tasks take two named locks in opposite orders, and both get their first one."""
    first, second = rt.lock("ledger"), rt.lock("accounts")
    both_hold_one = rt.barrier(2, "both hold one")

    async def take(a: Any, b: Any) -> None:
        async with a:
            await both_hold_one.wait()
            async with b:
                pass

    async with rt.open_nursery() as nursery:
        nursery.start_soon(take, first, second, name="left")
        nursery.start_soon(take, second, first, name="right")


# ---- explore -----------------------------------------------------------------------------------


def test_a_program_that_cannot_fail_runs_its_whole_budget():
    found = sim.explore(counted, runs=25, repro_dir=None)
    assert found.runs == 25 and found.failure is None and not found.failed and found.exhausted is None
    assert "25 runs under portfolio" in str(found) and str(found).endswith("no failure")


def test_a_systematic_search_stops_when_its_whole_space_has_run():
    found = sim.explore(counted, strategy="dfs", runs=10_000, repro_dir=None)
    assert found.exhausted is True and found.failure is None and 2 < found.runs < 10_000


def test_a_failure_is_unwrapped_from_its_exception_groups_and_names_the_task_that_raised_it(tmp_path):
    found = sim.explore(raises_in_a_child, runs=5, repro_dir=tmp_path)
    failure = found.failure
    assert found.runs == 1 and isinstance(failure.error, KeyError) and failure.task == "auditor"
    assert failure.outcome == sim.RunOutcome.ERROR and failure.deadlock is None
    assert isinstance(failure.run.error, BaseExceptionGroup) and sim.unwrap(failure.run.error) is failure.error
    assert failure.headline() == "error in task 'auditor': KeyError: 'no such account'"
    document = json.loads(failure.repro.read_text())
    assert document["program"] == "test_exploration:raises_in_a_child" and document["task"] == "auditor"


def test_a_deadlock_is_a_failure_with_its_wait_for_cycle():
    failure = sim.explore(lock_order, runs=5, repro_dir=None).failure
    assert failure.outcome == sim.RunOutcome.DEADLOCK and failure.task is None
    assert failure.headline() == "deadlock: no task can run and no timer is pending"
    cycle = {(entry.task, entry.waits_on, entry.held_by) for entry in failure.deadlock.cycle}
    assert cycle == {("left", "lock 'accounts'", ("right",)), ("right", "lock 'ledger'", ("left",))}
    assert "wait-for cycle: 'left' waits on lock 'accounts' held by 'right', which waits on lock 'ledger' held by 'left'" in str(failure)


def test_runs_and_a_time_budget_exclude_each_other():
    with pytest.raises(ValueError, match="not both"):
        sim.explore(counted, runs=3, time_budget_s=1.0)


def test_a_time_budget_keeps_running_until_it_is_spent():
    found = sim.explore(counted, time_budget_s=0.2, repro_dir=None)
    assert found.runs > 1 and found.cpu_s >= 0.2


# ---- replay ------------------------------------------------------------------------------------


def test_a_failure_replays_byte_for_byte_from_itself_its_repro_file_and_its_decisions(tmp_path):
    failure = sim.explore(lock_order, strategy="random", runs=50, repro_dir=tmp_path).failure
    recorded = failure.run.trace_jsonl()
    assert sim.replay(failure, lock_order).trace_jsonl() == recorded
    assert sim.replay(failure.repro, lock_order).trace_jsonl() == recorded
    assert sim.replay(str(failure.repro), lock_order).trace_jsonl() == recorded
    assert sim.replay(failure.decisions, lock_order, seed=failure.seed).trace_jsonl() == recorded


def test_a_repro_file_refuses_another_program_and_a_run_that_no_longer_matches(tmp_path):
    repro = sim.explore(lock_order, runs=5, repro_dir=tmp_path).failure.repro
    with pytest.raises(ValueError, match="recorded from test_exploration:lock_order"):
        sim.replay(repro, counted)
    document = json.loads(repro.read_text())
    document["digest"] = "0" * 64
    repro.write_text(json.dumps(document))
    with pytest.raises(DivergenceError, match="differs from the recorded one"):
        sim.replay(repro, lock_order)


def test_a_repro_file_keeps_the_budgets_a_budget_failure_needs(tmp_path):
    async def spins(rt: Any) -> None:
        while True:
            await rt.checkpoint()

    failure = sim.explore(spins, runs=1, max_steps=300, repro_dir=tmp_path).failure
    assert failure.outcome == sim.RunOutcome.BUDGET and "step budget of 300 steps" in failure.headline()
    assert sim.replay(failure.repro, spins).outcome == sim.RunOutcome.BUDGET


# ---- the README --------------------------------------------------------------------------------


def test_the_readme_example_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_examples()[0], "README.md", "exec"), {"__name__": "readme_example"})
    printed = capsys.readouterr().out
    assert "error in task 'main': AssertionError: a deposit was lost" in printed
    assert list((tmp_path / "out").glob("deposits-seed*.repro.json"))


def test_the_readme_thread_example_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_examples()[1], "README.md", "exec"), {"__name__": "readme_threads"})
    assert not (tmp_path / "out").exists()  # explore writes nothing unless asked


def test_the_readme_test_fails_with_the_command_that_replays_it(tmp_path):
    (tmp_path / "test_readme.py").write_text(readme_examples()[2], encoding="utf-8")
    done = _pytest(tmp_path, "test_readme.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "AssertionError" in done.stdout and "runs under portfolio" in done.stdout
    command = re.search(r"replay: (python -m pytest .*)", done.stdout).group(1)
    again = _pytest(tmp_path, *shlex.split(command)[3:])
    assert again.returncode == 1 and "replayed " in again.stdout and re.search(r"assert [12]0 == 30", again.stdout)


def test_a_marked_test_that_holds_passes_and_rt_needs_the_marker(tmp_path):
    (tmp_path / "test_holds.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.sim(runs=20, strategy='dfs')\n"
        "async def test_locked(rt, tmp_path):\n"
        "    lock = rt.lock('account')\n"
        "    async with lock:\n"
        "        await rt.checkpoint()\n\n"
        "def test_unmarked(rt):\n"
        "    pass\n", encoding="utf-8")
    done = _pytest(tmp_path, "test_holds.py")
    assert "1 passed, 1 error" in done.stdout and "mark the test" in done.stdout


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          capture_output=True, text=True, cwd=folder, env=checkout_env())


# ---- the library's edges ------------------------------------------------------------------------


@pytest.mark.parametrize("options, message", [
    ({"runs": 0}, "runs must be a whole number of at least 1"),
    ({"runs": -5}, "runs must be a whole number of at least 1"),
    ({"time_budget_s": 0}, "time_budget_s must be above 0"),
    ({"seed": -1}, "seed must be a whole number of at least 0"),
    ({"max_steps": 0}, "max_steps must be a whole number of at least 1"),
])
def test_explore_takes_the_command_lines_rules_for_its_budgets(options, message):
    with pytest.raises(ValueError, match=message):
        sim.explore(counted, **options)


def test_a_plain_function_that_takes_a_runtime_is_a_usage_error_not_a_failure():
    def looks_async(rt: Any) -> int:
        return 1

    with pytest.raises(TypeError, match="takes `rt` but is not async"):
        sim.explore(looks_async, runs=1)


def test_a_failure_replays_with_the_budgets_it_was_found_with():
    async def endless(rt: Any) -> None:
        while True:
            await rt.checkpoint()

    failure = sim.explore(endless, runs=1, max_steps=50, shrink=False).failure
    assert failure.settings.max_steps == 50
    assert sim.replay(failure, endless).digest() == failure.run.digest()  # no max_steps given: the failure's


def test_a_portfolio_search_is_named_portfolio_and_its_run_the_member_that_found_it():
    found = sim.explore(lock_order, runs=50, shrink=False)
    assert found.strategy.name == "portfolio" and found.failure.run.strategy.startswith("portfolio/")


def test_the_unsteered_fifo_schedule_runs_once_and_is_done():
    found = sim.explore(counted, strategy="fifo", runs=10)
    assert found.runs == 1 and found.exhausted and not found.failed


def test_a_script_s_program_replays_as_the_same_function_imported_from_its_module(tmp_path):
    failure = sim.explore(lock_order, runs=5, repro_dir=tmp_path).failure
    document = json.loads(failure.repro.read_text(encoding="utf-8"))
    document["program"] = "__main__:lock_order"  # recorded from `python test_exploration.py`
    failure.repro.write_text(json.dumps(document), encoding="utf-8")
    assert sim.replay(failure.repro, lock_order).digest() == failure.run.digest()


def test_the_cli_says_how_to_replay_a_program_s_repro_file(tmp_path):
    repro = sim.explore(lock_order, runs=5, repro_dir=tmp_path).failure.repro
    done = subprocess.run([sys.executable, "-m", "sim", "replay", str(repro)], capture_output=True, text=True, env=checkout_env())
    assert done.returncode == 2 and "a program's repro file" in done.stderr and "sim.replay(" in done.stderr


def test_a_misspelt_marker_keyword_is_named_with_what_it_resembles(tmp_path):
    (tmp_path / "test_typo.py").write_text(
        "import pytest\n\n@pytest.mark.sim(run=5)\nasync def test_x(rt):\n    await rt.checkpoint()\n\n"
        "@pytest.mark.sim(runs=0)\nasync def test_y(rt):\n    await rt.checkpoint()\n", encoding="utf-8")
    done = _pytest(tmp_path, "test_typo.py")
    assert "no keyword 'run'; did you mean 'runs'?" in done.stdout
    assert "runs must be a whole number of at least 1" in done.stdout and "2 failed" in done.stdout


def test_a_plain_test_with_threads_runs_under_the_marker(tmp_path):
    (tmp_path / "test_threads_marked.py").write_text(
        "import threading\nimport pytest\n\n@pytest.mark.sim(runs=200)\ndef test_lost_update():\n"
        "    count = [0]\n    def add():\n        seen = count[0]\n        count[0] = seen + 1\n"
        "    workers = [threading.Thread(target=add) for _ in range(2)]\n    [w.start() for w in workers]\n"
        "    [w.join() for w in workers]\n    assert count[0] == 2\n", encoding="utf-8")
    done = _pytest(tmp_path, "test_threads_marked.py")
    assert "1 failed" in done.stdout and "--sim-replay" in done.stdout


def test_an_async_program_that_starts_a_real_thread_is_told_to_be_a_thread_program():
    import threading

    async def starts_a_thread(rt: Any) -> None:
        threading.Thread(target=lambda: None).start()
        await rt.checkpoint()

    with pytest.raises(sim.NotSimulated, match="an async program started a real thread"):
        sim.explore(starts_a_thread, runs=1)
