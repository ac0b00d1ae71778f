"""The benchmark runs and reports its figures; speed targets are judged from its output, never here."""

from __future__ import annotations

import json
import subprocess
import sys

from sim.bench import yardstick
from sim.bench.kernel import bench_kernel


def test_bench_kernel_reports_all_three_runtimes_on_equal_work():
    report = bench_kernel(repeats=1, pairs=2, rounds=40)
    assert report["workload"]["sim_steps"] > 100
    assert abs(report["workload"]["raw_steps"] - report["workload"]["sim_steps"]) <= 1
    for key in ("sim_steps_per_s", "raw_steps_per_s", "trio_steps_per_s", "ratio_vs_raw", "speedup_vs_trio"):
        assert report[key] > 0, key


def test_timings_divided_by_one_another_take_turns_and_each_keeps_its_least(monkeypatch):
    """The machine's speed moves within seconds: a run and its raw-loop probe are timed side by side, round by
    round, so a ratio compares the same moments; each keeps its least time (load only ever adds time)."""
    clock = iter([0.0, 5.0, 5.0, 6.0,   # round 1: run 5 s, probe 1 s
                  6.0, 8.0, 8.0, 11.0,  # round 2: run 2 s, probe 3 s
                  11.0, 14.0, 14.0, 16.0])  # round 3: run 3 s, probe 2 s
    monkeypatch.setattr(yardstick.time, "process_time", lambda: next(clock))
    order: list[str] = []
    best = yardstick.interleaved_best([lambda: order.append("run"), lambda: order.append("probe")], repeats=3)
    assert order == ["run", "probe"] * 3
    assert best == [2.0, 1.0]


def test_bench_cli_prints_one_json_object():
    done = subprocess.run(
        [sys.executable, "-m", "sim", "bench", "kernel", "--json", "--repeats", "1"],
        capture_output=True, text=True, check=True,
    )
    report = json.loads(done.stdout)
    assert report["benchmark"] == "kernel"


def test_bench_kernel_text_is_readable_figures_not_python_reprs():
    done = subprocess.run([sys.executable, "-m", "sim", "bench", "kernel", "--repeats", "1"], capture_output=True, text=True, check=True)
    assert "{" not in done.stdout and "'" not in done.stdout
    lines = done.stdout.splitlines()
    assert "workload:" in lines and any(line.split()[:1] == ["sim_steps"] for line in lines)
