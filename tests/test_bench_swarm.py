"""`bench swarm` measures detection by the swarm alone: skipped runs are not searched, a caught mutant's find
shrinks and replays to one digest. Its targets are judged from its output, never here."""

from __future__ import annotations

import json
from pathlib import Path

from support import run_cli

from sim.bench.swarm import SHRINK_TARGET, bench_swarm, first_detection
from sim.cli.swarm import default_workloads
from sim.scenario.names import registry
from sim.swarm.workload_loader import load_workloads


def _workloads():
    return load_workloads([Path(default_workloads())], registry())


def test_a_detection_search_runs_only_the_runs_it_may_count():
    workloads = _workloads()
    nothing = first_detection(workloads, 0, 6, frozenset(range(6)))
    assert (nothing["found"], nothing["runs"]) == (None, 0)
    found = first_detection(workloads, 0, 40, frozenset({0, 1}))
    assert found["runs"] <= 38
    if found["found"] is not None:
        assert found["found"][0] >= 2 and found["runs"] == found["found"][0] - 1


def test_a_caught_mutant_is_measured_per_root_and_its_find_shrinks_to_one_digest(tmp_path):
    result = bench_swarm(_workloads(), ["stamp-compacted-markers"], roots=1, max_runs=200, speed_runs=3, jobs=1,
                         out_dir=tmp_path)
    entry = result["per_mutant"]["stamp-compacted-markers"]
    assert entry["caught_from_every_root"], entry
    assert len(entry["runs"]) == 1 and 1 <= entry["runs"][0] <= 200
    shrunk = entry["shrink"]
    assert shrunk["same_digest"] and shrunk["share"] <= SHRINK_TARGET, shrunk
    assert shrunk["replay"].endswith("--mutant stamp-compacted-markers")  # the shrunk repro records its mutant
    assert result["speed"]["runs"] == 3 and result["speed"]["median_run_cost_raw_steps"] > 0


def test_speed_only_states_the_cost_of_a_run_and_nothing_else(tmp_path):
    done = run_cli("bench", "swarm", "--speed-only", "--runs", "2", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == {"benchmark", "speed"}
    speed = result["speed"]
    assert speed["runs"] == 2 and speed["median_run_cost_raw_steps"] > 0
    low, high = speed["raw_steps_per_s_range"]  # the probes beside the runs: how far the machine moved
    assert 0 < low <= speed["raw_steps_per_s"] <= high
