"""Ctrl+C and SIGTERM during a long command, for real: a stop request is the user's, never a verdict.

Each test starts a real `python -m sim` process with more work than it could finish, waits for the line on
stderr that says the work is under way (a progress line, or the note a first Ctrl+C prints), and only then
sends the signal: nothing here waits on a clock. The first request stops the command after the run in
progress (exit 130, "interrupted after N runs", what was found so far, no repro of a run that did not fail);
a second one stops it at once; child processes end with their parent.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import checkout_env, run_cli

from sim.scenario import targets

ROOT = Path(__file__).resolve().parent.parent
R1 = ROOT / "scenarios" / "ctrl_c_during_summary_blocks_next_turn.toml"
R1_MUTANT = "hard-cancel-through-fence"
SINGLE = ROOT / "scenarios" / "swarm" / "single_agent.toml"
HERMES_TERMINAL = ROOT / "scenarios" / "swarm" / "hermes" / "terminal.toml"
RELEASE = "hermes==0.19.0"
ENDLESS = "100000000"  # runs no test waits for: the command is always stopped first
NOTE = "stopping after the run in progress"
# One run of this takes seconds (a 50,000-message transcript to compact), so a second Ctrl+C sent when the
# first one's note shows finds it still running.
SLOW = """\
name = "slow_long_transcript"
[world]
sessions = [{ id = "s1", messages = 50000 }]
config = { threshold_tokens = 400 }
[[drive]]
at = "0s"
turn = "a question over a long transcript"
"""
# Explored without end: no mutant makes its one turn fail.
ENDLESS_TURNS = f"""\
name = "endless_turns"
[world]
sessions = [{{ id = "s1", messages = 4 }}]
[[drive]]
at = "0s"
turn = "a question"
[explore]
runs = {ENDLESS}
"""
LINE_WAIT_S = 300.0  # a guard against a hang, not a timing: every wait ends on a line


class Command:
    """A running `python -m sim` whose stderr is read line by line as it comes (its stdout read beside it)."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "sim", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, cwd=cwd, env=env or checkout_env(), start_new_session=True)
        self.stderr: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stdout: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        threading.Thread(target=lambda: self._stdout.put(self.process.stdout.read()), daemon=True).start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, text: str) -> str:
        """The first new stderr line that contains `text`; fails if the process ends first."""
        deadline = time.monotonic() + LINE_WAIT_S
        while True:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, f"the command ended before saying {text!r}:\n{''.join(self.stderr)}"
            self.stderr.append(line)
            if text in line:
                return line

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def finish(self) -> tuple[int, str, str]:
        """Exit status, stdout and the whole of stderr, once it ends."""
        code = self.process.wait(timeout=LINE_WAIT_S)
        while (line := self._lines.get(timeout=LINE_WAIT_S)) is not None:
            self.stderr.append(line)
        return code, self._stdout.get(timeout=LINE_WAIT_S), "".join(self.stderr)


@pytest.fixture
def sim() -> Iterator[Callable[..., Command]]:
    """Starts `python -m sim` commands; any still running when the test ends (it failed) is killed with its group."""
    started: list[Command] = []

    def start(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Command:
        started.append(Command(*args, cwd=cwd, env=env))
        return started[-1]

    yield start
    for command in started:
        if command.process.poll() is None:
            os.killpg(command.process.pid, signal.SIGKILL)
            command.process.wait()


def child_pids(pid: int) -> list[int]:
    """The processes `pid` started (Linux)."""
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def assert_interrupted(code: int, stderr: str, command: str) -> int:
    """Exit 130 with the `interrupted after N runs` line and no traceback; N."""
    assert code == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    line = next(line for line in stderr.splitlines() if line.startswith(f"python -m sim {command}: interrupted after "))
    return int(line.split("interrupted after ")[1].split()[0])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_run_stops_after_the_run_in_progress_and_records_no_bug(sim, tmp_path, signum):
    run = sim("run", str(R1), "--runs", ENDLESS, "--out", "out", cwd=tmp_path)
    run.wait_for("runs so far")
    run.signal(signum)
    code, stdout, stderr = run.finish()
    runs = assert_interrupted(code, stderr, "run")
    assert runs >= 1 and not_a_verdict(stdout + stderr)
    assert "stopped" in stdout and "0 failed, 1 stopped part-way" in stdout
    assert not (tmp_path / "out").exists(), "a repro was written for an interrupted run"


def not_a_verdict(output: str) -> bool:
    return "run_completes" not in output and "Exceptions from nursery" not in output and "repro:" not in output


@pytest.mark.parametrize("budget", [["--runs", ENDLESS], ["--time-budget", ENDLESS]], ids=["runs", "time-budget"])
def test_explore_stops_after_the_run_in_progress(sim, tmp_path, budget):
    explore = sim("explore", str(R1), *budget, "--out", "out", "--json", "--progress", cwd=tmp_path)
    explore.wait_for("latest seed")
    explore.signal(signal.SIGINT)
    code, stdout, stderr = explore.finish()
    runs = assert_interrupted(code, stderr, "explore")
    document = json.loads(stdout)
    assert document["interrupted"] and document["runs"] == runs and document["violation"] is None
    assert "cancel scopes must nest" not in stderr and not_a_verdict(stdout + stderr)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_swarm_stops_with_a_results_file_that_merge_reads(sim, tmp_path, jobs):
    swarm = sim("swarm", str(SINGLE), "--runs", ENDLESS, "-j", jobs, "--out", "out", cwd=tmp_path)
    swarm.wait_for("] run ")
    workers = child_pids(swarm.process.pid)
    assert len(workers) == (0 if jobs == "1" else 2)
    swarm.signal(signal.SIGINT)
    code, stdout, stderr = swarm.finish()
    runs = assert_interrupted(code, stderr, "swarm")
    results = json.loads((tmp_path / "out" / "swarm-seed0-shard1of1.json").read_text())
    assert results["runs"] == runs >= 1 and results["interrupted"] == ["1/1"] and not results["passed"]
    assert "incomplete: interrupted" in stdout
    assert all(gone(pid) for pid in workers), "a worker process outlived the campaign"
    merged = run_cli("merge", "out/swarm-seed0-shard1of1.json", "--json", cwd=tmp_path)
    assert merged.returncode == 1 and json.loads(merged.stdout)["runs"] == runs, merged.stderr


def test_a_swarm_on_a_released_target_stops_with_its_results_file(sim, tmp_path):
    """The command re-runs itself in a process that loads the release: the stop reaches that process, which
    stops as the command does, and the campaign so far is kept."""
    reason = targets.unavailable(RELEASE)
    if reason is not None:
        pytest.skip(f"{RELEASE}: {reason}")
    swarm = sim("swarm", str(HERMES_TERMINAL), "--runs", ENDLESS, "--out", "out", cwd=tmp_path)
    swarm.wait_for("] run ")
    swarm.signal(signal.SIGINT)
    code, stdout, stderr = swarm.finish()
    runs = assert_interrupted(code, stderr, "swarm")
    results = json.loads((tmp_path / "out" / "swarm-seed0-shard1of1.json").read_text())
    assert results["target"] == RELEASE and results["runs"] == runs >= 1 and results["interrupted"] == ["1/1"]


def test_sigterm_stops_swarm_workers_too(sim, tmp_path):
    swarm = sim("swarm", str(SINGLE), "--runs", ENDLESS, "-j", "2", "--out", "out", cwd=tmp_path)
    swarm.wait_for("] run ")
    workers = child_pids(swarm.process.pid)
    swarm.signal(signal.SIGTERM)
    code, _, stderr = swarm.finish()
    assert_interrupted(code, stderr, "swarm")
    assert len(workers) == 2 and all(gone(pid) for pid in workers)


def test_a_second_ctrl_c_stops_at_once(sim, tmp_path):
    (tmp_path / "slow.toml").write_text(SLOW)
    run = sim("run", "slow.toml", "--runs", ENDLESS, "--out", "out", cwd=tmp_path)
    run.wait_for("runs so far")  # a run is over: the next is under way
    run.signal(signal.SIGINT)
    run.wait_for(NOTE)
    run.signal(signal.SIGINT)
    code, stdout, stderr = run.finish()
    assert code == 130 and "python -m sim: interrupted at once" in stderr, stderr
    assert stdout == "", "the run in progress was finished and judged"
    assert "Traceback" not in stderr and not (tmp_path / "out").exists()


def test_mutate_stops_its_mutant_processes(sim, tmp_path):
    """The mutant's run goes on forever (its other scenario explores without end) until the Ctrl+C."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    (tmp_path / "endless.toml").write_text(ENDLESS_TURNS)
    mutate = sim("mutate", "--mutant", R1_MUTANT, "--scenarios", str(R1), "endless.toml", "--jobs", "1", "--out", "out",
                     cwd=tmp_path, env=checkout_env({"TMPDIR": str(temp)}))
    mutate.wait_for("sanity pass: ok")
    mutate.signal(signal.SIGINT)
    code, _, stderr = mutate.finish()
    assert code == 130 and "python -m sim mutate: interrupted after 0 mutants of 1" in stderr, stderr
    assert "SURVIVED" not in stderr and "STALE" not in stderr
    assert not list(temp.glob("mutant-*")), "an overlay folder was left behind"


def test_check_determinism_stops_in_its_child(sim, tmp_path):
    check = sim("check-determinism", str(R1), "--seeds", ENDLESS, cwd=tmp_path)
    check.wait_for("seeds so far")
    children = child_pids(check.process.pid)
    check.signal(signal.SIGINT)
    code, stdout, stderr = check.finish()
    assert assert_interrupted(code, stderr, "check-determinism") >= 1
    assert "0 runs compared in two processes before the interrupt: 0 differences" in stdout
    assert all(gone(pid) for pid in children)


def test_shrink_stops_and_writes_the_smallest_run_so_far(sim, tmp_path):
    (tmp_path / "slow.toml").write_text(R1.read_text().replace("messages = 40", "messages = 3000"))
    found = run_cli("run", "slow.toml", "--mutant", R1_MUTANT, "--no-shrink", "--out", "out", "--json", cwd=tmp_path)
    repro = json.loads(found.stdout)["scenarios"][0]["replay"].split()[-3]
    shrink = sim("shrink", repro, "--mutant", R1_MUTANT, "--time-limit", ENDLESS, cwd=tmp_path)
    shrink.wait_for("drop plan entries")
    shrink.signal(signal.SIGINT)
    code, stdout, stderr = shrink.finish()
    assert assert_interrupted(code, stderr, "shrink") >= 2
    assert "stopped by the user" in stdout and (tmp_path / "out" / "ctrl_c_during_summary_blocks_next_turn_shrunk.toml").exists()


def test_bench_stops_at_its_next_run_and_prints_no_figure(sim, tmp_path):
    (tmp_path / "slow.toml").write_text(SLOW)
    bench = sim("bench", "scenarios", str(R1), "slow.toml", "--runs", "3", cwd=tmp_path)
    bench.wait_for("[1/2]")  # the slow scenario's first run is under way
    bench.signal(signal.SIGINT)
    code, stdout, stderr = bench.finish()
    assert assert_interrupted(code, stderr, "bench") >= 3  # the first scenario's 3 (and the slow one's first, if it began)
    assert stdout == ""


def test_stress_stops_its_workers_cleanly_and_checks_the_run(sim, tmp_path):
    stress = sim("stress", "--duration", ENDLESS, "--processes", "2", "--json", cwd=tmp_path)
    started = stress.wait_for("started 2 workers")
    workers = [int(part.split()[-1]) for part in started.split(": ", 1)[1].split(", ")]
    stress.signal(signal.SIGINT)
    code, stdout, stderr = stress.finish()
    assert code == 130 and "python -m sim stress: interrupted after" in stderr, stderr
    document = json.loads(stdout)
    assert document["interrupted"] and document["violations"] == [] and document["integrity"] == ["ok"]
    assert all(gone(pid) for pid in workers)
