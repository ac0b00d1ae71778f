"""The benchmark runs and reports its figures; speed targets are judged from its output, never here."""

from __future__ import annotations

import json
import subprocess
import sys

from sim.bench.kernel import bench_kernel


def test_bench_kernel_reports_all_three_runtimes_on_equal_work():
    report = bench_kernel(repeats=1, pairs=2, rounds=40)
    assert report["workload"]["sim_steps"] > 100
    assert abs(report["workload"]["raw_steps"] - report["workload"]["sim_steps"]) <= 1
    for key in ("sim_steps_per_s", "raw_steps_per_s", "trio_steps_per_s", "ratio_vs_raw", "speedup_vs_trio"):
        assert report[key] > 0, key


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
