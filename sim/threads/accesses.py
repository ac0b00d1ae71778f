"""What each line of a thread touches: the reads and writes a partial-order search (`strategies/dpor.py`) needs.

Why here: DPOR reorders only steps that conflict, so it must know, for every step, which objects it read and
wrote. CPython shows a tracer lines and opcodes, not the objects on its value stack; so the tracer follows
the line's bytecode itself, from the frame's locals, globals and constants, with a small stack of the values
it can know (a value it cannot know is unknown): `state["balance"] = x` is a write of the item "balance" of
the object in `state`. What counts as an access: an item or attribute of an object (read or written), a
global or closure variable, a builtin container's method (a read, or a write of the whole container), an
iteration over a container. A call into Python code is left to the callee's own lines, and the line goes on
when the call returns (the frame traces opcodes for that moment, and the callee's return value is known);
a branch the tracer cannot decide is followed the same way. An item or attribute written on a value it
cannot know is a wildcard, which conflicts with everything (sound, if coarse); so is an opcode it does not
model. A line that only adds a constant to an int counter and stores it back (`counts[key] += 1`,
`state[key] = state.get(key, 0) + 1`, `self.count += 1`, a global's `n += 1`) is an increment of it (`dpor.ADD`),
which commutes with another increment: no other thread can run between the line's read and its write.

The scheduling points are those of `preemption="lines"`: every line of the program's files, so a run traced
this way makes the very same decisions as one that is not, and replays and shrinks as any run does. Lock,
SQLite, start and join accesses come from those primitives (`locks.py`, `sqlite.py`, `lifecycle.py`).
Bytecode as of CPython 3.11; an opcode of a later version that is not modelled is a wildcard.
"""

from __future__ import annotations

import collections
import dis
import operator
from collections.abc import Callable
from types import BuiltinFunctionType, CodeType, FrameType, FunctionType, MethodType, ModuleType
from typing import TYPE_CHECKING, Any

from sim.strategies.dpor import ADD

if TYPE_CHECKING:
    from sim.threads.baton import SimThread
    from sim.threads.run import ThreadRun

UNKNOWN = object()  # a stack value the tracer cannot know
_NULL = object()  # the NULL CPython pushes below a plain function
_CONTAINERS = (list, dict, set, collections.deque, bytearray, collections.OrderedDict, collections.defaultdict)
_SIMPLE = (int, float, str, bytes, bool, type(None))
_STATIC = (FunctionType, type, ModuleType, BuiltinFunctionType)  # globals that name code, not shared state
_READ_METHODS = frozenset({"get", "keys", "values", "items", "copy", "count", "index", "__contains__", "__getitem__",
                           "__len__", "__iter__", "issubset", "issuperset", "isdisjoint", "union", "intersection",
                           "difference", "symmetric_difference"})
_KEYED_METHODS = frozenset({"get", "pop", "setdefault", "__getitem__", "__setitem__", "__delitem__", "__contains__"})
_COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge}
_POP_JUMPS = {"POP_JUMP_FORWARD_IF_FALSE": False, "POP_JUMP_BACKWARD_IF_FALSE": False,
              "POP_JUMP_FORWARD_IF_TRUE": True, "POP_JUMP_BACKWARD_IF_TRUE": True,
              "POP_JUMP_IF_FALSE": False, "POP_JUMP_IF_TRUE": True}
_NONE_JUMPS = {"POP_JUMP_FORWARD_IF_NONE": True, "POP_JUMP_BACKWARD_IF_NONE": True, "POP_JUMP_IF_NONE": True,
               "POP_JUMP_FORWARD_IF_NOT_NONE": False, "POP_JUMP_BACKWARD_IF_NOT_NONE": False, "POP_JUMP_IF_NOT_NONE": False}
_NOTHING = frozenset({"NOP", "RESUME", "PRECALL", "KW_NAMES", "CACHE", "EXTENDED_ARG", "MAKE_CELL", "COPY_FREE_VARS",
                      "DELETE_FAST", "SETUP_ANNOTATIONS"})
_STOPS = frozenset({"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "YIELD_VALUE", "PUSH_EXC_INFO",
                    "POP_EXCEPT", "CHECK_EXC_MATCH", "WITH_EXCEPT_START", "RETURN_GENERATOR", "SEND", "END_ASYNC_FOR",
                    "CLEANUP_THROW", "INTERPRETER_EXIT", "LOAD_ASSERTION_ERROR"})
_INPLACE = 13  # BINARY_OP's first in-place operator (NB_INPLACE_ADD)
_CELLS: dict[str, tuple[str, str]] = {}  # one object per closure variable name: cells are known by name

# opname, arg, argval, next offset, jump target, starts a line, its handler (see _HANDLERS), its own offset
Instruction = tuple[str, int, Any, int, int, bool, Callable[["FrameWatch", Any], int], int]


class _Method:
    """A builtin container's method looked up on the stack (LOAD_METHOD): what the call will read or write."""

    __slots__ = ("container", "name")

    def __init__(self, container: Any, name: str) -> None:
        self.container = container
        self.name = name


class _Iter:
    """An iterator over a container (GET_ITER): each step of the loop reads the container."""

    __slots__ = ("source",)

    def __init__(self, source: Any) -> None:
        self.source = source


_TABLES: dict[CodeType, dict[int, Instruction]] = {}


class Increment:
    """A line that starts with a counter's increment: what it adds to (`kind`: "item", "get", "attr" or "global",
    the local holding the owner, the key or name) and the offset where the rest of the line goes on."""

    __slots__ = ("kind", "owner", "name", "end", "cell")

    def __init__(self, kind: str, owner: str, name: Any, end: int, cell: bool) -> None:
        self.kind = kind
        self.owner = owner
        self.name = name
        self.end = end
        self.cell = cell  # the owner is a closure variable: the line reads it too


# The bytecode of each increment (CPython 3.11): opnames (separated by |) and what the argument must be. "$x"
# binds the argument's value (the same name must bind the same value), "#" an int constant, a set the BINARY_OP
# operators allowed (+ and -, plain or in place), None anything.
_PLUS, _PLUS_IN_PLACE = {0, 10}, {13, 23}
_OWNER = "LOAD_FAST|LOAD_DEREF"  # the owner is a local or a closure variable
_INCREMENT_SHAPES: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = (
    ("get", ((_OWNER, "$owner"), ("LOAD_METHOD", "get"), ("LOAD_CONST", "$name"), ("LOAD_CONST", "#"),
             ("PRECALL", None), ("CALL", None), ("LOAD_CONST", "#"), ("BINARY_OP", _PLUS), (_OWNER, "$owner"),
             ("LOAD_CONST", "$name"), ("STORE_SUBSCR", None))),
    ("item", ((_OWNER, "$owner"), ("LOAD_CONST", "$name"), ("COPY", None), ("COPY", None), ("BINARY_SUBSCR", None),
              ("LOAD_CONST", "#"), ("BINARY_OP", _PLUS_IN_PLACE), ("SWAP", None), ("SWAP", None), ("STORE_SUBSCR", None))),
    ("item", ((_OWNER, "$owner"), ("LOAD_CONST", "$name"), ("BINARY_SUBSCR", None), ("LOAD_CONST", "#"),
              ("BINARY_OP", _PLUS), (_OWNER, "$owner"), ("LOAD_CONST", "$name"), ("STORE_SUBSCR", None))),
    ("attr", ((_OWNER, "$owner"), ("COPY", None), ("LOAD_ATTR", "$name"), ("LOAD_CONST", "#"),
              ("BINARY_OP", _PLUS_IN_PLACE), ("SWAP", None), ("STORE_ATTR", "$name"))),
    ("global", (("LOAD_GLOBAL", "$name"), ("LOAD_CONST", "#"), ("BINARY_OP", _PLUS_IN_PLACE), ("STORE_GLOBAL", "$name"))),
)
_INCREMENTS: dict[CodeType, dict[int, Increment]] = {}


def _increments(code: CodeType) -> dict[int, Increment]:
    """The lines of the code that start with an increment, by their first offset (found once per code object)."""
    found = _INCREMENTS.get(code)
    if found is None:
        listed = list(dis.get_instructions(code))
        found = _INCREMENTS[code] = {}
        for index, instruction in enumerate(listed):
            if instruction.starts_line is not None:
                for kind, shape in _INCREMENT_SHAPES:
                    increment = _match_increment(kind, shape, listed[index:])
                    if increment is not None:
                        found[instruction.offset] = increment
                        break
    return found


def _match_increment(kind: str, shape: tuple[tuple[str, Any], ...], listed: list[dis.Instruction]) -> Increment | None:
    if len(listed) <= len(shape) or any(instruction.starts_line is not None for instruction in listed[1:len(shape)]):
        return None
    bound: dict[str, Any] = {}
    for (opname, wanted), instruction in zip(shape, listed):
        value = instruction.argval
        if instruction.opname not in opname.split("|"):
            return None
        if isinstance(wanted, set):
            if instruction.arg not in wanted:
                return None
        elif wanted == "#":
            if type(value) is not int:
                return None
        elif isinstance(wanted, str) and wanted.startswith("$"):
            if bound.setdefault(wanted, value) != value or type(bound[wanted]) is not type(value):
                return None
        elif wanted is not None and value != wanted:
            return None
    if kind == "global" and listed[0].arg is not None and listed[0].arg & 1:
        return None  # LOAD_GLOBAL that also pushes NULL: a call's, not a value's
    if kind in ("get", "item") and _part(bound["$name"]) is None:
        return None
    return Increment(kind, bound.get("$owner", ""), bound["$name"], listed[len(shape)].offset, listed[0].opname == "LOAD_DEREF")


def _table(code: CodeType) -> dict[int, Instruction]:
    """The code's instructions by offset (made once per code object)."""
    table = _TABLES.get(code)
    if table is None:
        listed = list(dis.get_instructions(code))
        table = {}
        for index, instruction in enumerate(listed):
            following = listed[index + 1].offset if index + 1 < len(listed) else -1
            target = instruction.argval if instruction.opcode in dis.hasjrel or instruction.opcode in dis.hasjabs else -1
            table[instruction.offset] = (instruction.opname, instruction.arg or 0, instruction.argval, following,
                                         target, instruction.starts_line is not None,
                                         _HANDLERS.get(instruction.opname, _unmodelled), instruction.offset)
        _TABLES[code] = table
    return table


def _part(key: Any) -> Any:
    """An item's key as part of an access: a plain value compares as itself, anything else means the whole object."""
    if type(key) in _SIMPLE:
        return key
    if type(key) is tuple and all(type(item) in _SIMPLE for item in key):
        return key
    return None


def _item_part(container: Any, key: Any) -> Any:
    """The part an item access touches: a mapping's key; of a sequence the whole (`items[-1]` is `items[2]`)."""
    return _part(key) if isinstance(container, dict) or container is UNKNOWN else None


def _truth(value: Any) -> bool | None:
    """The truth of a value the tracer may test without running program code, else None."""
    if value is UNKNOWN or value is _NULL:
        return None
    if type(value) in _SIMPLE or type(value) in _CONTAINERS or type(value) is tuple:
        return bool(value)
    return None


class FrameWatch:
    """The local tracer of one frame of the program: a scheduling point at each line, then the line's accesses."""

    __slots__ = ("run", "sim", "table", "increments", "stack", "next", "paused", "paused_at", "start", "returned",
                 "capture", "_locals", "_copied", "_frame")

    def __init__(self, run: ThreadRun, sim: SimThread, code: CodeType) -> None:
        self.run = run
        self.sim = sim
        self.table = _table(code)
        self.increments = _increments(code)
        self.stack: list[Any] = []
        self.next = -1  # the offset the stack is valid at, -1 when the tracer lost the thread of execution
        self.paused: Instruction | None = None  # a call or branch whose outcome the next opcode event shows
        self.paused_at = -1  # its offset: opcode events from `start` up to it are the evaluated stretch itself
        self.start = -1  # where the last evaluation began
        self.returned: Any = UNKNOWN  # what the call paused at returned, if its callee was traced
        self.capture = False  # whether the paused call's callee is a plain function, whose return is its value
        self._locals: dict[str, Any] | None = None  # the frame's locals, read for the length of `_evaluate`
        self._copied = False  # whether `_locals` is the line's own copy (it stored a local)
        self._frame: FrameType | None = None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> FrameWatch | None:
        if event == "line":
            self.run.checkpoint(self.sim)
            if self.paused is not None:
                frame.f_trace_opcodes = False
                self.paused = None
            if not self.run.shared:  # the only thread so far: nothing it touches can race
                self.next = -1
                return self
            offset = frame.f_lasti
            if offset != self.next:
                self.stack = []
            self._evaluate(frame, offset)
        elif event == "opcode" and self.paused is not None and not self.start <= frame.f_lasti <= self.paused_at:
            self._resume(frame)  # the paused instruction has run (events up to it are the line's own)
        elif event == "return":
            caller = frame.f_back
            watch = caller.f_trace if caller is not None else None
            if type(watch) is FrameWatch and watch.paused is not None and watch.capture:
                watch.returned = arg  # the value of the call the caller paused at (a plain function's frame)
        return self

    # ---- following the bytecode ---------------------------------------------------------------------

    def _resume(self, frame: FrameType) -> None:
        """The paused call or branch is over: take its outcome off where the frame now is, and go on."""
        paused = self.paused
        assert paused is not None
        frame.f_trace_opcodes = False
        self.paused = None
        opname, _, _, following, target, _, _, _ = paused
        offset = frame.f_lasti
        stack = self.stack
        if opname == "CALL":
            if offset == following:
                stack.append(self.returned)
            else:
                stack.clear()  # it raised: a handler runs now
        elif opname == "FOR_ITER":
            if offset == following:
                stack.append(UNKNOWN)
            elif stack:
                stack.pop()
        elif opname in ("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"):
            if offset != target and stack:
                stack.pop()
        self._evaluate(frame, offset)

    def _pause(self, instruction: Instruction) -> int:
        """Stop following until the next opcode event shows what the instruction did."""
        self.capture = False
        self.paused = instruction
        self.paused_at = instruction[7]
        self.returned = UNKNOWN
        self._frame.f_trace_opcodes = True  # type: ignore[union-attr]  # set for the length of _evaluate
        return -1

    def _evaluate(self, frame: FrameType, offset: int) -> None:
        """Follow the bytecode from `offset` to the end of the line (or a pause), recording each access."""
        self._locals = None
        self._copied = False
        self._frame = frame
        table = self.table
        increment = self.increments.get(offset) if self.increments else None
        if increment is not None and self._counted(increment):
            self.stack = []
            offset = increment.end
            if table[offset][5]:
                self.next = offset
                self._frame = None
                return
        self.start = offset
        instruction = table.get(offset)
        while instruction is not None:
            following = instruction[6](self, instruction)
            if following < offset:
                offset = following
                break  # a jump back (or a stop, -1): CPython reports a line there, where the evaluation goes on
            offset = following
            instruction = table.get(offset)
            if instruction is not None and instruction[5]:
                break  # the next line
        self.next = offset
        self._frame = None

    def _call(self, instruction: Instruction) -> int:
        """CALL: a builtin container's method or a builtin function is an access here; Python code is its own."""
        stack = self.stack
        arguments = _pop_many(stack, instruction[1])
        second = stack.pop() if stack else UNKNOWN
        first = stack.pop() if stack else UNKNOWN
        function = second if first is _NULL else first
        if type(function) is _Method:
            stack.append(self._container_method(function, arguments))
            return instruction[3]
        if type(function) is BuiltinFunctionType and first is _NULL:
            for argument in arguments:
                self._read_whole(argument)
            known = function is len and len(arguments) == 1 and type(arguments[0]) in (*_CONTAINERS, tuple, str)
            stack.append(len(arguments[0]) if known else UNKNOWN)
            return instruction[3]
        following = self._pause(instruction)
        # Only a plain function's own frame returns the call's value: a C callable may call back into the
        # program (a generator `list` drains), whose frames return other values to this one.
        self.capture = type(function) in (FunctionType, MethodType)
        return following

    def _jump_if(self, instruction: Instruction, truth: bool | None, when: bool) -> int:
        """A conditional jump on a value the tracer tested: followed, or a pause when it cannot tell."""
        if truth is None:
            return self._pause(instruction)
        return instruction[4] if truth == when else instruction[3]

    def _container_method(self, method: _Method, arguments: list[Any]) -> Any:
        container, name = method.container, method.name
        keyed = name in _KEYED_METHODS and isinstance(container, dict) and arguments
        part = _part(arguments[0]) if keyed else None
        reading = name in _READ_METHODS
        self._touch(container, part, not reading)
        if name == "get" and isinstance(container, dict) and part is not None:
            return container.get(*arguments) if UNKNOWN not in arguments else UNKNOWN
        return UNKNOWN

    def _load_attribute(self, opname: str, name: str) -> None:
        stack = self.stack
        owner = stack.pop() if stack else UNKNOWN
        if type(owner) is ModuleType:
            if opname == "LOAD_METHOD":
                stack.append(_NULL)
            stack.append(getattr(owner, name, UNKNOWN))
            return
        if opname == "LOAD_METHOD" and type(owner) in _CONTAINERS:
            stack.extend((_Method(owner, name), owner))
            return
        if owner is not UNKNOWN:
            self._touch(owner, ("attr", name), False)
        attributes = getattr(owner, "__dict__", None) if owner is not UNKNOWN else None
        value = attributes.get(name, UNKNOWN) if type(attributes) is dict else UNKNOWN
        if opname == "LOAD_METHOD":
            stack.extend((value, owner) if value is UNKNOWN else (_NULL, value))
        else:
            stack.append(value)

    def _counted(self, increment: Increment) -> bool:
        """Record the line's increment, if what it adds to is an int of a plain dict, instance or module (a
        subclass, a property or a float may do more than add, and is followed opcode by opcode instead)."""
        name = increment.name
        if increment.kind == "global":
            owner: Any = self._frame.f_globals  # type: ignore[union-attr]  # set for the length of _evaluate
            value, part = owner.get(name), name
        else:
            owner = self._local(increment.owner)
            if increment.kind == "attr":
                attributes = getattr(owner, "__dict__", None)
                kind = type(owner)
                plain = (type(attributes) is dict and kind.__setattr__ is object.__setattr__
                         and kind.__getattribute__ is object.__getattribute__
                         and not hasattr(type(getattr(kind, name, None)), "__set__"))
                value, part = (attributes.get(name) if plain else None), ("attr", name)  # type: ignore[union-attr]  # a dict when plain
            elif type(owner) is not dict:
                return False
            else:
                value, part = (owner.get(name, 0) if increment.kind == "get" else owner.get(name)), name
        if type(value) is not int:
            return False
        if increment.cell:
            self._touch(_cell(increment.owner), None, False)
        self.run.touch(self.sim, owner, part, ADD)
        return True

    # ---- values and accesses ------------------------------------------------------------------------

    def _local(self, name: str) -> Any:
        if self._locals is None:
            self._locals = self._frame.f_locals  # type: ignore[union-attr]  # set for the length of _evaluate
        return self._locals.get(name, UNKNOWN)

    def _store_local(self, name: str, value: Any) -> None:
        """The line's store, in a copy of the frame's locals made at its first: CPython writes the frame's own
        dict back into its variables when the tracer returns, and a value here may be unknown."""
        if not self._copied:
            self._locals = dict(self._frame.f_locals if self._locals is None else self._locals)  # type: ignore[union-attr]  # set for the length of _evaluate
            self._copied = True
        self._locals[name] = value  # type: ignore[index]  # the copy just made

    def _global(self, name: str) -> Any:
        frame = self._frame
        assert frame is not None
        scope = frame.f_globals
        value = scope.get(name, UNKNOWN)
        if value is UNKNOWN:
            return frame.f_builtins.get(name, UNKNOWN)
        if not isinstance(value, _STATIC):
            self._touch(scope, name, False)
        return value

    def _touch(self, target: Any, part: Any, write: bool) -> None:
        if target is UNKNOWN or target is _NULL:
            if write or part is not None:
                self.run.touch_everything(self.sim)
            return
        if type(target) in _SIMPLE or type(target) is tuple and target not in _CELLS.values():
            return  # immutable: nothing another thread can change
        self.run.touch(self.sim, target, part, write)

    def _test(self, value: Any) -> bool | None:
        """A truth test: of a container it reads its length."""
        self._read_whole(value)
        return _truth(value)

    def _read_whole(self, value: Any) -> None:
        if type(value) in _CONTAINERS:
            self.run.touch(self.sim, value, None, False)


def _pop(stack: list[Any]) -> Any:
    """The top of the known stack, or unknown where the tracer came in below what it knows."""
    return stack.pop() if stack else UNKNOWN


def _pop_many(stack: list[Any], count: int) -> list[Any]:
    """The top `count` values of the known stack, deepest first, unknown below what it knows."""
    if count == 0:
        return []
    known = len(stack)
    if known >= count:
        taken = stack[known - count:]
        del stack[known - count:]
        return taken
    taken = [UNKNOWN] * (count - known) + stack
    stack.clear()
    return taken


def _item(container: Any, key: Any) -> Any:
    """`container[key]` where that runs no program code (a builtin container, a plain key), else unknown."""
    if type(container) not in (dict, list, tuple, collections.OrderedDict) or _part(key) is None:
        return UNKNOWN
    try:
        return container[key]
    except (KeyError, IndexError, TypeError):
        return UNKNOWN


def _cell(name: str) -> tuple[str, str]:
    """The object that stands for every closure variable of this name (cells are not reachable from a frame)."""
    cell = _CELLS.get(name)
    if cell is None:
        cell = _CELLS[name] = ("cell", name)
    return cell


# ---- one handler per opcode: the instruction on the known stack; each returns the next offset, or -1 to stop ----

Handler = Callable[[FrameWatch, Instruction], int]


def _nothing(watch: FrameWatch, instruction: Instruction) -> int:
    return instruction[3]


def _stop(watch: FrameWatch, instruction: Instruction) -> int:
    return -1


def _unmodelled(watch: FrameWatch, instruction: Instruction) -> int:
    """An opcode the tracer does not follow: the step may touch anything, and the stack is lost."""
    watch.run.touch_everything(watch.sim)
    watch.stack = []
    return -1


def _load_fast(watch: FrameWatch, instruction: Instruction) -> int:
    watch.stack.append(watch._local(instruction[2]))
    return instruction[3]


def _load_const(watch: FrameWatch, instruction: Instruction) -> int:
    watch.stack.append(instruction[2])
    return instruction[3]


def _store_fast(watch: FrameWatch, instruction: Instruction) -> int:
    stack = watch.stack
    watch._store_local(instruction[2], stack.pop() if stack else UNKNOWN)
    return instruction[3]


def _load_global(watch: FrameWatch, instruction: Instruction) -> int:
    if instruction[1] & 1:
        watch.stack.append(_NULL)
    watch.stack.append(watch._global(instruction[2]))
    return instruction[3]


def _store_global(watch: FrameWatch, instruction: Instruction) -> int:
    if instruction[0] == "STORE_GLOBAL":
        _pop(watch.stack)
    watch._touch(watch._frame.f_globals, instruction[2], True)  # type: ignore[union-attr]  # set for the length of _evaluate
    return instruction[3]


def _load_deref(watch: FrameWatch, instruction: Instruction) -> int:
    watch._touch(_cell(instruction[2]), None, False)
    watch.stack.append(watch._local(instruction[2]))
    return instruction[3]


def _store_deref(watch: FrameWatch, instruction: Instruction) -> int:
    value = _pop(watch.stack) if instruction[0] == "STORE_DEREF" else UNKNOWN
    watch._touch(_cell(instruction[2]), None, True)
    watch._store_local(instruction[2], value)
    return instruction[3]


def _make_function(watch: FrameWatch, instruction: Instruction) -> int:
    for _ in range(1 + bin(instruction[1] & 0x0F).count("1")):  # the code, then one per flag
        _pop(watch.stack)
    watch.stack.append(UNKNOWN)
    return instruction[3]


def _push_unknown(watch: FrameWatch, instruction: Instruction) -> int:
    watch.stack.append(UNKNOWN)
    return instruction[3]


def _push_null(watch: FrameWatch, instruction: Instruction) -> int:
    watch.stack.append(_NULL)
    return instruction[3]


def _pop_top(watch: FrameWatch, instruction: Instruction) -> int:
    _pop(watch.stack)
    return instruction[3]


def _copy(watch: FrameWatch, instruction: Instruction) -> int:
    stack, depth = watch.stack, instruction[1]
    stack.append(stack[-depth] if len(stack) >= depth else UNKNOWN)
    return instruction[3]


def _swap(watch: FrameWatch, instruction: Instruction) -> int:
    stack, depth = watch.stack, instruction[1]
    while len(stack) < depth:
        stack.insert(0, UNKNOWN)
    stack[-1], stack[-depth] = stack[-depth], stack[-1]
    return instruction[3]


def _load_attribute(watch: FrameWatch, instruction: Instruction) -> int:
    watch._load_attribute(instruction[0], instruction[2])
    return instruction[3]


def _store_attribute(watch: FrameWatch, instruction: Instruction) -> int:
    owner = _pop(watch.stack)
    if instruction[0] == "STORE_ATTR":
        _pop(watch.stack)
    watch._touch(owner, ("attr", instruction[2]), True)
    return instruction[3]


def _binary_subscript(watch: FrameWatch, instruction: Instruction) -> int:
    stack = watch.stack
    key, container = _pop(stack), _pop(stack)
    watch._touch(container, _item_part(container, key), False)
    stack.append(_item(container, key))
    return instruction[3]


def _store_subscript(watch: FrameWatch, instruction: Instruction) -> int:
    stack = watch.stack
    key, container = _pop(stack), _pop(stack)
    if instruction[0] == "STORE_SUBSCR":
        _pop(stack)
    watch._touch(container, _item_part(container, key), True)
    return instruction[3]


def _contains(watch: FrameWatch, instruction: Instruction) -> int:
    stack = watch.stack
    container, item = _pop(stack), _pop(stack)
    keyed = type(container) in (dict, set, collections.OrderedDict, collections.defaultdict)
    part = _part(item) if keyed else None
    watch._touch(container, part, False)
    stack.append(UNKNOWN if part is None else (item in container) != bool(instruction[1]))
    return instruction[3]


def _is(watch: FrameWatch, instruction: Instruction) -> int:
    stack = watch.stack
    right, left = _pop(stack), _pop(stack)
    known = left is not UNKNOWN and right is not UNKNOWN
    stack.append((left is right) != bool(instruction[1]) if known else UNKNOWN)
    return instruction[3]


def _compare(watch: FrameWatch, instruction: Instruction) -> int:
    stack = watch.stack
    right, left = _pop(stack), _pop(stack)
    watch._read_whole(left)
    watch._read_whole(right)
    compare = _COMPARE.get(instruction[2])
    simple = compare is not None and type(left) in _SIMPLE and type(right) in _SIMPLE
    stack.append(compare(left, right) if simple else UNKNOWN)  # type: ignore[misc]  # simple: compare is set
    return instruction[3]


def _binary(watch: FrameWatch, instruction: Instruction) -> int:
    stack = watch.stack
    _pop(stack)
    left = _pop(stack)
    if instruction[1] >= _INPLACE and type(left) in _CONTAINERS:  # `items += more` changes the list itself
        watch._touch(left, None, True)
    stack.append(UNKNOWN)
    return instruction[3]


def _unary(watch: FrameWatch, instruction: Instruction) -> int:
    value = _pop(watch.stack)
    truth = watch._test(value) if instruction[0] == "UNARY_NOT" else None
    watch.stack.append(UNKNOWN if truth is None else not truth)
    return instruction[3]


def _build(watch: FrameWatch, instruction: Instruction) -> int:
    stack = watch.stack
    items = [_pop(stack) for _ in range(instruction[1])][::-1]
    known = instruction[0] == "BUILD_TUPLE" and UNKNOWN not in items
    stack.append(tuple(items) if known else UNKNOWN)
    return instruction[3]


def _build_map(watch: FrameWatch, instruction: Instruction) -> int:
    for _ in range(2 * instruction[1] if instruction[0] == "BUILD_MAP" else instruction[1] + 1):
        _pop(watch.stack)
    watch.stack.append(UNKNOWN)
    return instruction[3]


def _read_popped(watch: FrameWatch, instruction: Instruction) -> int:
    """LIST_APPEND, LIST_EXTEND, ...: the popped iterable is read (the target is a new container)."""
    watch._read_whole(_pop(watch.stack))
    return instruction[3]


def _map_add(watch: FrameWatch, instruction: Instruction) -> int:
    _pop(watch.stack)
    _pop(watch.stack)
    return instruction[3]


def _to_tuple(watch: FrameWatch, instruction: Instruction) -> int:
    stack = watch.stack
    value = _pop(stack) if instruction[0] == "LIST_TO_TUPLE" else stack[-1] if stack else UNKNOWN
    stack.append(UNKNOWN)
    watch._read_whole(value)
    return instruction[3]


def _format(watch: FrameWatch, instruction: Instruction) -> int:
    if instruction[1] & 0x04:  # with a format spec
        _pop(watch.stack)
    _pop(watch.stack)
    watch.stack.append(UNKNOWN)
    return instruction[3]


def _unpack(watch: FrameWatch, instruction: Instruction) -> int:
    value, count = _pop(watch.stack), instruction[1]
    watch._read_whole(value)
    known = type(value) in (tuple, list) and len(value) == count
    watch.stack.extend(reversed(value) if known else [UNKNOWN] * count)
    return instruction[3]


def _get_iter(watch: FrameWatch, instruction: Instruction) -> int:
    value = _pop(watch.stack)
    watch._read_whole(value)
    watch.stack.append(UNKNOWN if value is UNKNOWN else _Iter(value if type(value) in _CONTAINERS else None))
    return instruction[3]


def _for_iter(watch: FrameWatch, instruction: Instruction) -> int:
    iterator = watch.stack[-1] if watch.stack else UNKNOWN
    if type(iterator) is _Iter and iterator.source is not None:
        watch._touch(iterator.source, None, False)
    return watch._pause(instruction)  # whether it is exhausted shows where the frame goes next


def _before_with(watch: FrameWatch, instruction: Instruction) -> int:
    _pop(watch.stack)
    watch.stack.extend((UNKNOWN, UNKNOWN))  # __exit__ and what __enter__ returned
    return instruction[3]


def _call(watch: FrameWatch, instruction: Instruction) -> int:
    return watch._call(instruction)


def _jump(watch: FrameWatch, instruction: Instruction) -> int:
    return instruction[4]


def _pop_jump(watch: FrameWatch, instruction: Instruction) -> int:
    return watch._jump_if(instruction, watch._test(_pop(watch.stack)), _POP_JUMPS[instruction[0]])


def _none_jump(watch: FrameWatch, instruction: Instruction) -> int:
    value = _pop(watch.stack)
    return watch._jump_if(instruction, None if value is UNKNOWN else value is None, _NONE_JUMPS[instruction[0]])


def _jump_or_pop(watch: FrameWatch, instruction: Instruction) -> int:
    stack = watch.stack
    truth = watch._test(stack[-1] if stack else UNKNOWN)
    if truth is None:
        return watch._pause(instruction)
    if truth == (instruction[0] == "JUMP_IF_TRUE_OR_POP"):
        return instruction[4]
    stack.pop()
    return instruction[3]


_HANDLERS: dict[str, Handler] = {
    **dict.fromkeys(_NOTHING, _nothing), **dict.fromkeys(_STOPS, _stop),
    "LOAD_FAST": _load_fast, "LOAD_FAST_CHECK": _load_fast, "LOAD_CONST": _load_const, "STORE_FAST": _store_fast,
    "LOAD_GLOBAL": _load_global, "STORE_GLOBAL": _store_global, "DELETE_GLOBAL": _store_global,
    "LOAD_DEREF": _load_deref, "LOAD_CLASSDEREF": _load_deref, "STORE_DEREF": _store_deref, "DELETE_DEREF": _store_deref,
    "MAKE_FUNCTION": _make_function, "LOAD_CLOSURE": _push_unknown, "PUSH_NULL": _push_null, "POP_TOP": _pop_top,
    "COPY": _copy, "SWAP": _swap, "LOAD_ATTR": _load_attribute, "LOAD_METHOD": _load_attribute,
    "STORE_ATTR": _store_attribute, "DELETE_ATTR": _store_attribute, "BINARY_SUBSCR": _binary_subscript,
    "STORE_SUBSCR": _store_subscript, "DELETE_SUBSCR": _store_subscript, "CONTAINS_OP": _contains, "IS_OP": _is,
    "COMPARE_OP": _compare, "BINARY_OP": _binary, "UNARY_NOT": _unary, "UNARY_NEGATIVE": _unary,
    "UNARY_POSITIVE": _unary, "UNARY_INVERT": _unary,
    **dict.fromkeys(("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_STRING", "BUILD_SLICE"), _build),
    "BUILD_MAP": _build_map, "BUILD_CONST_KEY_MAP": _build_map,
    **dict.fromkeys(("LIST_APPEND", "SET_ADD", "LIST_EXTEND", "SET_UPDATE", "DICT_UPDATE", "DICT_MERGE"), _read_popped),
    "MAP_ADD": _map_add, "LIST_TO_TUPLE": _to_tuple, "GET_LEN": _to_tuple, "FORMAT_VALUE": _format,
    "UNPACK_SEQUENCE": _unpack, "GET_ITER": _get_iter, "FOR_ITER": _for_iter, "BEFORE_WITH": _before_with,
    "CALL": _call, **dict.fromkeys(("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP"), _jump),
    **dict.fromkeys(_POP_JUMPS, _pop_jump), **dict.fromkeys(_NONE_JUMPS, _none_jump),
    "JUMP_IF_TRUE_OR_POP": _jump_or_pop, "JUMP_IF_FALSE_OR_POP": _jump_or_pop,
}
