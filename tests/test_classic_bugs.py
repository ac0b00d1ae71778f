"""The classic bugs of `bench classic`: each passes under the default schedules and fails under some
other, found by the preemption-bounded search with the preemptions its docstring claims; the benchmark
reports one JSON document and a progress line per bug."""

from __future__ import annotations

import json

import pytest
from support import run_cli

import sim
from sim.bench import classic_threads
from sim.bench.classic import bench_classic
from sim.bench.classic_bugs import BUGS
from sim.strategies.dfs import PreemptionBoundedDFS
from sim.strategies.prefix import PrefixReplay

# Minimal preemptions, by the search that runs every schedule of fewer preemptions first.
MINIMAL_PREEMPTIONS = {
    "lost_update": 1, "check_then_act": 1, "order_violation": 1, "atomicity_depth3": 2, "aba_free_list": 1,
    "three_lock_deadlock": 1, "lost_wakeup": 1, "bounded_buffer": 0, "must_run_last": 0, "rare_among_ten": 0,
    "stale_copy_depth3": 2,
}
DEADLOCKS = {"three_lock_deadlock": True, "lost_wakeup": False, "must_run_last": False}  # bug -> has a wait-for cycle


@pytest.mark.parametrize("name", sorted(BUGS))
def test_a_classic_bug_passes_under_fifo_and_under_run_until_blocked(name):
    with sim.frozen_time():
        assert sim.World(0, PrefixReplay([])).run(BUGS[name]).outcome == sim.RunOutcome.OK
        assert sim.World(0, PreemptionBoundedDFS(0)).run(BUGS[name]).outcome == sim.RunOutcome.OK


@pytest.mark.parametrize("name", sorted(BUGS))
def test_the_bounded_search_finds_each_bug_with_its_minimal_preemptions(name):
    minimal = MINIMAL_PREEMPTIONS[name]
    found = sim.explore(BUGS[name], strategy="dfs", runs=2000, repro_dir=None)
    assert found.failed and found.strategy.preemptions == minimal
    if minimal:
        fewer = sim.explore(BUGS[name], strategy=PreemptionBoundedDFS(minimal - 1), runs=20_000, repro_dir=None)
        assert fewer.exhausted and not fewer.failed, "every schedule with fewer preemptions must hold"
    deadlock = found.failure.deadlock
    assert (deadlock is not None) == (name in DEADLOCKS)
    if deadlock is not None:
        assert deadlock.blocked and bool(deadlock.cycle) == DEADLOCKS[name]


def test_bench_classic_measures_every_bug_under_every_strategy():
    result = bench_classic(root_seeds=1, cap=40)
    assert [bug["bug"] for bug in result["bugs"]] == list(BUGS)
    for bug in result["bugs"]:
        assert set(bug["strategies"]) == {"random", "pct-d1", "pct", "pct-d10", "task-pct-d10", "dfs", "portfolio"}
        assert bug["failures_not_replayed"] == 0 and bug["deadlocks_without_report"] == 0
    assert result["targets"]["every_failure_replays_exactly"]


def test_bench_classic_prints_one_json_document_and_a_progress_line_per_bug(tmp_path):
    done = run_cli("bench", "classic", "--json", "--progress", "--seeds", "1", "--cap", "20", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["benchmark"] == "classic"
    total = len(BUGS)
    assert [line.split(":")[1].strip() for line in done.stderr.splitlines()] == [
        f"[{index:>2}/{total}] {name}" for index, name in enumerate(BUGS, 1)]


# ---- the same bugs in plain threading (bench classic --threads) ----------------------------------------

THREAD_DEADLOCKS = {"three_lock_deadlock": True, "lost_wakeup": False, "must_run_last": False}


@pytest.mark.parametrize("name", sorted(classic_threads.BUGS))
def test_each_thread_bug_is_found_by_the_portfolio_and_replays_byte_for_byte(name):
    program = classic_threads.program(classic_threads.BUGS[name])
    found = sim.explore(program, runs=2000, shrink=False)
    assert found.failed, f"{name}: not found in 2000 runs"
    assert sim.replay(found.failure.decisions, program, seed=found.failure.seed).digest() == found.failure.run.digest()
    deadlock = found.failure.deadlock
    assert (deadlock is not None) == (name in THREAD_DEADLOCKS)
    if deadlock is not None:
        assert deadlock.blocked and bool(deadlock.cycle) == THREAD_DEADLOCKS[name]


def test_each_thread_bug_passes_when_nothing_preempts_plain_lines():
    """Under `sync` preemption only blocking calls switch threads: the races between plain lines cannot show."""
    for name in ("lost_update", "check_then_act", "aba_free_list"):
        found = sim.explore(classic_threads.program(classic_threads.BUGS[name]), runs=50, preemption="sync", shrink=False)
        assert not found.failed, name


def test_bench_classic_threads_names_a_peer_it_cannot_run(monkeypatch):
    from sim.bench import peers

    monkeypatch.setattr(peers.shutil, "which", lambda name: None)
    result = bench_classic(root_seeds=1, cap=30, threads=True, peer_python=None)
    assert [bug["bug"] for bug in result["bugs"]] == list(classic_threads.BUGS)
    assert "frontrun is not installed" in result["peers"]["tools"]["frontrun"]
    assert "interleave-test needs Python >= 3.12" in result["peers"]["tools"]["interleave-test"]
    assert result["targets"]["every_failure_replays_exactly"]
