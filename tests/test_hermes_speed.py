"""What makes a hermes run cheaper without changing it (TLS contexts made once per process, HERMES_HOME on a memory
filesystem and removed at exit, a campaign's runs inside one batch of its target), and `bench hermes`, which
measures it.

The first need no release: each is checked on what it changes (a function of `ssl`, a folder, a batch). The bench
runs a release when the store has it, and skips naming it otherwise.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import ROOT

from sim.scenario import targets
from sim.scenario.names import registry
from sim.swarm import campaign
from sim.swarm.workload_loader import load_workloads
from targets.hermes import loader, tls
from targets.hermes.store import ReleaseMissing, release


def installed(version: str) -> None:
    """Skip, naming the release and how to install it, when it is not in the store."""
    try:
        release(version).require()
    except ReleaseMissing as missing:
        pytest.skip(str(missing))


class Maker:
    """A stand-in for `ssl.create_default_context` that counts what it makes."""

    def __init__(self) -> None:
        self.made: list[tuple[object, ...]] = []

    def __call__(self, purpose: object = None, *, cafile: object = None, capath: object = None, cadata: object = None) -> object:
        self.made.append((purpose, cafile, capath, cadata))
        return object()


def test_a_shared_context_is_made_once_per_argument_set():
    maker = Maker()
    shared = tls._shared(maker)  # type: ignore[arg-type]  # a stand-in for ssl.create_default_context
    first = shared(cafile="/a.pem")
    assert shared(cafile="/a.pem") is first
    assert shared(cafile="/b.pem") is not first
    assert shared(ssl.Purpose.CLIENT_AUTH, cafile="/a.pem") is not first
    assert len(maker.made) == 3


def test_an_unhashable_argument_makes_a_fresh_context_each_time():
    maker = Maker()
    shared = tls._shared(maker)  # type: ignore[arg-type]  # as above
    assert shared(cadata=bytearray(b"x")) is not shared(cadata=bytearray(b"x"))
    assert len(maker.made) == 2


def test_sharing_replaces_the_function_in_every_module_holding_it_once():
    script = ("import ssl, sys, types\n"
              "from ssl import create_default_context as held\n"
              "holder = types.ModuleType('holder'); holder.create_default_context = held; sys.modules['holder'] = holder\n"
              "from targets.hermes import tls\n"
              "print(tls.share_contexts()); print(tls.share_contexts())\n"
              "print(ssl.create_default_context() is holder.create_default_context())\n")
    done = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0, done.stderr
    first, second, same = done.stdout.splitlines()
    assert "'holder.create_default_context'" in first and "'ssl.create_default_context'" in first
    assert second == "[]" and same == "True"


def test_a_home_goes_on_the_memory_filesystem_when_there_is_one(tmp_path, monkeypatch):
    memory = tmp_path / "shm"
    memory.mkdir()
    monkeypatch.setattr(loader, "MEMORY_FS", memory)
    assert loader.make_home("h-").parent == memory
    monkeypatch.setattr(loader, "MEMORY_FS", tmp_path / "none")
    assert loader.make_home("h-").parent == Path(tempfile.gettempdir())


def test_a_home_is_removed_when_its_process_exits():
    script = "from targets.hermes import loader\nhome = loader.make_home('h-')\n(home / 'state.db').write_text('x')\nprint(home)\n"
    done = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0, done.stderr
    home = Path(done.stdout.strip())
    assert home.name.startswith("h-") and not home.exists()


def test_a_campaigns_runs_share_one_batch_of_their_target(monkeypatch):
    depths: list[int] = []
    depth = [0]

    @contextmanager
    def batch(scenario: object):
        depths.append(depth[0])
        depth[0] += 1
        try:
            yield
        finally:
            depth[0] -= 1

    monkeypatch.setattr(targets, "batch", batch)
    workloads = load_workloads([ROOT / "scenarios" / "swarm" / "single_agent.toml"], registry(), None)
    campaign.run_indices(workloads, 1, range(3))
    assert depths == [0, 1, 1, 1]  # one batch opened by the campaign, each run's inside it


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "sim", "bench", "hermes", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)


def test_bench_hermes_of_anything_but_a_hermes_release_is_exit_2_naming_it():
    for target, said in (("reference", "measures a hermes release"), ("hermes==0.12.0", "--target hermes==0.12.0")):
        done = bench("--target", target)
        assert done.returncode == 2 and said in done.stderr, done.stderr


def test_bench_hermes_times_seed_000_simulated_and_with_real_threads_in_one_run():
    installed("0.19.0")
    done = bench("--runs", "2", "--repeats", "1", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    simulated, real = result["simulated"], result["real_threads"]
    assert simulated["failed_runs"] == 2 and real["lost_in_every_run"]  # both lose the user's messages
    assert real["median_wall_s"] >= 10.0  # the terminal's grace, waited for real
    assert simulated["median_virtual_s"] >= 300.0 and simulated["virtual_s_per_wall_s"] > 1.0
    assert result["wall_speedup"] == round(real["median_wall_s"] / simulated["median_wall_s"], 1)
    assert result["generated"]["runs"] == 2 and result["generated"]["median_cpu_s"] > 0
