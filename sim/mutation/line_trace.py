"""Which lines of the reference a stretch of this process executes, by the standard library's line tracer.

`LineTrace` records, per window (`into`), the lines of the files under one folder that Python reports as
executed. Frames of any other file get no line tracer, so the simulator's own code costs one call per frame;
a whole catalogue pass takes about twice as long traced as untraced.

A process-wide cache (`functools.cache`) would let only the first scenario in a process run the body it
caches, and a mutant that edits that body would then be charged to that scenario alone: `forget_caches`
empties every such cache of the given packages, so each window runs them as a process of its own would.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

Lines = dict[str, set[int]]  # repository-relative file -> executed line numbers
Tracer = Callable[[FrameType, str, Any], Any]


class LineTrace:
    """Executed lines of the `.py` files under `folder` (named relative to `root`), one set per window."""

    def __init__(self, root: Path, folder: str) -> None:
        self._prefix = str(root / folder) + "/"
        self._root_length = len(str(root)) + 1
        self._window: Lines = {}
        self._tracers: dict[str, Tracer | None] = {}  # by code file name: None for files outside the folder

    def start(self) -> None:
        sys.settrace(self._on_call)
        threading.settrace(self._on_call)

    def stop(self) -> None:
        sys.settrace(None)
        threading.settrace(None)

    @contextmanager
    def into(self, lines: Lines) -> Iterator[Lines]:
        """Record into `lines` for the length of the block (then into the window before it)."""
        before, self._window = self._window, lines
        self._tracers.clear()  # a file's tracer writes into the window it was made for
        try:
            yield lines
        finally:
            self._window = before
            self._tracers.clear()

    def _on_call(self, frame: FrameType, event: str, arg: Any) -> Tracer | None:
        filename = frame.f_code.co_filename
        try:
            return self._tracers[filename]
        except KeyError:
            tracer = self._tracer_for(filename[self._root_length:]) if filename.startswith(self._prefix) else None
            self._tracers[filename] = tracer
            return tracer

    def _tracer_for(self, file: str) -> Tracer:
        add = self._window.setdefault(file, set()).add

        def on_line(frame: FrameType, event: str, arg: Any) -> Tracer:
            if event == "line":
                add(frame.f_lineno)
            return on_line

        return on_line


def forget_caches(packages: tuple[str, ...]) -> None:
    """Empty every `functools.cache` of the loaded modules of `packages` (and of their classes)."""
    modules: list[tuple[str, ModuleType | None]] = list(sys.modules.items())  # None: an import blocked
    for name, module in modules:
        if module is None or name.split(".")[0] not in packages:
            continue
        for value in list(vars(module).values()):
            for member in [value, *(vars(value).values() if isinstance(value, type) else ())]:
                if callable(getattr(member, "cache_clear", None)) and hasattr(member, "cache_info"):
                    member.cache_clear()
