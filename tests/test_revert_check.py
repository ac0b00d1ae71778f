"""`python -m sim mutate --revert REV`: a fix's tests must fail with its production files reverted and pass
restored; bad input exits 2; the user's working tree, index and worktree list are never changed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import run_cli

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
CATCHING_TEST = "from calc import add\n\n\ndef test_two_plus_two():\n    assert add(2, 2) == 4\n"
BLIND_TEST = "from calc import add\n\n\ndef test_add_returns_an_int():\n    assert isinstance(add(2, 2), int)\n"
TEST_FILE = "tests/test_calc.py"
SUMMARY_CAUGHT = "1 failed with the fix reverted, 1 passed restored"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


def commit(repo: Path, message: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A", *files)
    git(repo, "commit", "-q", "-m", message)


def new_repo(tmp_path: Path, fix_test: str = CATCHING_TEST, extra_fix: dict[str, str] | None = None) -> Path:
    """A bug commit, then a fix commit that changes calc.py and adds its regression test; plus an untracked file."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for key, value in (("user.name", "Test"), ("user.email", "test@example.com"), ("commit.gpgsign", "false")):
        git(repo, "config", key, value)
    commit(repo, "calc with a bug", {"calc.py": BUGGY, "util.py": "WIDTH = 1\n"})
    commit(repo, "fix add", {"calc.py": FIXED, TEST_FILE: fix_test, **(extra_fix or {})})
    (repo / "notes.txt").write_text("untracked, must survive\n")
    return repo


def snapshot(repo: Path) -> tuple[str, ...]:
    """Everything a run must leave alone: status (untracked included), index, worktrees, HEAD, file contents."""
    files = sorted(p for p in repo.rglob("*") if p.is_file() and ".git" not in p.relative_to(repo).parts)
    contents = "".join(f"{p.relative_to(repo)}\n{p.read_text()}" for p in files)
    return (git(repo, "status", "--porcelain", "--untracked-files=all"), git(repo, "ls-files", "--stage"),
            git(repo, "worktree", "list", "--porcelain"), git(repo, "rev-parse", "HEAD"), contents)


def mutate(repo: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the command from outside the repository and check it changed nothing there or in its temp folder."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    before = snapshot(repo)
    done = run_cli("mutate", "--repo", str(repo), *args, cwd=tmp_path, env={"TMPDIR": str(scratch)})
    assert snapshot(repo) == before, done.stdout + done.stderr
    assert list(scratch.iterdir()) == [], "temporary worktrees were left behind"
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_a_fix_whose_test_catches_the_revert_exits_0(tmp_path):
    repo = new_repo(tmp_path)
    done = mutate(repo, tmp_path, "--revert", "HEAD", "--", TEST_FILE)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert SUMMARY_CAUGHT in lines
    assert any(TEST_FILE in line and "with the fix reverted" in line and "FAILED" in line for line in lines)
    assert any(TEST_FILE in line and "restored" in line and "passed" in line for line in lines)
    assert lines[-1].startswith("verdict: the tests catch the revert")


def test_json_prints_one_document(tmp_path):
    repo = new_repo(tmp_path)
    done = mutate(repo, tmp_path, "--revert", "HEAD", "--json", "--", TEST_FILE, "-q")
    document = json.loads(done.stdout)
    assert done.returncode == 0 and document["caught"] is True
    assert document["summary"] == SUMMARY_CAUGHT
    assert document["reverted_files"] == ["calc.py"] and document["pytest_args"] == ["-q"]
    assert [t["file"] for t in document["tests"]] == [TEST_FILE]
    assert document["tests"][0]["reverted"]["exit_code"] == 1 and document["tests"][0]["restored"]["exit_code"] == 0


def test_a_test_that_passes_either_way_exits_1_and_says_so(tmp_path):
    repo = new_repo(tmp_path, fix_test=BLIND_TEST)
    done = mutate(repo, tmp_path, "--revert", "HEAD", "--", TEST_FILE)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "0 failed with the fix reverted, 1 passed restored" in done.stdout.splitlines()
    assert f"{TEST_FILE} passed with the fix reverted: it does not catch the revert" in done.stdout


def test_a_dirty_tree_is_refused_naming_the_file(tmp_path):
    repo = new_repo(tmp_path)
    (repo / "calc.py").write_text(FIXED + "# local edit\n")
    done = mutate(repo, tmp_path, "--revert", "HEAD", "--", TEST_FILE)
    assert done.returncode == 2 and done.stdout == ""
    assert "uncommitted changes" in done.stderr and "calc.py" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_unknown_revision_is_refused_by_name(tmp_path):
    repo = new_repo(tmp_path)
    done = mutate(repo, tmp_path, "--revert", "no-such-rev", "--", TEST_FILE)
    assert done.returncode == 2 and "unknown revision 'no-such-rev'" in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--revert", "HEAD~1", "--", TEST_FILE], "root commit"),
    (["--revert", "HEAD"], "no test arguments"),
    (["--revert", "HEAD", "--", "tests/test_missing.py"], "tests/test_missing.py: not a committed file"),
    (["--", TEST_FILE], "test arguments need --revert REV"),
])
def test_other_bad_input_is_refused_in_one_line(tmp_path, args, message):
    repo = new_repo(tmp_path)
    done = mutate(repo, tmp_path, *args)
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_merge_commit_is_refused(tmp_path):
    repo = new_repo(tmp_path)
    git(repo, "checkout", "-q", "-b", "side", "HEAD~1")
    commit(repo, "side change", {"util.py": "WIDTH = 2\n"})
    git(repo, "checkout", "-q", "-")
    git(repo, "merge", "-q", "--no-edit", "side")
    done = mutate(repo, tmp_path, "--revert", "HEAD", "--", TEST_FILE)
    assert done.returncode == 2 and "merge commit" in done.stderr


def test_a_revert_that_does_not_apply_is_refused_naming_the_file(tmp_path):
    repo = new_repo(tmp_path)
    commit(repo, "rewrite the fixed line", {"calc.py": "def add(a, b):\n    return sum((a, b))\n"})
    done = mutate(repo, tmp_path, "--revert", "HEAD~1", "--", TEST_FILE)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "does not apply" in done.stderr and "calc.py" in done.stderr


def test_a_commit_without_non_test_files_is_refused(tmp_path):
    repo = new_repo(tmp_path)
    commit(repo, "more tests", {"tests/test_more.py": CATCHING_TEST, "tests/conftest.py": ""})
    done = mutate(repo, tmp_path, "--revert", "HEAD", "--", TEST_FILE)
    assert done.returncode == 2 and "no non-test files" in done.stderr


def test_paths_restricts_what_is_reverted(tmp_path):
    repo = new_repo(tmp_path, extra_fix={"util.py": "WIDTH = 80\n"})
    relevant = mutate(repo, tmp_path, "--revert", "HEAD", "--paths", "calc*", "--", TEST_FILE)
    assert relevant.returncode == 0, relevant.stdout + relevant.stderr
    assert "reverting 1 file(s): calc.py" in relevant.stdout and SUMMARY_CAUGHT in relevant.stdout
    irrelevant = mutate(repo, tmp_path, "--revert", "HEAD", "--paths", "util.py", "--", TEST_FILE)
    assert irrelevant.returncode == 1, irrelevant.stdout + irrelevant.stderr
    assert "reverting 1 file(s): util.py" in irrelevant.stdout
    assert f"{TEST_FILE} passed with the fix reverted: it does not catch the revert" in irrelevant.stdout
    nothing = mutate(repo, tmp_path, "--revert", "HEAD", "--paths", "tests/*", "--", TEST_FILE)
    assert nothing.returncode == 2 and "matches --paths" in nothing.stderr
