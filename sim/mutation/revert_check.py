"""Check a fix commit the way reviewers do: revert its production files and expect its tests to fail, then
expect them to pass on the restored tree.

A regression test for a race is only trusted once someone has seen it fail without the fix; a test that
passes either way proves nothing. Everything happens in throwaway `git worktree`s at HEAD, so the user's
working tree, index and untracked files are never touched, and the check works on any git repository.

    python -m sim mutate --revert REV [--paths GLOB ...] [--repo DIR] [--json] -- TEST_ARGS...

Exit 0: every test file failed with the fix reverted and passed restored. Exit 1: at least one did not.
Exit 2: bad input (not a repository, dirty tree, unknown or merge/root revision, nothing to revert, a revert
that does not apply, no test files).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

EXIT_OK = 0
EXIT_NOT_CAUGHT = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
PROG = "python -m sim mutate"

TEST_FOLDERS = frozenset({"tests", "test"})
PYTEST_NO_TESTS = 5
PYTEST_MEANINGS = {0: "passed", 1: "tests failed", 2: "interrupted or collection error", 3: "pytest internal error",
                   4: "pytest usage error", 5: "no tests collected"}
# pytest options whose value is a separate argument: that value is never taken for a test file or folder.
PYTEST_VALUE_OPTIONS = frozenset({
    "-k", "-m", "-p", "-c", "-o", "-W", "-r", "-n", "--deselect", "--ignore", "--ignore-glob", "--rootdir",
    "--confcutdir", "--basetemp", "--junitxml", "--junit-xml", "--tb", "--maxfail", "--durations",
    "--durations-min", "--import-mode", "--log-level", "--log-file", "--log-cli-level", "--color", "--capture",
    "--override-ini", "--config-file", "--pythonwarnings", "--dist", "--timeout", "--cov", "--cov-report",
})
# Inherited git variables would point our git calls (and the tests' own) at some other repository or index.
GIT_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_COMMON_DIR")
OUTPUT_TAIL_LINES = 20


class CheckError(Exception):
    """Bad input or an unusable repository: one line on stderr, exit 2, nothing left behind."""


# ---- running git ---------------------------------------------------------------------------------


def _clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment minus git's redirection variables, so every command sees only the repository we chose."""
    env = {k: v for k, v in os.environ.items() if k not in GIT_VARIABLES}
    env.update(extra or {})
    return env


def _git(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run git in `cwd` with the C locale (its messages are parsed) and literal pathspecs (file names are data)."""
    try:
        return subprocess.run(["git", "--literal-pathspecs", *args], cwd=cwd, input=stdin, capture_output=True,
                              text=True, env=_clean_env({"LC_ALL": "C", "LANGUAGE": "C"}))
    except FileNotFoundError:
        raise CheckError("git is not installed or not on PATH") from None


def _git_ok(cwd: Path, *args: str) -> str:
    """Run git and return its stdout; a failure here means the repository is unusable."""
    done = _git(cwd, *args)
    if done.returncode != 0:
        raise CheckError(f"git {' '.join(args)} failed: {_first_line(done.stderr)}")
    return done.stdout


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "(no message)")


def _nul_split(text: str) -> list[str]:
    return [item for item in text.split("\0") if item]


# ---- the repository and the revision -------------------------------------------------------------


def find_repo(repo: str | None) -> Path:
    """The toplevel of `repo` (default: the current directory's repository)."""
    start = Path(repo) if repo else Path.cwd()
    if not start.is_dir():
        raise CheckError(f"{start}: no such directory")
    done = _git(start, "rev-parse", "--show-toplevel")
    if done.returncode != 0 or not done.stdout.strip():
        raise CheckError(f"{start.resolve()}: not a git repository (or one without a working tree)")
    return Path(done.stdout.strip())


def dirty_files(repo: Path) -> list[str]:
    """Tracked files with staged or unstaged changes: the user probably means to check those, and we would not."""
    entries = _nul_split(_git_ok(repo, "status", "--porcelain=v1", "-z", "--untracked-files=no"))
    files, skip_next = [], False
    for entry in entries:
        if skip_next:  # the second path of a rename or copy entry
            skip_next = False
            continue
        files.append(entry[3:])
        skip_next = entry[:1] in ("R", "C")
    return files


def resolve_commit(repo: Path, rev: str) -> str:
    """The full id of `rev`, or a clear error naming it."""
    done = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if done.returncode != 0 or not done.stdout.strip():
        raise CheckError(f"unknown revision {rev!r} in {repo}")
    return done.stdout.strip()


def head_commit(repo: Path) -> str:
    done = _git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if done.returncode != 0:
        raise CheckError(f"{repo}: HEAD has no commit yet")
    return done.stdout.strip()


def check_single_parent(repo: Path, rev: str, sha: str) -> None:
    """A fix must have exactly one parent: a root commit has nothing to revert to, a merge no single diff."""
    parents = _git_ok(repo, "rev-list", "--parents", "-n", "1", sha).split()[1:]
    if not parents:
        raise CheckError(f"{rev} ({sha[:12]}) is a root commit: there is no earlier state to revert to")
    if len(parents) > 1:
        raise CheckError(f"{rev} ({sha[:12]}) is a merge commit: revert the fix commit itself, not the merge")


def subject(repo: Path, sha: str) -> str:
    return _git_ok(repo, "log", "-1", "--format=%s", sha).strip()


# ---- which files to revert -----------------------------------------------------------------------


def changed_files(repo: Path, sha: str) -> list[str]:
    """Files REV changed; renames count as a deletion plus an addition so both sides get reverted."""
    return _nul_split(_git_ok(repo, "diff", "--name-only", "--no-renames", "-z", "--no-relative", f"{sha}^", sha))


def looks_like_test(path: str) -> bool:
    """Tests are never reverted: the point is to run the fix's new tests against the old code."""
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if any(part in TEST_FOLDERS for part in parts[:-1]):
        return True
    return name == "conftest.py" or (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py")


def select_files(changed: Sequence[str], globs: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """The non-test files to revert (narrowed by --paths globs, matched with fnmatch), and the globs that matched none."""
    candidates = [path for path in changed if not looks_like_test(path)]
    if not globs:
        return candidates, []
    chosen = [path for path in candidates if any(fnmatch.fnmatchcase(path, glob) for glob in globs)]
    unmatched = [glob for glob in globs if not any(fnmatch.fnmatchcase(path, glob) for path in changed)]
    return chosen, unmatched


def require_files(rev: str, changed: Sequence[str], files: Sequence[str], globs: Sequence[str] | None) -> None:
    if files:
        return
    if globs:
        raise CheckError(f"no non-test file changed by {rev} matches --paths {' '.join(globs)} "
                         f"(changed: {', '.join(changed) or 'nothing'}; test files are never reverted)")
    raise CheckError(f"{rev} changes no non-test files, so there is no fix to revert (changed: {', '.join(changed) or 'nothing'})")


# ---- which tests to run --------------------------------------------------------------------------


def split_test_args(repo: Path, head: str, args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Test targets (.py files, node ids, folders at HEAD) and the other pytest arguments, in order."""
    targets, others = [], []
    previous = ""
    for arg in args:
        is_value = previous in PYTEST_VALUE_OPTIONS
        previous = arg
        if is_value or arg.startswith("-"):
            others.append(arg)
        elif _path_part(arg).endswith(".py") or _is_folder_at(repo, head, _repo_relative(repo, _path_part(arg))):
            targets.append(_repo_relative(repo, _path_part(arg)) + arg[len(_path_part(arg)):])
        else:
            others.append(arg)
    return targets, others


def _path_part(target: str) -> str:
    """`tests/test_x.py::test_y` -> `tests/test_x.py`."""
    return target.split("::", 1)[0]


def _repo_relative(repo: Path, path: str) -> str:
    """Test paths are relative to the repository; an absolute path inside it is accepted too."""
    candidate = Path(path)
    if candidate.is_absolute():
        with contextlib.suppress(ValueError):
            return candidate.resolve().relative_to(repo.resolve()).as_posix()
    return PurePosixPath(path).as_posix().rstrip("/") or "."


def _object_type(repo: Path, head: str, path: str) -> str:
    if path in ("", "."):
        return "tree"
    done = _git(repo, "cat-file", "-t", f"{head}:{path}")
    return done.stdout.strip() if done.returncode == 0 else ""


def _is_folder_at(repo: Path, head: str, path: str) -> bool:
    return _object_type(repo, head, path) == "tree"


def check_targets(repo: Path, head: str, targets: Sequence[str], reverted: Sequence[str]) -> None:
    """Every test target must be committed at HEAD (the worktrees hold nothing else) and must not be reverted."""
    if not targets:
        raise CheckError("no test file or folder among the test arguments (give e.g. -- tests/test_fix.py)")
    for target in targets:
        path = _path_part(target)
        if _object_type(repo, head, path) not in ("blob", "tree"):
            raise CheckError(f"{path}: not a committed file or folder at HEAD (the check runs on clean checkouts of HEAD)")
        if path in reverted:
            raise CheckError(f"{path} is among the files being reverted; narrow them with --paths")


# ---- worktrees -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _shielded_from_interrupts() -> Iterator[None]:
    """Cleanup must finish even if the user presses Ctrl-C again; the git children inherit the ignore."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM would skip `finally` and leave worktrees behind; turn it into SystemExit so cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _registered_worktrees(repo: Path) -> set[str]:
    lines = _git(repo, "worktree", "list", "--porcelain").stdout.splitlines()
    return {os.path.realpath(line[len("worktree "):]) for line in lines if line.startswith("worktree ")}


@contextlib.contextmanager
def scratch_folder() -> Iterator[Path]:
    """A private temporary folder outside the repository; removed even on interruption."""
    folder = Path(tempfile.mkdtemp(prefix="sim-revert-check-"))
    try:
        yield folder
    finally:
        with _shielded_from_interrupts():
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def worktree(repo: Path, head: str, path: Path, hooks: Path) -> Iterator[Path]:
    """A detached checkout of HEAD at `path`, removed and unregistered however the block ends.

    Hooks are pointed at an empty folder: a post-checkout hook must not run against the user's repository.
    """
    try:
        done = _git(repo, "-c", f"core.hooksPath={hooks}", "worktree", "add", "--detach", str(path), head)
        if done.returncode != 0:
            raise CheckError(f"git worktree add failed: {_first_line(done.stderr)}")
        yield path
    finally:
        with _shielded_from_interrupts():
            _remove_worktree(repo, path)


def _remove_worktree(repo: Path, path: Path) -> None:
    """`remove --force` discards our reverted edits; `prune` only if our entry survived, so other stale entries stay."""
    _git(repo, "worktree", "remove", "--force", "--force", str(path))
    shutil.rmtree(path, ignore_errors=True)
    if os.path.realpath(path) in _registered_worktrees(repo):
        _git(repo, "worktree", "prune")


# ---- the revert ----------------------------------------------------------------------------------


def revert_patch(repo: Path, sha: str, files: Sequence[str]) -> str:
    """REV's diff for `files` in a form `git apply` always reads, whatever the user's diff configuration."""
    return _git_ok(repo, "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false", "diff", "--binary",
                   "--full-index", "--no-renames", "--no-color", "--no-ext-diff", "--no-textconv", "--no-relative",
                   "--src-prefix=a/", "--dst-prefix=b/", f"{sha}^", sha, "--", *files)


def apply_revert(tree: Path, rev: str, patch: str, files: Sequence[str]) -> None:
    """Apply the reverse of REV's diff; a three-way merge absorbs unrelated later edits, a real conflict is an error."""
    done = _git(tree, "apply", "-R", "--3way", "--whitespace=nowarn", stdin=patch)
    if done.returncode == 0:
        return
    failing = _failing_files(tree, done.stderr, files)
    raise CheckError(f"the revert of {rev} does not apply to HEAD: {', '.join(failing)} "
                     f"(later commits changed the same lines; narrow it with --paths or revert by hand)")


def _failing_files(tree: Path, stderr: str, files: Sequence[str]) -> list[str]:
    """The files git could not revert: unmerged ones, else those its error messages name, else all of them."""
    unmerged = _nul_split(_git(tree, "diff", "--name-only", "-z", "--diff-filter=U").stdout)
    if unmerged:
        return sorted(set(unmerged))
    named = [f for f in files if re.search(rf"(^|[\s'\"]){re.escape(f)}($|[\s:'\"])", stderr, re.MULTILINE)]
    return named or list(files)


# ---- running the tests ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One pytest subprocess: its exit code decides failed/passed; exit 5 (nothing collected) is not a failure."""

    exit_code: int
    output: str

    @property
    def failed(self) -> bool:
        return self.exit_code not in (0, PYTEST_NO_TESTS)

    @property
    def meaning(self) -> str:
        return PYTEST_MEANINGS.get(self.exit_code, "killed or crashed")

    def tail(self) -> str:
        return "\n".join(self.output.rstrip().splitlines()[-OUTPUT_TAIL_LINES:])

    def describe(self) -> str:
        if self.exit_code == 0:
            return "passed (exit 0)"
        if self.exit_code == PYTEST_NO_TESTS:
            return "not failed (exit 5), NOTE: no tests collected"
        return f"FAILED (exit {self.exit_code}: {self.meaning})"

    def as_json(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "failed": self.failed, "meaning": self.meaning,
                "no_tests_collected": self.exit_code == PYTEST_NO_TESTS, "output_tail": self.tail()}


def run_pytest(tree: Path, target: str, others: Sequence[str]) -> Outcome:
    """One test file in its own process, importing the worktree's code ahead of any installed copy."""
    pythonpath = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    env = _clean_env({"PYTHONHASHSEED": "0", "TZ": "UTC", "PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1"})
    command = [sys.executable, "-m", "pytest", target, *others, "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=tree, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace")
    return Outcome(done.returncode, done.stdout)


# ---- the check -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RevertPlan:
    """Everything decided before any worktree exists, so bad input leaves nothing behind."""

    repo: Path
    rev: str
    sha: str
    subject: str
    head: str
    files: tuple[str, ...]
    targets: tuple[str, ...]
    others: tuple[str, ...]
    unmatched_globs: tuple[str, ...] = ()


@dataclass
class Result:
    plan: RevertPlan
    reverted: dict[str, Outcome] = field(default_factory=dict)
    restored: dict[str, Outcome] = field(default_factory=dict)

    def caught(self) -> list[str]:
        return [t for t in self.plan.targets if self.reverted[t].failed]

    def passing(self) -> list[str]:
        return [t for t in self.plan.targets if not self.restored[t].failed]

    @property
    def holds(self) -> bool:
        return len(self.caught()) == len(self.passing()) == len(self.plan.targets)

    def summary(self) -> str:
        return f"{len(self.caught())} failed with the fix reverted, {len(self.passing())} passed restored"

    def findings(self) -> tuple[list[str], list[str]]:
        """What held and what did not, one plain sentence per test file and phase."""
        held, broken = [], []
        for target in self.plan.targets:
            reverted, restored = self.reverted[target], self.restored[target]
            if reverted.failed:
                held.append(f"{target} failed with the fix reverted")
            elif reverted.exit_code == PYTEST_NO_TESTS:
                broken.append(f"{target} collected no tests with the fix reverted: it cannot catch the revert")
            else:
                broken.append(f"{target} passed with the fix reverted: it does not catch the revert")
            if not restored.failed:
                held.append(f"{target} passed restored" + (" (no tests collected)" if restored.exit_code == PYTEST_NO_TESTS else ""))
            else:
                broken.append(f"{target} failed restored (exit {restored.exit_code}: {restored.meaning}): "
                              "it fails on HEAD too, so its failure with the fix reverted proves nothing")
        return held, broken

    def verdict(self) -> str:
        if self.holds:
            return f"verdict: the tests catch the revert of {self.plan.sha[:12]}: they fail without the fix and pass with it"
        held, broken = self.findings()
        return "verdict: NOT caught: " + "; ".join(broken) + (f". Held: {'; '.join(held)}" if held else "")

    def as_json(self) -> dict[str, Any]:
        held, broken = self.findings()
        plan = self.plan
        return {
            "repo": str(plan.repo), "revision": plan.rev, "commit": plan.sha, "subject": plan.subject,
            "head": plan.head, "reverted_files": list(plan.files), "unmatched_globs": list(plan.unmatched_globs),
            "pytest_args": list(plan.others),
            "tests": [{"file": t, "reverted": self.reverted[t].as_json(), "restored": self.restored[t].as_json()}
                      for t in plan.targets],
            "failed_reverted": len(self.caught()), "passed_restored": len(self.passing()),
            "test_files": len(plan.targets), "summary": self.summary(), "held": held, "not_held": broken,
            "caught": self.holds, "verdict": self.verdict(),
        }


def plan(rev: str, test_args: Sequence[str], globs: Sequence[str] | None, repo_arg: str | None) -> RevertPlan:
    """Validate everything up front: each failure is one clear sentence and nothing has been created yet."""
    if not test_args:
        raise CheckError("no test arguments: put the tests to run after --, e.g. -- tests/test_fix.py")
    repo = find_repo(repo_arg)
    dirty = dirty_files(repo)
    if dirty:
        raise CheckError(f"the working tree of {repo} has uncommitted changes to tracked files: {', '.join(dirty)} "
                         "(commit or stash them: the check runs on HEAD)")
    sha = resolve_commit(repo, rev)
    check_single_parent(repo, rev, sha)
    head = head_commit(repo)
    changed = changed_files(repo, sha)
    files, unmatched = select_files(changed, globs)
    require_files(rev, changed, files, globs)
    targets, others = split_test_args(repo, head, test_args)
    check_targets(repo, head, targets, files)
    return RevertPlan(repo, rev, sha, subject(repo, sha), head, tuple(files), tuple(targets), tuple(others), tuple(unmatched))


def execute(plan: RevertPlan, report: Callable[[str], None]) -> Result:
    """Revert in one fresh worktree and run the tests; then run them in another fresh worktree at HEAD."""
    result = Result(plan)
    with _terminate_as_exit(), scratch_folder() as scratch:
        hooks = scratch / "no-hooks"
        hooks.mkdir()
        with worktree(plan.repo, plan.head, scratch / "reverted", hooks) as tree:
            apply_revert(tree, plan.rev, revert_patch(plan.repo, plan.sha, plan.files), plan.files)
            for line in _header(plan):
                report(line)
            _run_phase(tree, plan, result.reverted, "with the fix reverted", report)
        with worktree(plan.repo, plan.head, scratch / "restored", hooks) as tree:
            _run_phase(tree, plan, result.restored, "restored", report)
    return result


def _run_phase(tree: Path, plan: RevertPlan, outcomes: dict[str, Outcome], phase: str, report: Callable[[str], None]) -> None:
    width = max(len(t) for t in plan.targets)
    for target in plan.targets:
        outcome = outcomes[target] = run_pytest(tree, target, plan.others)
        report(f"  {target:<{width}}  {phase + ':':<22} {outcome.describe()}")
        if phase == "restored" and outcome.failed:
            report("    " + outcome.tail().replace("\n", "\n    "))


def _header(plan: RevertPlan) -> list[str]:
    lines = [f"revert check of {plan.sha[:12]} \"{plan.subject}\" on HEAD {plan.head[:12]} in {plan.repo}",
             f"reverting {len(plan.files)} file(s): {', '.join(plan.files)}"]
    lines += [f"note: --paths {glob} matched no file changed by {plan.rev}" for glob in plan.unmatched_globs]
    return lines


def check(rev: str, test_args: Sequence[str], *, paths: Sequence[str] | None = None, repo: str | None = None,
          as_json: bool = False) -> int:
    """The `mutate --revert` command: exit 0 caught, 1 not caught, 2 bad input, 130 interrupted."""
    args = list(test_args)
    if args[:1] == ["--"]:
        args = args[1:]
    try:
        the_plan = plan(rev, args, paths, repo)
        say: Callable[[str], None] = (lambda line: None) if as_json else (lambda line: print(line, flush=True))
        result = execute(the_plan, say)
    except CheckError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; the temporary worktrees were removed", file=sys.stderr)
        return EXIT_INTERRUPTED
    if as_json:
        print(json.dumps(result.as_json(), sort_keys=True))
    else:
        print(result.summary())
        print(result.verdict())
    return EXIT_OK if result.holds else EXIT_NOT_CAUGHT
