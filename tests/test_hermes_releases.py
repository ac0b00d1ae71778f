"""The released hermes-agent: locks, the shared store, the loader, the probe stubs, and seed 000 with real threads.

The store and loader are tested on fake releases built here as wheels (pip installs them offline from a
folder), so these tests need no network. The tests of a real release run it when it is in the store (`.ci/run`
installs it) and otherwise skip with the message that names it and the command that installs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from targets.hermes import locks, store
from targets.hermes.locks import LockError, Pin
from targets.hermes.store import ReleaseMissing, ReleaseUnavailable

ROOT = Path(__file__).resolve().parent.parent
RELEASES = ("0.16.0", "0.17.0", "0.18.2", "0.19.0")


def build_wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A minimal pure-Python wheel: `files` plus the dist-info pip needs."""
    dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
    files = {**files,
             f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},,\n" for path in files) + f"{dist_info}/RECORD,,\n"
    wheel = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in {**files, f"{dist_info}/RECORD": record}.items():
            archive.writestr(path, text)
    return wheel


FAKE_RELEASE = {
    "hermes_state.py": "import os\nHOME = os.environ['HERMES_HOME']\n",
    "run_agent.py": "import fakedep\n",
    "agent/__init__.py": "",
    "agent/context_compressor.py": "",
}


@pytest.fixture
def fake_world(tmp_path, monkeypatch):
    """Two fake releases (9.9.8, 9.9.9) that share one dependency version, pip offline on a wheel folder."""
    wheels, lock_dir = tmp_path / "wheels", tmp_path / "locks"
    wheels.mkdir(), lock_dir.mkdir()
    for version in ("9.9.8", "9.9.9"):
        build_wheel(wheels, "hermes-agent", version, FAKE_RELEASE)
        (lock_dir / f"hermes-agent-{version}.txt").write_text(f"# fake\nhermes-agent=={version}\nfakedep==1.0\n")
    build_wheel(wheels, "fakedep", "1.0", {"fakedep.py": "VALUE = 1\n"})
    monkeypatch.setattr(locks, "LOCKS_DIR", lock_dir)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv(store.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path


def load_in_child(fake_world: Path, *versions: str) -> subprocess.CompletedProcess:
    """Load each version in turn in one fresh interpreter, printing what it imported."""
    script = ("import sys, pathlib\nfrom targets.hermes import locks, loader\n"
              f"locks.LOCKS_DIR = pathlib.Path({str(fake_world / 'locks')!r})\n"
              "for v in sys.argv[1:]:\n"
              "    got = loader.load(v, pathlib.Path(sys.argv[0]).parent / 'home')\n"
              "    import fakedep, hermes_state\n"
              "    print(got.version, fakedep.__file__, hermes_state.HOME)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-P", "-c", script, *versions], capture_output=True, text=True,
                          env=env, cwd=fake_world, timeout=60)


def test_the_locks_are_the_four_releases_the_harness_runs_each_pinning_itself_first():
    assert locks.locked_versions() == RELEASES
    for version in RELEASES:
        pins = locks.read_lock(version)
        assert pins[0] == Pin("hermes-agent", version) and len(pins) > 50


def test_a_lock_line_that_is_not_a_pin_is_named_by_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setattr(locks, "LOCKS_DIR", tmp_path)
    (tmp_path / "hermes-agent-1.0.0.txt").write_text("hermes-agent==1.0.0\nopenai>=2\n")
    with pytest.raises(LockError, match=r"hermes-agent-1\.0\.0\.txt:2: expected `name==version`, got 'openai>=2'"):
        locks.read_lock("1.0.0")


def test_a_release_without_a_lock_is_refused_naming_the_locked_ones():
    with pytest.raises(LockError, match=r"no lock for hermes-agent==0\.13\.0 \(locked releases: 0\.16\.0, 0\.17\.0"):
        locks.read_lock("0.13.0")


def test_a_release_not_in_the_store_names_itself_and_the_command_that_installs_it(tmp_path):
    with pytest.raises(ReleaseMissing, match=r"hermes-agent==0\.19\.0 is not installed in .*"
                                             r"install it with `python -m targets\.hermes install 0\.19\.0`"):
        store.release("0.19.0", store=tmp_path).require()


def test_an_install_pip_cannot_do_names_the_release_and_says_why(fake_world, monkeypatch):
    monkeypatch.setenv("PIP_FIND_LINKS", str(fake_world / "empty"))  # no wheel anywhere, no index: as offline
    with pytest.raises(ReleaseUnavailable, match=r"hermes-agent==9\.9\.9 is not installed .* could not be installed "
                                                 r"\(2 distributions missing\): .*hermes-agent==9\.9\.9"):
        store.install("9.9.9")
    assert not (fake_world / "cache" / "hermes" / "dists").exists()  # nothing half-written


def test_releases_share_the_dependency_versions_their_locks_both_pin(fake_world):
    first = store.install("9.9.9")
    second = store.install("9.9.8")
    assert [pin.key for pin in first.installed] == ["hermes-agent-9.9.9", "fakedep-1.0"]
    assert [pin.key for pin in second.installed] == ["hermes-agent-9.9.8"]  # fakedep-1.0 is shared
    dists = fake_world / "cache" / "hermes" / "dists"
    assert (dists / "fakedep-1.0" / "fakedep.py").is_file()
    assert (dists / "hermes-agent-9.9.9" / "agent" / "context_compressor.py").is_file()
    assert not (dists / "hermes-agent-9.9.9" / "fakedep.py").exists()
    assert store.install("9.9.9").installed == ()


def test_the_loader_imports_the_release_asked_for_from_its_own_folders(fake_world):
    store.install("9.9.9")
    done = load_in_child(fake_world, "9.9.9")
    assert done.returncode == 0, done.stderr
    version, fakedep, home = done.stdout.split()
    assert version == "9.9.9" and "/dists/fakedep-1.0/" in fakedep and home.endswith("home")


def test_a_second_release_in_the_same_process_is_refused(fake_world):
    store.install("9.9.9"), store.install("9.9.8")
    done = load_in_child(fake_world, "9.9.9", "9.9.8")
    assert done.returncode != 0
    assert "cannot load hermes-agent==9.9.8: this process already imported 'agent'" in done.stderr


# ---- a real release, when the store has it --------------------------------------------------------------------


def installed(version: str) -> None:
    """Skip, naming the release and how to install it, when it is not in the store."""
    try:
        store.release(version).require()
    except ReleaseMissing as missing:
        pytest.skip(str(missing))


def run_module(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-P", "-m", "targets.hermes", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_release_0_19_0_compacts_offline_with_its_probes_stubbed():
    installed("0.19.0")
    done = run_module("check", "0.19.0")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["version"] == "0.19.0" and report["escaped"] == []
    assert "agent.model_metadata.get_model_context_length" in report["stubbed"]
    assert report["messages_after"] < report["messages_before"]


def test_seed_000_with_real_threads_leaves_the_next_turn_and_the_second_process_in_the_ended_parent():
    installed("0.19.0")
    done = run_module("baseline", "0.19.0", "--mode", "rotation", "--grace", "0.4", "--runs", "2", "--json")
    assert done.returncode == 0, done.stderr
    for outcome in json.loads(done.stdout):  # the second run starts from an empty store, as the first
        assert outcome["abandoned"] is True  # the summary ignored Ctrl+C past the grace
        assert outcome["where"] == {"first turn": "live", "next turn": "ended-session-only",
                                    "second process": "ended-session-only"}
        assert outcome["next_turn"]["interrupted"] is True and outcome["first_turn"]["final_response"] == "the answer"


def test_the_seams_table_in_SEAMS_md_is_what_the_installed_releases_say():
    for version in RELEASES:
        installed(version)
    from targets.hermes.seams import table

    document = (ROOT / "targets" / "hermes" / "SEAMS.md").read_text()
    recorded = document.split("<!-- seams:begin -->\n", 1)[1].split("<!-- seams:end -->", 1)[0]
    assert recorded == table({v: store.release(v).paths[0] for v in RELEASES})
