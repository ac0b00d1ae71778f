"""The documentation is executed, so it cannot rot: every shell and TOML example in README.md and
scenarios/README.md runs here, the example scenario passes on the reference and fails under the mutant it
names, the error lines the guide shows are the ones the loader prints, and the key reference's examples are
real names.

Shell examples run in a copy of the repository, in order (later ones use what earlier ones wrote), each
expected to exit 0 unless its comment starts `exit N`. Three kinds of line are changed before they run, each
for a stated reason: installing the package (`python -m pip install ...`) is skipped, since the test runs in
the environment it would set up; a few commands that take minutes get options that narrow them (NARROWED:
every documented argument is kept, in order); and `compaction-sim` runs the entry point it is declared as
when the console script is not installed in this environment. A command shown twice runs once.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, Iterator

import pytest

from sim.registry import registry
from sim.scenario.loader import SCENARIO, load_scenario
from sim.scenario.errors import ScenarioError
from sim.scenario.schema import Registered

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GUIDE = ROOT / "scenarios" / "README.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
EXPECTED_EXIT = re.compile(r"#\s*exit (\d+)")
R1 = "scenarios/ctrl_c_during_summary_blocks_next_turn.toml"
CONSOLE_SCRIPT = "compaction-sim"
ENTRY_POINT = 'compaction-sim = "sim.cli:entry"'
NARROWED = {
    "python -m sim mutate": "python -m sim mutate --mutant hard-cancel-through-fence --jobs 1",
    "python -m sim mutate --operators --seed 1 --budget 600": "python -m sim mutate --operators --seed 1 --budget 600 --max 1 --jobs 1",
    "python -m sim check-determinism scenarios/ --seeds 20": "python -m sim check-determinism scenarios/ --seeds 20 --seeds 2",
    "python -m sim bench kernel --json": "python -m sim bench kernel --json --repeats 1",
    "python -m sim bench scenarios --json": "python -m sim bench scenarios --json --runs 2",
    "pytest scenarios/": "pytest scenarios/ -q --sim-runs 3",
    "python -m sim bench detection --json": f"python -m sim bench detection {R1} --json --seeds 1 --max-runs 5 --runs 1 --jobs 1",
    "scripts/run_tests.sh": "scripts/run_tests.sh tests/test_restart.py",
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


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the repository, so the examples' output (out/, chat.db) never lands in the real one."""
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", "out", "build", "__pycache__", "*.egg-info", "*.db*", ".hypothesis"))
    return copy


def test_the_readme_declares_the_console_script_the_examples_use():
    assert ENTRY_POINT in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert any(command.startswith(CONSOLE_SCRIPT) for command, _ in shell_commands(README))


def test_every_shell_example_in_the_readme_runs(checkout):
    assert list(shell_commands(README)), "the README has no shell examples"
    failures = run_examples(README, checkout)
    assert not failures, "\n\n".join(failures)


def test_the_guide_example_passes_on_the_reference_and_fails_under_the_mutant_it_names(tmp_path):
    (example,) = blocks(GUIDE, "toml")
    name = tomllib.loads(example)["name"]
    (tmp_path / f"{name}.toml").write_text(example, encoding="utf-8")
    scenario = load_scenario(tmp_path / f"{name}.toml", registry())
    assert scenario.expect.must_fail_under and scenario.faults and scenario.expect.coverage
    commands = [command for command, _ in shell_commands(GUIDE)]
    assert f"python -m sim run {name}.toml --must-fail-under" in commands, "the guide shows how its claim is checked"
    failures = run_examples(GUIDE, tmp_path)
    assert not failures, "\n\n".join(failures)


# The inputs behind the guide's error lines: file name, then the file's text.
MISTAKE_INPUTS = {
    'fault[1].duration: expected a duration': ("x.toml", '[[drive]]\nat = "0s"\nturn = "t"\n[[fault]]\nkind = "stall"\n'
                                               'point = "provider.summary"\nnth = 1\nduration = "1s"\n[[fault]]\nkind = "stall"\n'
                                               'point = "provider.summary"\nnth = 1\nduration = "ten minutes"\n'),
    "drive[0].after_event: expected only one": ("x.toml", '[[drive]]\nat = "0s"\nafter_event = "turn.persisted"\nturn = "t"\n'),
    "drive[0].after_event: expected an event kind": ("x.toml", '[[drive]]\nafter_event = "compaction.sumary_started"\nturn = "t"\n'),
    "drive: expected at least one": ("x.toml", ""),
    "expected valid TOML": ("y.toml", 'name = "y"\n\nrun = ?\n'),
}


def test_the_guide_shows_the_errors_the_loader_prints(tmp_path):
    (mistakes,) = [block for block in blocks(GUIDE, "text") if "scenarios/x.toml" in block]
    lines = mistakes.splitlines()
    assert len(lines) == len(MISTAKE_INPUTS)
    for line in lines:
        (file, text), = [inputs for marker, inputs in MISTAKE_INPUTS.items() if marker in line]
        path = tmp_path / file
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ScenarioError) as caught:
            load_scenario(path, registry())
        assert str(caught.value).replace(str(path), f"scenarios/{file}") == line


def registered_examples(spec: Any, example: str | None = None, seen: set[int] | None = None) -> Iterator[tuple[Registered, str]]:
    """Every Registered spec reachable in the schema, with the example shown for it (its own, or that of the
    list that holds it), however the schema nests them."""
    seen = set() if seen is None else seen
    if id(spec) in seen:
        return
    seen.add(id(spec))
    example = getattr(spec, "example", None) or example
    if isinstance(spec, Registered) and example:
        yield spec, example
    for child in list(getattr(spec, "fields", {}).values()) + list(getattr(spec, "include", ())):
        yield from registered_examples(child, None, seen)
    for name in ("item", "tag_spec"):
        if getattr(spec, name, None) is not None:
            yield from registered_examples(getattr(spec, name), example if name == "item" else None, seen)
    for alternative in getattr(spec, "alternatives", ()):
        yield from registered_examples(alternative, example, seen)


def test_every_example_in_the_key_reference_is_a_real_name():
    checked = 0
    for spec, example in registered_examples(SCENARIO):
        value = tomllib.loads(f"v = {example}")["v"]
        names = getattr(registry(), spec.source)
        for name in value if isinstance(value, list) else [value]:
            assert name in names or (spec.glob and name.endswith("*")), f"{spec.source}: {name!r} is not a real name"
            checked += 1
    assert checked >= 7, "the walk found the schema's registered names (event, point, kind, invariants, mutants, marks, strategy)"
