"""The wheel holds what the commands need outside a checkout: the scenario catalogue and its workloads, the
curated mutants, the reference's tables that `list` reads, and the `compaction-sim` console script."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from support import checkout_env

from sim.scenario.catalogue import MUTANTS_DIR, SCENARIOS_DIR

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_ships_the_catalogue_the_mutants_and_the_console_script(tmp_path):
    source = tmp_path / "source"  # built from a copy, so the build leaves nothing in the checkout
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "out", "build", "__pycache__", "*.egg-info", "*.db*", ".hypothesis"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"scenarios/{path.relative_to(SCENARIOS_DIR).as_posix()}" for path in SCENARIOS_DIR.rglob("*.toml")} <= names
    assert {f"mutants/{path.name}" for path in MUTANTS_DIR.glob("*.toml")} <= names
    assert {"reference/EVENTS.md", "reference/POINTS.md", "reference/CONFIG.md"} <= names
    (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    assert "compaction-sim = sim.cli:entry" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_console_script_says_its_own_name_and_its_version(tmp_path):
    """`compaction-sim` is the same entry as `python -m sim`, run from a script of that name (as pip writes one)."""
    from importlib.metadata import version

    script = tmp_path / "compaction-sim"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom sim.cli import entry\nsys.exit(entry())\n")
    script.chmod(0o755)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(script), *args], capture_output=True, text=True, cwd=tmp_path, env=checkout_env())

    assert run("--version").stdout == f"compaction-sim {version('compaction-sim')}\n"
    missing = run("run", "missing.toml")
    assert missing.returncode == 2 and missing.stderr.startswith("compaction-sim run: missing.toml: no such scenario file")
    wrong = run("lst")
    assert wrong.returncode == 2 and wrong.stderr.startswith("usage: compaction-sim ") and "compaction-sim: error:" in wrong.stderr
    assert run("--help").stdout.startswith("usage: compaction-sim [-h] [--version]")
