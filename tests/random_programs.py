"""Random task programs for the kernel's determinism properties, and a stdin entry point for subprocesses.

A program is plain JSON (so it can cross a process boundary): a list of tasks, each a list of operations
over a few shared locks and events. Run as a script it reads `{"program": ..., "seeds": [...]}` on stdin
and prints the trace digest of each seed, one per line.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from hypothesis import strategies as st
from support import ProgramDraw, ProgramMark

LOCKS = 2
EVENTS = 3

_leaf = st.one_of(
    st.tuples(st.just("sleep"), st.sampled_from([0, 0.5, 1, 2])),
    st.tuples(st.just("checkpoint")),
    st.tuples(st.just("lock"), st.integers(0, LOCKS - 1), st.sampled_from([0, 0.5, 1])),
    st.tuples(st.just("set"), st.integers(0, EVENTS - 1)),
    st.tuples(st.just("wait"), st.integers(0, EVENTS - 1), st.sampled_from([0.5, 3])),
    st.tuples(st.just("emit"), st.integers(0, 9)),
    st.tuples(st.just("rand")),
    st.tuples(st.just("fail")),
)
operations = st.recursive(
    st.lists(_leaf, max_size=5),
    lambda inner: st.lists(
        st.one_of(_leaf, st.tuples(st.just("cancel_in"), st.sampled_from([0, 0.7, 1.5]), inner), st.tuples(st.just("spawn"), inner)),
        max_size=5,
    ),
    max_leaves=12,
)
programs = st.lists(operations, min_size=1, max_size=4).map(lambda p: json.loads(json.dumps(p)))


async def run_program(rt: Any, program: list[list[Any]]) -> None:
    """Interpret `program`: each task runs its operations inside its own nursery (for `spawn`)."""
    locks = [rt.lock() for _ in range(LOCKS)]
    events = [rt.event() for _ in range(EVENTS)]

    async def run_ops(ops: list[Any], nursery: Any) -> None:
        for op in ops:
            kind = op[0]
            if kind == "sleep":
                await rt.sleep(op[1])
            elif kind == "checkpoint":
                await rt.checkpoint("program")
            elif kind == "lock":
                async with locks[op[1]]:
                    await rt.sleep(op[2])
            elif kind == "set":
                events[op[1]].set()
            elif kind == "wait":
                with rt.move_on_after(op[2]):
                    await events[op[1]].wait()
            elif kind == "emit":
                rt.emit(ProgramMark(tag=op[1]))
            elif kind == "rand":
                rt.emit(ProgramDraw(value=rt.rng("program").randrange(100)))
            elif kind == "fail":
                raise ValueError("program failure")
            elif kind == "cancel_in":
                with rt.move_on_after(op[1]):
                    await run_ops(op[2], nursery)
            elif kind == "spawn":
                nursery.start_soon(run_task, op[1], name="spawned")

    async def run_task(ops: list[Any]) -> None:
        async with rt.open_nursery() as nursery:
            await run_ops(ops, nursery)

    async with rt.open_nursery() as root:
        for index, ops in enumerate(program):
            root.start_soon(run_task, ops, name=f"t{index}")


def digests(program: list[list[Any]], seeds: list[int]) -> list[str]:
    from sim import World

    return [World(seed, max_steps=100_000).run(run_program, program).digest() for seed in seeds]


if __name__ == "__main__":
    request = json.load(sys.stdin)
    print("\n".join(digests(request["program"], request["seeds"])))
