"""Where a thread may be preempted besides its blocking operations and clock reads: every line (or opcode)
of the program's own code.

Real threads switch anywhere; a lost update `balance = account.balance; account.balance = balance + x`
needs a switch between two plain lines. With `lines` (the default) every line the program executes in its
own files is a scheduling point, through `sys.settrace` installed in each simulated thread; `opcodes`
splits `x += 1` too; `sync` keeps only blocking operations, clock reads and SQL statements, for a large
program whose own lines would make every run long. The program's files are those outside the Python
installation (stdlib and site-packages) and outside the simulator, and the file that defines the program;
`paths` adds more (an installed package to trace line by line), so a library call in between stays one step.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from sim.threads.accesses import FrameWatch

if TYPE_CHECKING:
    from sim.threads.baton import SimThread
    from sim.threads.run import ThreadRun

GRANULARITIES = ("sync", "lines", "opcodes")

_SIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_INSTALLATION = tuple({sysconfig.get_paths()[key] + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib")})

Tracer = Callable[[FrameType, str, Any], Any]


@dataclass(frozen=True)
class Preemption:
    """The scheduling points of plain code: `granularity` (sync, lines, opcodes) within the program's files."""

    granularity: str = "lines"
    paths: tuple[str, ...] = ()
    _traced: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"preemption granularity {self.granularity!r}: expected one of {', '.join(GRANULARITIES)}")

    def traces(self, path: str) -> bool:
        """Whether lines in the file `path` are scheduling points."""
        known = self._traced.get(path)
        if known is None:
            known = self._traced[path] = is_program(path, self.paths)
        return known

    def enter(self, run: ThreadRun, sim: SimThread) -> None:
        """Install this preemption in the calling (new, simulated) OS thread."""
        if self.granularity != "sync":
            sys.settrace(self._tracer(run, sim))

    def _tracer(self, run: ThreadRun, sim: SimThread) -> Tracer:
        if run.observer is not None and self.granularity == "lines":
            return self._access_tracer(run, sim)
        checkpoint = run.checkpoint
        traces, known = self.traces, self._traced
        opcodes = self.granularity == "opcodes"
        step = "opcode" if opcodes else "line"

        def local(frame: FrameType, event: str, arg: Any) -> Tracer:
            if event == step:
                checkpoint(sim)
            return local

        def on_call(frame: FrameType, event: str, arg: Any) -> Tracer | None:
            path = frame.f_code.co_filename
            if not known.get(path) and (path in known or not traces(path)):  # known answers inline: see below
                return None
            if opcodes:
                frame.f_trace_opcodes = True
                frame.f_trace_lines = False
            return local

        return on_call

    def _access_tracer(self, run: ThreadRun, sim: SimThread) -> Tracer:
        """Lines as scheduling points, as `_tracer` makes them, each also telling the run what it touched.

        Every call a simulated thread makes, the simulator's and the standard library's too, is a call event of
        the tracer, so a file's known answer is looked up inline rather than through `traces`."""
        traces, known = self.traces, self._traced

        def on_call(frame: FrameType, event: str, arg: Any) -> Tracer | None:
            path = frame.f_code.co_filename
            if not known.get(path) and (path in known or not traces(path)):
                return None
            return FrameWatch(run, sim, frame.f_code)

        return on_call


def is_program(path: str, extra: tuple[str, ...] = ()) -> bool:
    """Whether `path` is one of the program's own files: outside the Python installation and the simulator, or
    under one of the `extra` folders."""
    if any(path.startswith(prefix) for prefix in extra):
        return True
    if path.startswith("<") or path.startswith(_SIM_DIR):
        return False
    return not path.startswith(_INSTALLATION)
