"""Run every test file in its own fresh pytest process, in parallel.

Why per-file processes: the code under test is a deterministic simulation
kernel, and anything one test file leaves behind (module-level state, patched
clocks, open SQLite handles, stray threads) must not be able to change the
outcome of another file.  Each file therefore gets a new interpreter, a new
process group that is killed on timeout, its own pytest temp root and an
environment built from an allow-list, so a run on a laptop and a run in CI see
the same inputs.

Standard library only, so the runner never depends on the packages it tests.

Usage: scripts/run_tests.sh [-j N] [--timeout S] [--slice I/N] [--list]
                            [PATH ...] [-- PYTEST_ARGS ...]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

ROOT = Path(__file__).resolve().parent.parent
# The unit and property tests, and the scenario catalogue (collected by the sim pytest plugin).
DEFAULT_PATHS = (str(ROOT / "tests"), str(ROOT / "scenarios"))
DEFAULT_TIMEOUT = 300.0
TAIL_LINES = 60
# After SIGABRT (which makes pytest's faulthandler print every thread's
# stack), how long to let the child finish writing before the group is
# SIGKILLed regardless.
ABORT_GRACE_SECONDS = 2.0

# Variables copied from the caller when set; nothing else passes through.
ALLOWED_ENV = (
    "PATH",
    "HOME",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "CI",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "TMPDIR",
)
# Fixed for every child so results do not depend on the caller's machine.
# Bytecode is not fixed off but sent to a cache of this run's own (child_env):
# the package's modules, and pytest's assertion rewrite of each of them, are
# then compiled once per run instead of once per file (about half of a small
# file's time), and the checkout is left as it was.
# PYTHONUNBUFFERED makes the output of a killed (timed-out) child complete
# up to the moment it was killed.
FIXED_ENV = {
    "TZ": "UTC",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONUTF8": "1",
    "PYTHONUNBUFFERED": "1",
}
# The subset shown in rerun commands: the ones that change test behaviour.
RERUN_ENV = ("LC_ALL", "PYTHONUTF8", "TZ", "PYTHONHASHSEED")

COUNT_KEYS = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed", "deselected")
ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
SUMMARY_RE = re.compile(r"=*\s*(?P<body>.+?) in [\d.]+s(?: \([^)]*\))?\s*=*")
COUNT_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b")

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
PYTEST_NO_TESTS = 5


class UsageError(Exception):
    """A command-line problem: reported on stderr with exit status 2."""


class Interrupted(Exception):
    """Raised on SIGTERM so CI cancellation tears down child process groups."""


@dataclass
class Options:
    paths: list[str]
    jobs: int
    timeout: float
    slice: tuple[int, int] | None
    list_only: bool
    passthrough: list[str]


@dataclass
class Result:
    arg: str
    returncode: int | None
    timed_out: bool
    duration: float
    output: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode in (0, PYTEST_NO_TESTS)

    @property
    def status(self) -> str:
        if self.timed_out:
            return "TIMEOUT"
        return "PASS" if self.ok else "FAIL"

    @property
    def failed(self) -> int:
        """Failures plus errors; a failing file never counts as zero."""
        n = self.counts.get("failed", 0) + self.counts.get("errors", 0)
        return n if self.ok else max(n, 1)


# ---------------------------------------------------------------- arguments


def positive_int(text: str) -> int:
    """argparse type for -j: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type for --timeout: seconds, greater than zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def parse_slice(text: str) -> tuple[int, int]:
    """argparse type for --slice I/N, with 1 <= I <= N."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected I/N such as 1/4, got {text!r}")
    index, total = int(match[1]), int(match[2])
    if total < 1 or not 1 <= index <= total:
        raise argparse.ArgumentTypeError(f"need 1 <= I <= N in I/N, got {text!r}")
    return index, total


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="run_tests.sh",
        usage="%(prog)s [-j N] [--timeout S] [--slice I/N] [--list] [PATH ...] [-- PYTEST_ARGS ...]",
        description="Run each test file in its own pytest process, in parallel.",
        epilog="Everything after a literal -- is passed to every pytest invocation.",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="test files or folders (default: tests/ and scenarios/), relative to the current directory")
    parser.add_argument("-j", "--jobs", type=positive_int, default=os.cpu_count() or 1, metavar="N",
                        help="files run at once (default: CPU count, %(default)s here)")
    parser.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT, metavar="S",
                        help="seconds per file before its process group is killed (default: %(default)g)")
    parser.add_argument("--slice", type=parse_slice, default=None, metavar="I/N",
                        help="run only slice I of N (1-based), files dealt round-robin in sorted order")
    parser.add_argument("--list", dest="list_only", action="store_true",
                        help="print the selected files and exit without running them")
    return parser


def parse_args(argv: list[str]) -> Options:
    """Split at the first literal -- (pytest's arguments), parse the rest."""
    if "--" in argv:
        cut = argv.index("--")
        own, passthrough = argv[:cut], argv[cut + 1:]
    else:
        own, passthrough = argv, []
    ns = build_parser().parse_args(own)
    return Options(
        paths=ns.paths or list(DEFAULT_PATHS),
        jobs=ns.jobs,
        timeout=ns.timeout,
        slice=ns.slice,
        list_only=ns.list_only,
        passthrough=passthrough,
    )


# ---------------------------------------------------------------- discovery


def is_hidden(path: Path, base: Path) -> bool:
    """Skip dot-directories and caches below a searched folder."""
    return any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(base).parts[:-1])


WORKLOADS = "swarm"  # scenarios/swarm/: generated workloads, which pytest collects only under --sim-swarm-runs


def files_in_folder(folder: Path) -> list[Path]:
    """test_*.py below folder; failing that, *.toml (scenario files), leaving out the swarm's workloads: a
    campaign is `python -m sim swarm` (or pytest with --sim-swarm-runs), not one file's default test."""
    tests = [p for p in folder.rglob("test_*.py") if p.is_file() and not is_hidden(p, folder)]
    if tests:
        return tests
    return [p for p in folder.rglob("*.toml")
            if p.is_file() and not is_hidden(p, folder) and WORKLOADS not in p.relative_to(folder).parts[:-1]]


def discover(paths: list[str], cwd: Path) -> list[Path]:
    """Resolve PATH arguments against cwd; return sorted, de-duplicated files."""
    found: set[Path] = set()
    for raw in paths:
        path = (cwd / raw).resolve()
        if path.is_dir():
            found.update(files_in_folder(path))
        elif path.is_file():
            found.add(path)
        else:
            raise UsageError(f"no such file or directory: {raw}")
    return sorted(found, key=lambda p: pytest_arg(p))


def select_slice(files: list[Path], chosen: tuple[int, int] | None) -> list[Path]:
    """Round-robin: file k (0-based, sorted order) belongs to slice k % N + 1."""
    if chosen is None:
        return files
    index, total = chosen
    return files[index - 1::total]


def pytest_arg(path: Path) -> str:
    """How a file is named to pytest and in output: repo-relative when possible."""
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


# ---------------------------------------------------------------- children


def child_env(parent: dict[str, str], temproot: Path, pycache: Path) -> dict[str, str]:
    """A fresh environment: allow-listed variables, fixed values, own temp root,
    and the run's shared bytecode cache (written atomically, so children may race)."""
    env = {name: parent[name] for name in ALLOWED_ENV if name in parent}
    env.setdefault("PATH", os.defpath)
    env.update(FIXED_ENV)
    env["PYTEST_DEBUG_TEMPROOT"] = str(temproot)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def pytest_command(arg: str, passthrough: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", arg, *passthrough]


def rerun_command(arg: str, passthrough: list[str], cwd: Path) -> str:
    """A copy-pasteable shell line that reproduces one file's run."""
    env = " ".join(f"{name}={FIXED_ENV[name]}" for name in RERUN_ENV)
    line = f"{env} python -m pytest {shlex.join([arg, *passthrough])}"
    if cwd.resolve() != ROOT:
        line = f"cd {shlex.quote(str(ROOT))} && {line}"
    return line


def kill_group(pid: int) -> None:
    """SIGKILL a child's whole process group, including anything it spawned."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def abort_then_kill(proc: subprocess.Popen[bytes]) -> None:
    """Ask for a stack dump (SIGABRT -> faulthandler), then kill the group."""
    try:
        os.kill(proc.pid, signal.SIGABRT)
        proc.wait(timeout=ABORT_GRACE_SECONDS)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    kill_group(proc.pid)
    proc.wait()


class Runner:
    """Starts children and remembers live ones, so an interrupt can kill them."""

    def __init__(self, opts: Options, workdir: Path) -> None:
        self.opts = opts
        self.workdir = workdir
        self.lock = threading.Lock()
        self.live: dict[int, subprocess.Popen[bytes]] = {}
        self.stopping = False

    def run_file(self, number: int, arg: str) -> Result:
        """Run one file to completion or timeout, output captured to a file."""
        slot = self.workdir / f"{number:04d}"
        temproot = slot / "tmp"
        temproot.mkdir(parents=True)
        log_path = slot / "output.log"
        start = time.monotonic()
        with open(log_path, "wb") as log:
            proc = self.spawn(arg, log, temproot)
            if proc is None:
                return Result(arg, None, False, 0.0, "not started: run interrupted\n")
            timed_out = False
            try:
                proc.wait(timeout=self.opts.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                abort_then_kill(proc)
            finally:
                kill_group(proc.pid)  # leftovers of a finished file, too
                with self.lock:
                    self.live.pop(proc.pid, None)
        output = log_path.read_bytes().decode("utf-8", errors="replace")
        result = Result(arg, proc.returncode, timed_out, time.monotonic() - start, output)
        if not timed_out:
            result.counts = parse_counts(output)
        return result

    def spawn(self, arg: str, log: BinaryIO, temproot: Path) -> subprocess.Popen[bytes] | None:
        with self.lock:
            if self.stopping:
                return None
            proc = subprocess.Popen(
                pytest_command(arg, self.opts.passthrough),
                cwd=ROOT,
                env=child_env(dict(os.environ), temproot, self.workdir / "pycache"),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.live[proc.pid] = proc
            return proc

    def kill_all(self) -> None:
        with self.lock:
            self.stopping = True
            for pid in list(self.live):
                kill_group(pid)


# ---------------------------------------------------------------- reporting


def parse_counts(output: str) -> dict[str, int]:
    """Counts from the last pytest summary line ('3 passed, 1 skipped in 0.2s')."""
    for line in reversed(ANSI_RE.sub("", output).splitlines()):
        match = SUMMARY_RE.fullmatch(line.strip())
        if not match:
            continue
        body = match["body"]
        pairs = COUNT_RE.findall(body)
        if pairs or "no tests ran" in body:
            counts: dict[str, int] = {}
            for number, word in pairs:
                key = "errors" if word.startswith("error") else word
                counts[key] = counts.get(key, 0) + int(number)
            return counts
    return {}


def describe_counts(result: Result, timeout: float) -> str:
    """The parenthesised detail on a progress line."""
    if result.timed_out:
        return f"(no result within --timeout {timeout:g}s; process group killed)"
    parts = []
    for key in COUNT_KEYS:
        n = result.counts.get(key, 0)
        if n:
            word = ("error" if n == 1 else "errors") if key == "errors" else key
            parts.append(f"{n} {word}")
    if not parts and result.returncode == PYTEST_NO_TESTS:
        parts.append("no tests")
    if not result.ok and result.returncode is not None:
        rc = result.returncode
        parts.append(f"killed by {signal_name(-rc)}" if rc < 0 else f"exit {rc}")
    return f"({', '.join(parts)})" if parts else ""


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def progress_line(done: int, total: int, result: Result, timeout: float) -> str:
    """'[ 3/12] PASS  tests/test_x.py  (14 passed, 1 skipped) 2.3s'"""
    width = len(str(total))
    detail = describe_counts(result, timeout)
    return f"[{done:>{width}}/{total}] {result.status:<4}  {result.arg}  {detail} {result.duration:.1f}s"


def failure_block(result: Result, rerun: str) -> list[str]:
    """Tail of a failing file's output, framed, plus how to rerun it."""
    lines = result.output.rstrip("\n").splitlines()
    tail = lines[-TAIL_LINES:]
    head = f"---- {result.status} {result.arg}"
    if len(lines) > len(tail):
        head += f" (last {len(tail)} of {len(lines)} lines)"
    return [head, *("    " + line for line in tail), f"---- rerun: {rerun}", ""]


@dataclass
class Totals:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    ran: int = 0

    def add(self, result: Result) -> None:
        """xpassed counts as passed, xfailed as skipped, errors as failed."""
        c = result.counts
        self.passed += c.get("passed", 0) + c.get("xpassed", 0)
        self.skipped += c.get("skipped", 0) + c.get("xfailed", 0)
        self.failed += result.failed
        self.ran += sum(c.get(k, 0) for k in COUNT_KEYS if k != "deselected")

    def line(self) -> str:
        text = f"{self.passed} passed, {self.failed} failed"
        return text + (f", {self.skipped} skipped" if self.skipped else "")


def failed_files(results: list[Result], reruns: dict[str, str]) -> list[str]:
    """The files that did not pass, each with the command that reruns it."""
    bad = [r for r in results if not r.ok]
    if not bad:
        return []
    lines = [f"failed files ({len(bad)}):"]
    for r in bad:
        lines.append(f"  {r.status:<7} {r.arg}")
        lines.append(f"          {reruns[r.arg]}")
    return lines


def interrupted_report(results: dict[str, Result], args: list[str], reruns: dict[str, str], totals: Totals) -> list[str]:
    """What an interrupted run had finished: which files, which of them failed, and the counts so far (last)."""
    unfinished = [a for a in args if a not in results]
    lines = [f"interrupted: {len(results)} of {len(args)} file(s) finished; not finished: {' '.join(unfinished)}"]
    lines += failed_files([results[a] for a in args if a in results], reruns)
    lines.append(f"{totals.line()} (so far)")
    return lines


def final_report(results: list[Result], reruns: dict[str, str], totals: Totals) -> tuple[list[str], int]:
    """Failed-file block, zero-tests check, and the summary line (last)."""
    lines = failed_files(results, reruns)
    bad = [r for r in results if not r.ok]
    nothing_ran = not bad and totals.ran == 0
    if nothing_ran:
        lines.append(f"error: no tests ran in any of the {len(results)} file(s); treating the run as failed")
    lines.append(totals.line())
    return lines, EXIT_OK if not bad and not nothing_ran else EXIT_FAIL


# ---------------------------------------------------------------- main


def on_sigterm(signum: int, frame: object) -> None:
    raise Interrupted()


def run_all(opts: Options, args: list[str], cwd: Path) -> int:
    """Run the selected files in parallel; print progress and the summary."""
    workdir = Path(tempfile.mkdtemp(prefix="run_tests-"))
    runner = Runner(opts, workdir)
    reruns = {a: rerun_command(a, opts.passthrough, cwd) for a in args}
    results: dict[str, Result] = {}
    totals = Totals()
    pool = ThreadPoolExecutor(max_workers=min(opts.jobs, len(args)))
    try:
        futures: dict[Future[Result], str] = {
            pool.submit(runner.run_file, n, a): a for n, a in enumerate(args)
        }
        for done, future in enumerate(as_completed(futures), start=1):
            result = future.result()
            results[result.arg] = result
            totals.add(result)
            print(progress_line(done, len(args), result, opts.timeout), flush=True)
            if not result.ok:
                print("\n".join(failure_block(result, reruns[result.arg])), flush=True)
    except (KeyboardInterrupt, Interrupted):
        runner.kill_all()
        print("\n".join(interrupted_report(results, args, reruns, totals)), flush=True)
        print("interrupted: killed running test files", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:  # e.g. piped into `head`: stop, leave nothing running
        runner.kill_all()
        silence_stdout()
        return EXIT_FAIL
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(workdir, ignore_errors=True)
    lines, code = final_report([results[a] for a in args], reruns, totals)
    print("\n".join(lines), flush=True)
    return code


def silence_stdout() -> None:
    """After a broken pipe, stop the interpreter's final flush from failing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def disable_core_dumps() -> None:
    """Timed-out children get SIGABRT; keep that from leaving core files."""
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    except (ValueError, OSError):
        pass


def main(argv: list[str]) -> int:
    cwd = Path.cwd()
    try:
        opts = parse_args(argv)
        files = discover(opts.paths, cwd)
    except UsageError as exc:
        print(f"run_tests.sh: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    args = [pytest_arg(p) for p in select_slice(files, opts.slice)]
    if opts.list_only:
        for arg in args:
            print(arg)
        return EXIT_OK
    if not files:
        print(f"error: no test files found in: {' '.join(opts.paths)}")
        print(Totals().line())
        return EXIT_FAIL
    if not args:
        i, n = opts.slice or (1, 1)
        print(f"slice {i}/{n} is empty ({len(files)} file(s) across {n} slices); nothing to run")
        print(Totals().line())
        return EXIT_OK
    signal.signal(signal.SIGTERM, on_sigterm)
    disable_core_dumps()
    return run_all(opts, args, cwd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
