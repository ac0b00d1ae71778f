"""Every shell example in README.md runs, in a copy of the repository (see tests/docs_examples.py for what
is changed before a line runs, and why)."""

from __future__ import annotations

from docs_examples import CONSOLE_SCRIPT, ENTRY_POINT, README, ROOT, copy_checkout, run_examples, shell_commands


def test_the_readme_declares_the_console_script_the_examples_use():
    assert ENTRY_POINT in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert any(command.startswith(CONSOLE_SCRIPT) for command, _ in shell_commands(README))


def test_every_shell_example_in_the_readme_runs(tmp_path):
    assert list(shell_commands(README)), "the README has no shell examples"
    failures = run_examples(README, copy_checkout(tmp_path / "checkout"))
    assert not failures, "\n\n".join(failures)
