"""Operator mutation: generated small edits of the reference, each judged by the whole scenario catalogue.

A curated mutant (sim/mutation/mutants.py) reverts one named fix; an operator mutant is generated. Every candidate
is one minimal text edit of a `reference/` module, located by the AST positions of the node it changes, so
everything outside the edit stays byte-identical and the module is never re-formatted:

    compare   == <-> !=, < <-> >=, > <-> <=, is <-> is not, in <-> not in
    boolop    and <-> or (every operator of one boolean expression)
    not       a `not` dropped
    constant  True <-> False; a small int in a comparison or a bound becomes n+1 (off by one)
    guard     the test of an `if` that guards a raise or return becomes False (the guard is dropped)
    return    a return inside an if-body that does more than return becomes `pass` (the early exit is dropped)
    call      a call statement (a release, a refresh, a stamp) becomes `pass`; emit/checkpoint only observe
    swap      two adjacent simple statements, one of them awaiting, change places (around a yield point)

A candidate's id is `<file>:<line>:<col>:<operator>` (1-based line and character column). Each sampled
mutant runs the catalogue in a subprocess over an overlay copy of the reference (the working tree is never
touched): with a coverage map (`Selection`), only the scenarios whose runs execute the lines it edits, until
the first that reports a violation; one that no scenario reaches is not run, and is reported UNREACHED. A
survivor is a race the catalogue does not cover, or an equivalent mutant; the known equivalents are listed in
`mutants/equivalent.toml`, each with the line it edits and why, and are left out of the score.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import difflib
import itertools
import json
import random
import re
import subprocess
import threading
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.core import children, stopping
from sim.mutation.kill_matrix import STOP_AT_VIOLATION
from sim.mutation.mutants import EQUIVALENTS_FILE, MUTANTS_DIR, ROOT, overlay_process, overlay_with
from sim.mutation.reach import edit_reach

if TYPE_CHECKING:
    from sim.mutation.coverage_map import CoverageMap

OPERATORS = ("compare", "boolop", "not", "constant", "guard", "return", "call", "swap")
# Never run by a simulated killer: a frontend, an entry point, the fix table, and the real host's own code (the real
# process table, the real run's event log, the stress worker), which the real stress run and its tests judge instead.
SKIPPED = ("reference/chat.py", "reference/__main__.py", "reference/fixes.py",
           "reference/identity.py", "reference/eventlog.py", "reference/stress_worker.py")
OBSERVERS = frozenset({"emit", "checkpoint"})  # calls that only record or name a scheduling point
SMALL_INT = 16  # larger literals are sizes and ids, not bounds
EQUIVALENTS = MUTANTS_DIR / EQUIVALENTS_FILE
RUN_COMPLETES = "run_completes"  # the runner's invariant for a run that raised, deadlocked or overran its budget
UNREACHED = "no catalogue scenario executes the lines it edits"

_FLIPPED_COMPARE = {
    ast.Eq: "!=", ast.NotEq: "==", ast.Lt: ">=", ast.GtE: "<", ast.Gt: "<=", ast.LtE: ">",
    ast.Is: "is not", ast.IsNot: "is", ast.In: "not in", ast.NotIn: "in",
}
_COMPARE_SPELLING = {
    ast.Eq: r"==", ast.NotEq: r"!=", ast.Lt: r"<", ast.GtE: r">=", ast.Gt: r">", ast.LtE: r"<=",
    ast.Is: r"\bis\b", ast.IsNot: r"\bis\s+not\b", ast.In: r"\bin\b", ast.NotIn: r"\bnot\s+in\b",
}
_NOT_KEYWORD = re.compile(r"not\b\s*")
_COMMENT = re.compile(r"#[^\n]*")
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Delete, ast.Assert)


# ---- candidates --------------------------------------------------------------------------------


@dataclass(frozen=True)
class OperatorCandidate:
    """One text edit: `source[start:end]` (which reads `original`) becomes `replacement`."""

    file: str
    line: int
    col: int
    operator: str
    start: int
    end: int
    original: str
    replacement: str
    line_text: str  # the stripped source line the edit starts on: what an equivalents entry pins

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}:{self.col}:{self.operator}"

    def apply(self, source: str) -> str:
        if source[self.start:self.end] != self.original:
            raise ValueError(f"{self.id}: the source no longer reads {self.original!r} there")
        return source[:self.start] + self.replacement + source[self.end:]

    def diff(self, source: str, context: int = 1) -> str:
        before, after = source.splitlines(keepends=True), self.apply(source).splitlines(keepends=True)
        return "".join(difflib.unified_diff(before, after, f"a/{self.file}", f"b/{self.file}", n=context))


class _Text:
    """A module's text with AST positions (1-based line, UTF-8 byte column) turned into string offsets."""

    def __init__(self, file: str, source: str) -> None:
        self.file = file
        self.source = source
        self._lines = source.split("\n")
        self._starts = list(itertools.accumulate((len(line) + 1 for line in self._lines), initial=0))

    def offset(self, line: int, col: int) -> int:
        return self._starts[line - 1] + len(self._lines[line - 1].encode()[:col].decode())

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]  # the nodes spanned are expressions and statements, which have positions
        return start, self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]  # as above

    def between(self, before: ast.AST, after: ast.AST, pattern: str) -> tuple[int, int]:
        """Where the operator token `pattern` sits between two operands (parentheses and comments aside)."""
        gap_start, gap_end = self.span(before)[1], self.span(after)[0]
        gap = _COMMENT.sub(lambda m: " " * len(m.group()), self.source[gap_start:gap_end])
        found = re.search(pattern, gap)
        if found is None:
            raise ValueError(f"{self.file}: no {pattern!r} between offsets {gap_start} and {gap_end}")
        return gap_start + found.start(), gap_start + found.end()

    def edit(self, operator: str, start: int, end: int, replacement: str) -> OperatorCandidate:
        line = bisect.bisect_right(self._starts, start)
        col = start - self._starts[line - 1] + 1
        return OperatorCandidate(self.file, line, col, operator, start, end, self.source[start:end], replacement,
                         self._lines[line - 1].strip())


def _nodes(tree: ast.AST, kind: type | tuple[type, ...]) -> list[Any]:
    return [node for node in ast.walk(tree) if isinstance(node, kind)]


def _callee(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _statement_call(stmt: ast.stmt) -> ast.Call | None:
    """The call of a call statement (`f(x)` or `await f(x)`), else None."""
    if not isinstance(stmt, ast.Expr):
        return None
    value = stmt.value.value if isinstance(stmt.value, ast.Await) else stmt.value
    return value if isinstance(value, ast.Call) else None


def _observes(stmt: ast.stmt) -> bool:
    call = _statement_call(stmt)
    return call is not None and _callee(call) in OBSERVERS


def _compare(tree: ast.Module, text: _Text) -> Iterator[OperatorCandidate]:
    for node in _nodes(tree, ast.Compare):
        operands = [node.left, *node.comparators]
        for op, before, after in zip(node.ops, operands, operands[1:]):
            start, end = text.between(before, after, _COMPARE_SPELLING[type(op)])
            yield text.edit("compare", start, end, _FLIPPED_COMPARE[type(op)])


def _boolop(tree: ast.Module, text: _Text) -> Iterator[OperatorCandidate]:
    """All operators of one boolean expression at once, so `a and b and c` becomes `a or b or c`."""
    for node in _nodes(tree, ast.BoolOp):
        word, other = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        spans = [text.between(a, b, rf"\b{word}\b") for a, b in zip(node.values, node.values[1:])]
        start, end = spans[0][0], spans[-1][1]
        pieces, cursor = [], start
        for op_start, op_end in spans:
            pieces += [text.source[cursor:op_start], other]
            cursor = op_end
        yield text.edit("boolop", start, end, "".join(pieces))


def _not(tree: ast.Module, text: _Text) -> Iterator[OperatorCandidate]:
    for node in _nodes(tree, ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            keyword = _NOT_KEYWORD.match(text.source, text.span(node)[0])
            if keyword is None:
                raise ValueError(f"{text.file}:{node.lineno}: a `not` expression that does not start with `not`")
            yield text.edit("not", keyword.start(), keyword.end(), "")


def _is_bound(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Compared with, a slice or index, or an argument of min/max/range (a sign in front is looked through)."""
    parent = parents.get(node)
    while isinstance(parent, ast.UnaryOp) and isinstance(parent.op, (ast.USub, ast.UAdd)):
        node, parent = parent, parents.get(parent)
    if isinstance(parent, (ast.Compare, ast.Slice)):
        return True
    if isinstance(parent, ast.Subscript):
        return parent.slice is node
    return isinstance(parent, ast.Call) and _callee(parent) in ("min", "max", "range") and node in parent.args


def _constant(tree: ast.Module, text: _Text) -> Iterator[OperatorCandidate]:
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    for node in _nodes(tree, ast.Constant):
        if isinstance(node.value, bool):
            yield text.edit("constant", *text.span(node), str(not node.value))
        elif isinstance(node.value, int) and 0 <= node.value <= SMALL_INT and _is_bound(node, parents):
            yield text.edit("constant", *text.span(node), str(node.value + 1))


def _guard(tree: ast.Module, text: _Text) -> Iterator[OperatorCandidate]:
    for node in _nodes(tree, ast.If):
        if any(isinstance(stmt, (ast.Raise, ast.Return)) for stmt in node.body) and not isinstance(node.test, ast.Constant):
            yield text.edit("guard", *text.span(node.test), "False")


def _return(tree: ast.Module, text: _Text) -> Iterator[OperatorCandidate]:
    """An if-body that is the return alone (no else) is left to `guard`: dropping it is the same program."""
    for node in _nodes(tree, ast.If):
        if len(node.body) > 1 or node.orelse:
            for stmt in node.body:
                if isinstance(stmt, ast.Return):
                    yield text.edit("return", *text.span(stmt), "pass")


def _call(tree: ast.Module, text: _Text) -> Iterator[OperatorCandidate]:
    for node in _nodes(tree, ast.Expr):
        if _statement_call(node) is not None and not _observes(node):
            yield text.edit("call", *text.span(node), "pass")


def _blocks(tree: ast.Module) -> Iterator[list[ast.stmt]]:
    for node in ast.walk(tree):
        for _, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                yield value


def _names(stmt: ast.stmt, context: type) -> set[str]:
    return {node.id for node in _nodes(stmt, ast.Name) if isinstance(node.ctx, context)}


def _swappable(first: ast.stmt, second: ast.stmt) -> bool:
    """Both simple and on their own lines, one awaits, neither only observes or is a docstring, and the
    second does not read a name the first binds (that swap is a guaranteed crash, not a reordering)."""
    pair = (first, second)
    return (
        all(isinstance(stmt, _SIMPLE) for stmt in pair)
        and first.end_lineno is not None and first.end_lineno < second.lineno
        and any(_nodes(stmt, ast.Await) for stmt in pair)
        and not any(_observes(stmt) for stmt in pair)
        and not any(isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) for stmt in pair)
        and not _names(first, ast.Store) & _names(second, ast.Load)
    )


def _swap(tree: ast.Module, text: _Text) -> Iterator[OperatorCandidate]:
    for block in _blocks(tree):
        for first, second in zip(block, block[1:]):
            if _swappable(first, second):
                (a_start, a_end), (b_start, b_end) = text.span(first), text.span(second)
                source = text.source
                swapped = source[b_start:b_end] + source[a_end:b_start] + source[a_start:a_end]
                yield text.edit("swap", a_start, b_end, swapped)


_ENUMERATORS: dict[str, Callable[[ast.Module, _Text], Iterator[OperatorCandidate]]] = {
    "compare": _compare, "boolop": _boolop, "not": _not, "constant": _constant,
    "guard": _guard, "return": _return, "call": _call, "swap": _swap,
}


def module_candidates(file: str, source: str) -> list[OperatorCandidate]:
    """Every candidate of one module, in source order (then operator order)."""
    tree = ast.parse(source, filename=file)
    text = _Text(file, source)
    found = [candidate for operator in OPERATORS for candidate in _ENUMERATORS[operator](tree, text)]
    return sorted(found, key=lambda c: (c.line, c.col, OPERATORS.index(c.operator)))


def reference_sources(root: Path = ROOT) -> dict[str, str]:
    """The mutable modules of the reference, by repository-relative path, in path order."""
    paths = sorted((root / "reference").rglob("*.py"))
    sources = {path.relative_to(root).as_posix(): path.read_text(encoding="utf-8") for path in paths}
    return {file: source for file, source in sources.items() if file not in SKIPPED}


def all_candidates(sources: dict[str, str]) -> list[OperatorCandidate]:
    return [candidate for file, source in sources.items() for candidate in module_candidates(file, source)]


def sample(candidates: Sequence[OperatorCandidate], seed: int, limit: int | None) -> list[OperatorCandidate]:
    """A seeded sample, in launch order: the same candidates and seed always give the same list."""
    count = len(candidates) if limit is None else min(limit, len(candidates))
    return random.Random(seed).sample(list(candidates), count)


def chosen(candidates: Sequence[OperatorCandidate], ids: Sequence[str]) -> list[OperatorCandidate]:
    """The candidates named by id, in the order given (a last report's survivors, judged again after a fix).

    Raises ValueError naming every id that is not a current candidate (a moved line changes its id).
    """
    by_id = {candidate.id: candidate for candidate in candidates}
    unknown = [candidate_id for candidate_id in ids if candidate_id not in by_id]
    if unknown:
        raise ValueError(f"not a current candidate: {', '.join(unknown)}")
    return [by_id[candidate_id] for candidate_id in dict.fromkeys(ids)]


# ---- known equivalents -------------------------------------------------------------------------


@dataclass(frozen=True)
class Equivalent:
    id: str
    line: str
    reason: str


def load_equivalents(path: Path = EQUIVALENTS) -> dict[str, Equivalent]:
    if not path.exists():
        return {}
    entries = tomllib.loads(path.read_text(encoding="utf-8")).get("equivalent", [])
    return {entry["id"]: Equivalent(entry["id"], entry["line"], entry["reason"]) for entry in entries}


def stale_equivalents(equivalents: dict[str, Equivalent], candidates: Sequence[OperatorCandidate]) -> list[str]:
    """Entries that no longer name a candidate, or whose line has changed under the same id."""
    by_id = {candidate.id: candidate for candidate in candidates}
    stale = []
    for entry in equivalents.values():
        candidate = by_id.get(entry.id)
        if candidate is None:
            stale.append(f"{entry.id}: no such candidate")
        elif candidate.line_text != entry.line:
            stale.append(f"{entry.id}: the line now reads {candidate.line_text!r}")
    return stale


# ---- running the catalogue against one mutant --------------------------------------------------


@dataclass
class MutantRun:
    """One mutant's run. `how` it was killed: invariant, vacuity, crash or timeout; None survived.

    `killer` is the judge that killed it, "swarm" or "catalogue" (None: survived).
    """

    candidate: OperatorCandidate
    how: str | None
    detail: str
    seconds: float
    killer: str | None = None
    unreached: bool = False  # no catalogue scenario executes the lines it edits

    @property
    def killed(self) -> bool:
        return self.how is not None

    @property
    def verdict(self) -> str:
        """How it was killed, else SURVIVED, or UNREACHED when no catalogue scenario executes its lines."""
        return self.how or ("UNREACHED" if self.unreached else "SURVIVED")


def _verdict_document(code: int, stdout: str) -> dict[str, Any] | None:
    """The JSON a `run` or `swarm` subprocess printed, if it ended as a verdict (exit 0 or 1) and printed one."""
    if code not in (0, 1):
        return None
    try:
        return json.loads(stdout)
    except json.JSONDecodeError:
        return None


def _crash(stderr: str, code: int) -> tuple[str, str]:
    lines = stderr.strip().splitlines()
    return "crash", lines[-1] if lines else f"exit {code}"


def catalogue_verdict(code: int, stdout: str, stderr: str) -> tuple[str | None, str]:
    """How a `run --json` result kills (None: it does not), and which scenario or error says so.

    A violation of a named invariant kills by invariant; a scenario whose fault never fired or whose
    coverage mark was never reached kills by vacuity; a run that did not complete, or a catalogue run that
    printed no verdict, is a crash.
    """
    document = _verdict_document(code, stdout)
    if document is None:
        return _crash(stderr, code)
    if code == 0:
        return None, "every scenario passed"
    failed = [verdict for verdict in document["scenarios"] if not verdict["passed"]]
    violated = [verdict for verdict in failed if verdict["violation"] is not None]
    named = [verdict for verdict in violated if verdict["violation"]["invariant"] != RUN_COMPLETES]
    if named:
        return "invariant", f"{named[0]['scenario']}: {named[0]['violation']['invariant']}"
    if violated:
        return "crash", f"{violated[0]['scenario']}: {violated[0]['violation']['explanation']}"
    return "vacuity", f"{failed[0]['scenario']}: {failed[0]['problems'][0]}"


def swarm_verdict(code: int, stdout: str, stderr: str) -> tuple[str | None, str]:
    """How a `swarm --json` result kills (None: it does not): its first failure class, or a crash."""
    document = _verdict_document(code, stdout)
    if document is None:
        return _crash(stderr, code)
    failures = document["failures"]
    if code == 0 or not failures:
        return None, "every generated run held"
    named = [failure for failure in failures if failure["invariant"] != RUN_COMPLETES]
    first = (named or failures)[0]
    return ("invariant" if named else "crash"), f"swarm {first['scenario_name']}: {first['invariant']}"


@dataclass(frozen=True)
class Killers:
    """What judges a mutant: generated swarm runs of workloads, catalogue scenarios, or both.

    With both, the swarm judges first and stops at its first failing run: most mutants fall within a few
    runs, and a mutant the swarm kills is one it kills alone, so the report tells the swarm's own score too.
    """

    scenarios: tuple[str, ...] = ()
    workloads: tuple[str, ...] | None = None  # None: no swarm; empty: the default workloads
    swarm_runs: int = 500
    first_kill: bool = False  # the catalogue stops at its first scenario that reports a violation

    def narrowed(self, scenarios: Sequence[str]) -> Killers:
        """The same judges with only these catalogue scenarios, which stop at the first violation."""
        return dataclasses.replace(self, scenarios=tuple(scenarios), first_kill=True)

    def judge(self, folder: Path, timeout: float) -> tuple[str | None, str, str | None]:
        """The first killer's verdict that kills, over the overlay in `folder` (its outputs stay there), and
        which killer gave it ("swarm" or "catalogue"; None when nothing killed)."""
        if self.workloads is not None:
            argv = ["swarm", *self.workloads, "--runs", str(self.swarm_runs), "--exitfirst", "--json",
                    "--out", str(folder / "out")]
            how, detail = _overlay_run(folder, argv, timeout, swarm_verdict)
            if how is not None or not self.scenarios:
                return how, detail, None if how is None else "swarm"
        if not self.scenarios:
            return None, "nothing judged", None
        argv = ["run", *self.scenarios, "--json", "--out", str(folder / "out"), *([STOP_AT_VIOLATION] if self.first_kill else [])]
        how, detail = _overlay_run(folder, argv, timeout, catalogue_verdict)
        return how, detail, None if how is None else "catalogue"


def _overlay_run(folder: Path, argv: Sequence[str], timeout: float,
                 verdict: Callable[[int, str, str], tuple[str | None, str]]) -> tuple[str | None, str]:
    command, env = overlay_process(folder, argv)
    try:
        done = children.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", f"python -m sim {argv[0]} ran over {timeout:g}s"
    return verdict(done.returncode, done.stdout, done.stderr)


def baseline_problem(killers: Killers, timeout: float, file: str = "reference/__init__.py") -> str | None:
    """None if the killers pass over an unmutated overlay; a failing baseline would make every mutant look killed."""
    with overlay_with(file, (ROOT / file).read_text(encoding="utf-8"), label="baseline") as folder:
        how, detail, _ = killers.judge(folder, timeout)
    return None if how is None else f"the killers fail on the unmutated reference ({how}: {detail})"


@dataclass(frozen=True)
class Selection:
    """The catalogue scenarios that can kill an edit: those whose runs execute the lines it edits (sim/mutation/reach.py)."""

    coverage: CoverageMap
    scenarios: tuple[Any, ...]

    def paths(self, file: str, before: str, after: str) -> list[str]:
        return [str(s.path) for s in self.coverage.reaching(self.scenarios, edit_reach(file, before, after))]


def run_candidate(candidate: OperatorCandidate, source: str, killers: Killers, timeout: float,
                  selection: Selection | None = None) -> MutantRun:
    """One mutant judged in an overlay; with a selection, by the catalogue scenarios that reach it alone."""
    started = time.monotonic()
    mutated = candidate.apply(source)
    unreached = False
    if selection is not None and killers.scenarios:
        reaching = selection.paths(candidate.file, source, mutated)
        killers, unreached = killers.narrowed(reaching), not reaching
        if unreached and killers.workloads is None:
            return MutantRun(candidate, None, UNREACHED, time.monotonic() - started, unreached=True)
    with overlay_with(candidate.file, mutated, label=candidate.operator) as folder:
        how, detail, killer = killers.judge(folder, timeout)
    return MutantRun(candidate, how, detail, time.monotonic() - started, killer, unreached)


def run_sample(
    launch: Sequence[OperatorCandidate], sources: dict[str, str], killers: Killers, *, jobs: int, timeout: float,
    budget: float | None, on_done: Callable[[MutantRun], None] | None = None, selection: Selection | None = None,
) -> list[MutantRun]:
    """Run mutants `jobs` at a time in launch order; none is launched once the budget has run out or a stop
    is requested (sim.core.stopping), and those in progress then are left unjudged.

    `on_done` hears of each finished mutant (progress lines).
    """
    deadline = float("inf") if budget is None else time.monotonic() + budget
    pending = iter(launch)
    lock = threading.Lock()
    runs: list[MutantRun] = []

    def worker() -> None:
        while True:
            with lock:
                candidate = next(pending, None) if time.monotonic() < deadline and not stopping.requested() else None
            if candidate is None:
                return
            run = run_candidate(candidate, sources[candidate.file], killers, timeout, selection)
            if stopping.requested():
                return  # its killers were stopped part-way: not judged
            with lock:
                runs.append(run)
            if on_done is not None:
                on_done(run)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(worker) for _ in range(jobs)]:
            future.result()
    order = {candidate.id: index for index, candidate in enumerate(launch)}
    return sorted(runs, key=lambda run: order[run.candidate.id])


# ---- the report --------------------------------------------------------------------------------


@dataclass
class OperatorReport:
    candidates: list[OperatorCandidate]
    launch: list[OperatorCandidate]
    runs: list[MutantRun]
    equivalents: dict[str, Equivalent]
    sources: dict[str, str]
    seed: int
    jobs: int
    seconds: float
    stale: list[str] = field(default_factory=list)
    by_id: bool = False  # the launch was named by id (--only), not sampled with the seed
    both: bool = False  # the swarm judged first, then the catalogue: the swarm's own score is reported too

    def equivalent_runs(self) -> list[MutantRun]:
        """Marked equivalent and survived: left out of the score."""
        return [run for run in self.runs if run.candidate.id in self.equivalents and not run.killed]

    def contradicted(self) -> list[MutantRun]:
        """Marked equivalent yet killed: the mark is wrong, and the mutant counts as a kill."""
        return [run for run in self.runs if run.candidate.id in self.equivalents and run.killed]

    def survivors(self) -> list[MutantRun]:
        """In source order, so a reader walks each file once."""
        found = [run for run in self.runs if not run.killed and run.candidate.id not in self.equivalents]
        return sorted(found, key=lambda run: (run.candidate.file, run.candidate.start, run.candidate.operator))

    def unreached(self) -> list[MutantRun]:
        """Survivors that no catalogue scenario reaches: gaps in the catalogue, not run at all."""
        return [run for run in self.survivors() if run.unreached]

    def killed(self, how: str | None = None, killer: str | None = None) -> int:
        return sum(1 for run in self.runs if run.killed and how in (None, run.how) and killer in (None, run.killer))

    def non_equivalent(self) -> int:
        return len(self.runs) - len(self.equivalent_runs())

    def score(self, killer: str | None = None) -> float:
        """Killed (by `killer` alone, or by any) over non-equivalent, in percent; 100 when nothing
        non-equivalent was run."""
        return 100.0 * self.killed(killer=killer) / self.non_equivalent() if self.non_equivalent() else 100.0

    def per_minute(self) -> float:
        return len(self.runs) / self.seconds * 60 if self.seconds else 0.0


def mutate_operators(
    killers: Killers, *, seed: int, limit: int | None, budget: float | None, timeout: float, jobs: int,
    equivalents_path: Path = EQUIVALENTS, on_done: Callable[[MutantRun], None] | None = None,
    only: Sequence[str] | None = None, selection: Selection | None = None,
) -> OperatorReport:
    """Enumerate, sample (or take the candidates named in `only`), run; the report says what was killed, how,
    and what survived."""
    sources = reference_sources()
    candidates = all_candidates(sources)
    equivalents = load_equivalents(equivalents_path)
    launch = sample(candidates, seed, limit) if only is None else chosen(candidates, only)
    started = time.monotonic()
    runs = run_sample(launch, sources, killers, jobs=jobs, timeout=timeout, budget=budget, on_done=on_done, selection=selection)
    return OperatorReport(candidates, launch, runs, equivalents, sources, seed, jobs, time.monotonic() - started,
                          stale_equivalents(equivalents, candidates), by_id=only is not None,
                          both=killers.workloads is not None and bool(killers.scenarios))


def score_line(report: OperatorReport) -> str:
    line = (f"mutation score: {report.killed()} killed / {report.non_equivalent()} non-equivalent = "
            f"{report.score():.1f}%")
    if report.both:
        line += (f"; the swarm alone {report.killed(killer='swarm')} = {report.score('swarm'):.1f}%, "
                 f"the catalogue after it {report.killed(killer='catalogue')}")
    return line


def _selection(report: OperatorReport) -> str:
    return "named by id" if report.by_id else f"sampled (seed {report.seed})"


def render(report: OperatorReport) -> str:
    """The score, the figures, then every survivor with its diff (and any equivalents entry to fix)."""
    lines = [
        score_line(report),
        f"  by an invariant {report.killed('invariant')}, by a vacuity check {report.killed('vacuity')}, "
        f"crashed {report.killed('crash')}, timeouts {report.killed('timeout')}; survived {len(report.survivors())} "
        f"({len(report.unreached())} unreached: no scenario executes their lines); equivalent {len(report.equivalent_runs())} (excluded)",
        f"  {len(report.runs)} of {len(report.launch)} {_selection(report)} from {len(report.candidates)} candidates in {report.seconds:.1f}s: "
        f"{report.per_minute():.1f} mutants per minute, {report.jobs} jobs",
    ]
    for run in report.contradicted():
        lines.append(f"marked equivalent but killed ({run.how}: {run.detail}): {run.candidate.id}")
    lines += [f"stale equivalent: {problem}" for problem in report.stale]
    for run in report.survivors():
        lines += ["", f"{run.verdict} {run.candidate.id}", run.candidate.diff(report.sources[run.candidate.file]).rstrip("\n")]
    return "\n".join(lines)


def report_json(report: OperatorReport) -> dict[str, Any]:
    def entry(run: MutantRun) -> dict[str, Any]:
        marked = report.equivalents.get(run.candidate.id)
        return {
            "id": run.candidate.id, "killed": run.killed, "killer": run.killer, "how": run.how, "detail": run.detail,
            "seconds": round(run.seconds, 2), "equivalent": None if marked is None else marked.reason, "unreached": run.unreached,
            "diff": run.candidate.diff(report.sources[run.candidate.file]),
        }

    return {
        "score": round(report.score(), 2), "killed": report.killed(), "non_equivalent": report.non_equivalent(),
        "swarm_score": round(report.score("swarm"), 2) if report.both else None,
        "killed_by_swarm": report.killed(killer="swarm"), "killed_by_catalogue": report.killed(killer="catalogue"),
        "crashed": report.killed("crash"), "timeouts": report.killed("timeout"), "vacuous": report.killed("vacuity"),
        "equivalent": len(report.equivalent_runs()), "survived": [run.candidate.id for run in report.survivors()],
        "unreached": [run.candidate.id for run in report.unreached()],
        "contradicted_equivalents": [run.candidate.id for run in report.contradicted()],
        "stale_equivalents": report.stale, "candidates": len(report.candidates), "sampled": len(report.launch),
        "run": len(report.runs), "seed": None if report.by_id else report.seed, "jobs": report.jobs, "seconds": round(report.seconds, 1),
        "mutants_per_minute": round(report.per_minute(), 1), "mutants": [entry(run) for run in report.runs],
    }
