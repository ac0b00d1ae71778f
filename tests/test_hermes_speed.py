"""What makes a hermes run cheaper without changing it: TLS contexts made once per process, HERMES_HOME on a memory
filesystem and removed at exit, a campaign's runs inside one batch of its target.

None of these needs a release: each is checked on what it changes (a function of `ssl`, a folder, a batch).
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from support import ROOT

from sim import targets
from sim.registry import registry
from sim.swarm import campaign
from sim.swarm.loader import load_workloads
from targets.hermes import loader, tls


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
