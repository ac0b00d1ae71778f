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
model.

The scheduling points are those of `preemption="lines"`: every line of the program's files, so a run traced
this way makes the very same decisions as one that is not, and replays and shrinks as any run does. Lock,
SQLite, start and join accesses come from those primitives (`locks.py`, `sqlite.py`, `lifecycle.py`).
Bytecode as of CPython 3.11; an opcode of a later version that is not modelled is a wildcard.
"""

from __future__ import annotations

import collections
import dis
import operator
from types import BuiltinFunctionType, CodeType, FrameType, FunctionType, ModuleType
from typing import TYPE_CHECKING, Any

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

Instruction = tuple[str, int, Any, int, int, bool]  # opname, arg, argval, next offset, jump target, starts a line


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
                                         target, instruction.starts_line is not None)
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

    __slots__ = ("run", "sim", "table", "stack", "next", "paused", "paused_at", "start", "returned", "_locals", "_frame")

    def __init__(self, run: ThreadRun, sim: SimThread, code: CodeType) -> None:
        self.run = run
        self.sim = sim
        self.table = _table(code)
        self.stack: list[Any] = []
        self.next = -1  # the offset the stack is valid at, -1 when the tracer lost the thread of execution
        self.paused: Instruction | None = None  # a call or branch whose outcome the next opcode event shows
        self.paused_at = -1  # its offset: opcode events from `start` up to it are the evaluated stretch itself
        self.start = -1  # where the last evaluation began
        self.returned: Any = UNKNOWN  # what the call paused at returned, if its callee was traced
        self._locals: dict[str, Any] | None = None
        self._frame: FrameType | None = None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> FrameWatch | None:
        if event == "line":
            self.run.checkpoint(self.sim)
            if self.paused is not None:
                frame.f_trace_opcodes = False
                self.paused = None
            offset = frame.f_lasti
            if offset != self.next:
                self.stack = []
            self._evaluate(frame, offset)
        elif event == "opcode" and self.paused is not None and not self.start <= frame.f_lasti <= self.paused_at:
            self._resume(frame)  # the paused instruction has run (events up to it are the line's own)
        elif event == "return":
            caller = frame.f_back
            watch = caller.f_trace if caller is not None else None
            if type(watch) is FrameWatch and watch.paused is not None:
                watch.returned = arg
        return self

    # ---- following the bytecode ---------------------------------------------------------------------

    def _resume(self, frame: FrameType) -> None:
        """The paused call or branch is over: take its outcome off where the frame now is, and go on."""
        paused = self.paused
        assert paused is not None
        frame.f_trace_opcodes = False
        self.paused = None
        opname, _, _, following, target, _ = paused
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

    def _pause(self, frame: FrameType, instruction: Instruction) -> None:
        self.paused = instruction
        self.returned = UNKNOWN
        frame.f_trace_opcodes = True

    def _evaluate(self, frame: FrameType, offset: int) -> None:
        """Follow the bytecode from `offset` to the end of the line (or a pause), recording each access."""
        self._locals = None
        self._frame = frame
        self.start = offset
        table = self.table
        first = True
        while offset >= 0:
            instruction = table.get(offset)
            if instruction is None or (instruction[5] and not first):
                break
            first = False
            self.paused_at = offset
            following = self._step(frame, instruction)
            if following < offset:
                offset = following
                break  # a jump back: CPython reports a line there, where the evaluation goes on
            offset = following
        self.next = offset
        self._frame = None

    def _step(self, frame: FrameType, instruction: Instruction) -> int:
        """One instruction on the known stack; returns the next offset to follow, or -1 to stop."""
        opname, arg, argval, following, target, _ = instruction
        stack = self.stack
        if opname in _NOTHING:
            return following
        if opname in ("LOAD_FAST", "LOAD_FAST_CHECK"):
            stack.append(self._local(argval))
        elif opname == "LOAD_CONST":
            stack.append(argval)
        elif opname == "STORE_FAST":
            self._store_local(argval, _pop(stack))
        elif opname == "LOAD_GLOBAL":
            if arg & 1:
                stack.append(_NULL)
            stack.append(self._global(frame, argval))
        elif opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            _pop(stack) if opname == "STORE_GLOBAL" else None
            self._touch(frame.f_globals, argval, True)
        elif opname in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
            self._touch(_cell(argval), None, False)
            stack.append(self._local(argval))
        elif opname in ("STORE_DEREF", "DELETE_DEREF"):
            value = _pop(stack) if opname == "STORE_DEREF" else UNKNOWN
            self._touch(_cell(argval), None, True)
            self._store_local(argval, value)
        elif opname == "MAKE_FUNCTION":
            for _ in range(1 + bin(arg & 0x0F).count("1")):
                _pop(stack)
            stack.append(UNKNOWN)
        elif opname == "LOAD_CLOSURE":
            stack.append(UNKNOWN)
        elif opname == "PUSH_NULL":
            stack.append(_NULL)
        elif opname == "POP_TOP":
            _pop(stack)
        elif opname == "COPY":
            stack.append(stack[-arg] if len(stack) >= arg else UNKNOWN)
        elif opname == "SWAP":
            while len(stack) < arg:
                stack.insert(0, UNKNOWN)
            stack[-1], stack[-arg] = stack[-arg], stack[-1]
        elif opname in ("LOAD_ATTR", "LOAD_METHOD"):
            self._load_attribute(opname, arg, argval)
        elif opname in ("STORE_ATTR", "DELETE_ATTR"):
            owner = _pop(stack)
            if opname == "STORE_ATTR":
                _pop(stack)
            self._touch(owner, ("attr", argval), True)
        elif opname == "BINARY_SUBSCR":
            key, container = _pop(stack), _pop(stack)
            self._touch(container, _item_part(container, key), False)
            stack.append(_item(container, key))
        elif opname in ("STORE_SUBSCR", "DELETE_SUBSCR"):
            key, container = _pop(stack), _pop(stack)
            if opname == "STORE_SUBSCR":
                _pop(stack)
            self._touch(container, _item_part(container, key), True)
        elif opname == "CONTAINS_OP":
            container, item = _pop(stack), _pop(stack)
            keyed = type(container) in (dict, set, collections.OrderedDict, collections.defaultdict)
            self._touch(container, _part(item) if keyed else None, False)
            found = item in container if keyed and _part(item) is not None else None
            stack.append(UNKNOWN if found is None else found != bool(arg))
        elif opname == "IS_OP":
            right, left = _pop(stack), _pop(stack)
            known = UNKNOWN not in (left, right)
            stack.append((left is right) != bool(arg) if known else UNKNOWN)
        elif opname == "COMPARE_OP":
            right, left = _pop(stack), _pop(stack)
            self._read_whole(left)
            self._read_whole(right)
            compare = _COMPARE.get(argval)
            simple = type(left) in _SIMPLE and type(right) in _SIMPLE and compare is not None
            stack.append(compare(left, right) if simple else UNKNOWN)  # type: ignore[misc]  # simple: compare is set
        elif opname == "BINARY_OP":
            _pop(stack)
            left = _pop(stack)
            if arg >= _INPLACE and type(left) in _CONTAINERS:  # `items += more` changes the list itself
                self._touch(left, None, True)
            stack.append(UNKNOWN)
        elif opname.startswith("UNARY_"):
            value = _pop(stack)
            truth = self._test(value) if opname == "UNARY_NOT" else None
            stack.append(UNKNOWN if truth is None else not truth)
        elif opname in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_STRING", "BUILD_SLICE"):
            items = [_pop(stack) for _ in range(arg)][::-1]
            known = opname == "BUILD_TUPLE" and UNKNOWN not in items
            stack.append(tuple(items) if known else UNKNOWN)
        elif opname in ("BUILD_MAP", "BUILD_CONST_KEY_MAP"):
            for _ in range(2 * arg if opname == "BUILD_MAP" else arg + 1):
                _pop(stack)
            stack.append(UNKNOWN)
        elif opname in ("LIST_APPEND", "SET_ADD", "LIST_EXTEND", "SET_UPDATE", "DICT_UPDATE", "DICT_MERGE"):
            self._read_whole(_pop(stack))
        elif opname == "MAP_ADD":
            _pop(stack), _pop(stack)
        elif opname in ("LIST_TO_TUPLE", "GET_LEN"):
            value = _pop(stack) if opname == "LIST_TO_TUPLE" else stack[-1] if stack else UNKNOWN
            stack.append(UNKNOWN)
            self._read_whole(value)
        elif opname == "FORMAT_VALUE":
            if arg & 0x04:
                _pop(stack)
            _pop(stack)
            stack.append(UNKNOWN)
        elif opname == "UNPACK_SEQUENCE":
            value = _pop(stack)
            self._read_whole(value)
            known = type(value) in (tuple, list) and len(value) == arg
            stack.extend(reversed(value) if known else [UNKNOWN] * arg)
        elif opname == "GET_ITER":
            value = _pop(stack)
            self._read_whole(value)
            stack.append(_Iter(value if type(value) in _CONTAINERS else None) if value is not UNKNOWN else UNKNOWN)
        elif opname == "FOR_ITER":
            iterator = stack[-1] if stack else UNKNOWN
            if type(iterator) is _Iter and iterator.source is not None:
                self._touch(iterator.source, None, False)
            self._pause(self._frame, instruction)  # type: ignore[arg-type]  # set for the length of _evaluate
            return -1
        elif opname == "BEFORE_WITH":
            _pop(stack)
            stack.extend((UNKNOWN, UNKNOWN))
        elif opname == "CALL":
            return self._call(instruction)
        elif opname in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP"):
            return target
        elif opname in _POP_JUMPS or opname in _NONE_JUMPS:
            value = _pop(stack)
            if opname in _NONE_JUMPS:
                decided = None if value is UNKNOWN else (value is None) == _NONE_JUMPS[opname]
            else:
                truth = self._test(value)
                decided = None if truth is None else truth == _POP_JUMPS[opname]
            if decided is None:
                self._pause(self._frame, instruction)  # type: ignore[arg-type]  # set for the length of _evaluate
                return -1
            return target if decided else following
        elif opname in ("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"):
            truth = self._test(stack[-1] if stack else UNKNOWN)
            if truth is None:
                self._pause(self._frame, instruction)  # type: ignore[arg-type]  # set for the length of _evaluate
                return -1
            if truth == (opname == "JUMP_IF_TRUE_OR_POP"):
                return target
            stack.pop()
        elif opname in _STOPS:
            return -1
        else:
            self.run.touch_everything(self.sim)
            self.stack = []
            return -1
        return following

    def _call(self, instruction: Instruction) -> int:
        """CALL: a builtin container's method or a builtin function is an access here; Python code is its own."""
        stack = self.stack
        arguments = [_pop(stack) for _ in range(instruction[1])][::-1]
        second, first = _pop(stack), _pop(stack)
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
        self._pause(self._frame, instruction)  # type: ignore[arg-type]  # set for the length of _evaluate
        return -1

    def _container_method(self, method: _Method, arguments: list[Any]) -> Any:
        container, name = method.container, method.name
        keyed = name in _KEYED_METHODS and isinstance(container, dict) and arguments
        part = _part(arguments[0]) if keyed else None
        reading = name in _READ_METHODS
        self._touch(container, part, not reading)
        if name == "get" and isinstance(container, dict) and part is not None:
            return container.get(*arguments) if UNKNOWN not in arguments else UNKNOWN
        return UNKNOWN

    def _load_attribute(self, opname: str, arg: int, name: str) -> None:
        stack = self.stack
        owner = _pop(stack)
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

    # ---- values and accesses ------------------------------------------------------------------------

    def _local(self, name: str) -> Any:
        if self._locals is None:
            self._locals = dict(self._frame.f_locals)  # type: ignore[union-attr]  # set for the length of _evaluate
        return self._locals.get(name, UNKNOWN)

    def _store_local(self, name: str, value: Any) -> None:
        if self._locals is None:
            self._locals = dict(self._frame.f_locals)  # type: ignore[union-attr]  # set for the length of _evaluate
        self._locals[name] = value

    def _global(self, frame: FrameType, name: str) -> Any:
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
