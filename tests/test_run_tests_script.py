"""Tests for scripts/run_tests.sh, the per-file isolated parallel runner.

Each test writes a throwaway tree of small test files under tmp_path and runs
the real script on it in a subprocess, because what matters is the observable
contract CI relies on: the final summary line, the exit status, the rerun
commands, timeouts, slicing, pass-through flags and the hermetic environment.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "run_tests.sh"
PROGRESS_RE = re.compile(r"^\[\s*\d+/\d+\] (PASS|FAIL|TIMEOUT)\s+(\S+)\s", re.MULTILINE)

PASSING = """
import pytest

def test_one():
    pass

def test_two():
    pass

@pytest.mark.skip(reason="demonstrates a skip")
def test_skipped():
    pass
"""
FAILING = """
def test_fine():
    pass

def test_broken():
    assert 1 == 2
"""
EMPTY = "VALUE = 1  # a module with no tests\n"
# The only place a sleep is acceptable: a generated file that must hang so
# the runner's --timeout has something to kill.
HANGING = """
import time

def test_hangs():
    time.sleep(60)
"""
CRASHING = "import os\nos._exit(3)  # dies during collection, no pytest summary\n"


def write_tree(base: Path, files: dict[str, str]) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (base / name).write_text(text)
    return base.resolve()


def run(*args: str, cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(extra_env or {})}
    return subprocess.run(
        [str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def last_line(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout.splitlines()[-1]


def reported_files(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """file -> status, from the live progress lines."""
    return {name: status for status, name in PROGRESS_RE.findall(proc.stdout)}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One run over passing, failing, skipping, empty and crashing files.

    The run is started from inside the tree with a relative path ("."), so it
    also covers resolving paths against the caller's directory.
    """
    tree = write_tree(
        tmp_path_factory.mktemp("mixed"),
        {
            "test_pass.py": PASSING,
            "test_fail.py": FAILING,
            "test_empty.py": EMPTY,
            "test_crash.py": CRASHING,
        },
    )
    return tree, run(".", cwd=tree)


def test_mixed_run_summary_and_exit_code(mixed: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    tree, proc = mixed
    assert proc.returncode == 1, proc.stdout
    # 2 + 1 passed; failures: 1 assertion, 1 crash (no pytest summary); 1 skipped.
    assert last_line(proc) == "3 passed, 2 failed, 1 skipped"
    assert reported_files(proc) == {
        str(tree / "test_pass.py"): "PASS",
        str(tree / "test_fail.py"): "FAIL",
        str(tree / "test_empty.py"): "PASS",
        str(tree / "test_crash.py"): "FAIL",
    }


def test_failures_show_output_tail_and_rerun_command(mixed: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    tree, proc = mixed
    assert "assert 1 == 2" in proc.stdout
    for name in ("test_fail.py", "test_crash.py"):
        assert f"TZ=UTC PYTHONHASHSEED=0 python -m pytest {tree / name}" in proc.stdout
    failed_block = proc.stdout.split("failed files (2):")[1]
    assert "test_fail.py" in failed_block
    assert "test_pass.py" not in failed_block


def test_hanging_file_is_killed_and_reported_as_timeout(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "t", {"test_hang.py": HANGING})
    proc = run("--timeout", "3", str(tree), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert re.search(r"^\[1/1\] TIMEOUT\s+\S*test_hang\.py", proc.stdout, re.MULTILINE)
    block = proc.stdout.split("---- TIMEOUT")[1]
    assert "test session starts" in block  # output captured before the kill
    assert f"TZ=UTC PYTHONHASHSEED=0 python -m pytest {tree / 'test_hang.py'}" in block
    assert last_line(proc) == "0 passed, 1 failed"


def test_an_interrupted_run_says_what_passed_so_far(tmp_path: Path) -> None:
    """Ctrl+C once the passing file is reported, while the hanging one still runs: its result is kept."""
    tree = write_tree(tmp_path / "t", {"test_pass.py": PASSING, "test_hang.py": HANGING})
    runner = subprocess.Popen([str(SCRIPT), "-j", "2", str(tree)], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert runner.stdout is not None
    seen = []
    for line in runner.stdout:
        seen.append(line)
        if "test_pass.py" in line:
            break
    runner.send_signal(signal.SIGINT)
    rest, errors = runner.communicate(timeout=60)
    output = "".join(seen) + rest
    assert runner.returncode == 130, output + errors
    assert f"interrupted: 1 of 2 file(s) finished; not finished: {tree / 'test_hang.py'}" in output
    assert output.splitlines()[-1] == "2 passed, 0 failed, 1 skipped (so far)"


def test_all_passing_exits_zero(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "t", {"test_a.py": PASSING, "test_b.py": "def test_x():\n    pass\n"})
    proc = run(str(tree), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert last_line(proc) == "3 passed, 0 failed, 1 skipped"


def test_nothing_collected_anywhere_is_a_failure(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "t", {"test_empty.py": EMPTY})
    proc = run(str(tree), cwd=tmp_path)
    assert proc.returncode == 1
    assert "no tests ran" in proc.stdout
    assert last_line(proc) == "0 passed, 0 failed"


@pytest.mark.parametrize(
    "args",
    [["-j", "0"], ["--slice", "3/2"], ["--slice", "0/2"], ["--slice", "half"], ["--timeout", "0"]],
)
def test_usage_errors_exit_two(tmp_path: Path, args: list[str]) -> None:
    proc = run(*args, str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip()
    assert proc.stdout == ""


def test_nonexistent_path_is_named(tmp_path: Path) -> None:
    proc = run("no/such/dir", cwd=tmp_path)
    assert proc.returncode == 2
    assert "no/such/dir" in proc.stderr


def test_slices_partition_the_files(tmp_path: Path) -> None:
    names = [f"test_{letter}.py" for letter in "abcde"]
    tree = write_tree(tmp_path / "t", {n: f"def test_{n[5]}():\n    pass\n" for n in names})
    first = run("--slice", "1/2", str(tree), cwd=tmp_path)
    second = run("--slice", "2/2", str(tree), cwd=tmp_path)
    assert (first.returncode, second.returncode) == (0, 0)
    a, b = set(reported_files(first)), set(reported_files(second))
    assert a.isdisjoint(b)
    assert a | b == {str(tree / n) for n in names}
    # Documented as round-robin over the sorted list.
    assert a == {str(tree / n) for n in names[0::2]}
    assert (last_line(first), last_line(second)) == ("3 passed, 0 failed", "2 passed, 0 failed")


def test_arguments_after_double_dash_reach_pytest(tmp_path: Path) -> None:
    tree = write_tree(
        tmp_path / "t",
        {"test_k.py": "def test_only_this():\n    pass\n\ndef test_other():\n    assert False\n"},
    )
    proc = run(str(tree), "--", "-k", "only_this", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert last_line(proc) == "1 passed, 0 failed"
    assert "1 deselected" in proc.stdout


def test_children_get_a_hermetic_environment(tmp_path: Path) -> None:
    tree = write_tree(
        tmp_path / "t",
        {
            "test_env.py": """
import os

def test_environment(tmp_path):
    assert os.environ["PYTHONHASHSEED"] == "0"
    assert os.environ["TZ"] == "UTC"
    assert os.environ["LC_ALL"] == "C.UTF-8"
    assert "SECRET_X" not in os.environ
    assert "PYTEST_ADDOPTS" not in os.environ
    assert str(tmp_path).startswith(os.environ["PYTEST_DEBUG_TEMPROOT"])
"""
        },
    )
    hostile = {"SECRET_X": "1", "TZ": "Asia/Tokyo", "PYTHONHASHSEED": "123", "PYTEST_ADDOPTS": "-x"}
    proc = run(str(tree), cwd=tmp_path, extra_env=hostile)
    assert proc.returncode == 0, proc.stdout
    assert last_line(proc) == "1 passed, 0 failed"


def test_children_share_one_bytecode_cache_outside_the_tree(tmp_path: Path) -> None:
    """A helper module imported by two files is compiled into the run's own cache,
    even when the caller turned bytecode off, and no __pycache__ appears in the tree."""
    probe = """
import os, sys
import helper

def test_cache(tmp_path):
    prefix = os.environ["PYTHONPYCACHEPREFIX"]
    assert sys.pycache_prefix == prefix and not sys.dont_write_bytecode
    assert not prefix.startswith(os.path.dirname(helper.__file__))
"""
    tree = write_tree(tmp_path / "t", {"helper.py": "X = 1\n", "test_a.py": probe, "test_b.py": probe})
    proc = run(str(tree), "--", "-p", "no:cacheprovider", cwd=tmp_path,
               extra_env={"PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stdout
    assert last_line(proc) == "2 passed, 0 failed"
    assert not list(tree.rglob("__pycache__")), "bytecode was written into the tree"


def test_folder_of_toml_files_is_run_file_by_file(tmp_path: Path) -> None:
    scenarios = write_tree(tmp_path / "scenarios", {"b.toml": "", "a.toml": "", "notes.txt": ""})
    proc = run("--list", str(scenarios), cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [str(scenarios / "a.toml"), str(scenarios / "b.toml")]
