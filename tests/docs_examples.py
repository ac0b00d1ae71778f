"""Reading and running the documentation's examples, for tests/test_docs.py and tests/test_docs_readme.py.

Shell examples run in order (later ones use what earlier ones wrote), each expected to exit 0 unless its
comment starts `exit N`. Three kinds of line are changed before they run, each for a stated reason:
installing the package (`python -m pip install ...`) is skipped, since the tests run in the environment it
would set up; a few commands that take minutes get options that narrow them (NARROWED: every documented
argument is kept, in order); and `compaction-sim` runs the entry point it is declared as when the console
script is not installed in this environment. A command shown twice runs once.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GUIDE = ROOT / "scenarios" / "README.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
EXPECTED_EXIT = re.compile(r"#\s*exit (\d+)")
R1 = "scenarios/ctrl_c_during_summary_blocks_next_turn.toml"
CONSOLE_SCRIPT = "compaction-sim"
ENTRY_POINT = 'compaction-sim = "sim.cli:entry"'
NARROWED = {
    "python -m sim mutate": f"python -m sim mutate --mutant hard-cancel-through-fence --scenarios {R1} --jobs 1",
    # One sampled mutant against one scenario may survive, so the score threshold is off: the run is what is checked.
    "python -m sim mutate --operators --seed 1 --budget 600":
        f"python -m sim mutate --operators --seed 1 --budget 600 --max 1 --scenarios {R1} --jobs 1 --min-score 0",
    "python -m sim check-determinism scenarios/ --seeds 20": "python -m sim check-determinism scenarios/ --seeds 20 --seeds 2",
    "python -m sim bench kernel --json": "python -m sim bench kernel --json --repeats 1",
    "python -m sim bench scenarios --json": "python -m sim bench scenarios --json --runs 2",
    "python -m sim bench detection --json": f"python -m sim bench detection {R1} --json --seeds 1 --max-runs 5 --runs 1 --jobs 1",
    "python -m sim bench classic --json": "python -m sim bench classic --json --seeds 1 --cap 20",
    "python -m sim bench mutate --json": f"python -m sim bench mutate {R1} --json --mutants hard-cancel-through-fence --jobs 1",
    "pytest scenarios/": "pytest scenarios/ -q --sim-runs 3 -k ctrl_c_during_summary",
    "scripts/run_tests.sh": "scripts/run_tests.sh tests/test_restart.py",
    "python -m sim stress --processes 4 --duration 600 --json": "python -m sim stress --processes 4 --duration 600 --json --processes 2 --duration 8",
}
COMMAND_TIMEOUT_S = 600


def blocks(path: Path, language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(path.read_text(encoding="utf-8")) if lang == language]


def shell_commands(path: Path) -> Iterator[tuple[str, int]]:
    """Each command of each `sh` block, with the exit status its comment expects; `a && b` is two commands."""
    for block in blocks(path, "sh"):
        for line in block.splitlines():
            command, _, comment = line.partition("  #")
            expected = EXPECTED_EXIT.match("#" + comment.strip()) if comment else None
            for part in command.split("&&"):
                if part.strip():
                    yield part.strip(), int(expected.group(1)) if expected else 0


def runnable(command: str) -> str | None:
    """The command as it runs here (see the module docstring), or None for an installation step."""
    if command.startswith("python -m pip install"):
        return None
    narrowed = NARROWED.get(command, command)
    assert is_subsequence(shlex.split(command), shlex.split(narrowed)), f"{narrowed!r} drops part of {command!r}"
    if narrowed.startswith(CONSOLE_SCRIPT) and shutil.which(CONSOLE_SCRIPT) is None:
        entry = "import sys; from sim.cli import entry; sys.exit(entry())"
        narrowed = f"{sys.executable} -c {shlex.quote(entry)}" + narrowed.removeprefix(CONSOLE_SCRIPT)
    return narrowed


def is_subsequence(short: list[str], long: list[str]) -> bool:
    rest = iter(long)
    return all(word in rest for word in short)


def run_shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(cwd), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=cwd, env=env, timeout=COMMAND_TIMEOUT_S)


def run_examples(path: Path, cwd: Path) -> list[str]:
    """Every shell example of `path`, in order, in `cwd`; what went wrong, one entry per failed command."""
    failures, ran = [], set()
    for command, expected in shell_commands(path):
        actual = runnable(command)
        if actual is None or actual in ran:
            continue
        ran.add(actual)
        done = run_shell(actual, cwd)
        if done.returncode != expected:
            failures.append(f"{path.relative_to(ROOT)}: `{command}` exited {done.returncode}, expected {expected}\n"
                            f"{done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    return failures


def copy_checkout(target: Path) -> Path:
    """A copy of the repository, so the examples' output (out/, chat.db) never lands in the real one."""
    shutil.copytree(ROOT, target, ignore=shutil.ignore_patterns(".git", "out", "build", "__pycache__", "*.egg-info", "*.db*", ".hypothesis"))
    return target
