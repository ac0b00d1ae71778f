"""Same seed, same trace: in one process, across processes with different PYTHONHASHSEED, and on replay."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from random_programs import digests, programs, run_program
from support import checkout_env

from sim import DivergenceError, World, replay
from sim.kernel.decisions import Draw, TaskChoice

HERE = Path(__file__).parent


@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
def test_same_seed_same_digest_in_process(program):
    first = World(7, max_steps=100_000).run(run_program, program)
    second = World(7, max_steps=100_000).run(run_program, program)
    assert first.digest() == second.digest()
    assert first.trace_jsonl() == second.trace_jsonl()
    assert first.decisions == second.decisions


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(programs)
def test_replay_reproduces_the_trace_byte_for_byte(program):
    original = World(11, max_steps=100_000).run(run_program, program)
    again = replay(original.decisions, run_program, program, seed=11, max_steps=100_000)
    assert again.trace_jsonl() == original.trace_jsonl()
    assert again.trace_text() == original.trace_text()


def _digests_in_subprocess(program, seeds, hashseed):
    env = checkout_env({"PYTHONHASHSEED": str(hashseed)})
    done = subprocess.run(
        [sys.executable, str(HERE / "random_programs.py")],
        input=json.dumps({"program": program, "seeds": seeds}),
        capture_output=True, text=True, env=env, cwd=HERE.parent, check=True,
    )
    return done.stdout.split()


@settings(max_examples=6, deadline=None, derandomize=True, database=None)
@given(programs)
def test_same_digest_across_processes_and_hash_seeds(program):
    seeds = [0, 1, 2]
    here = digests(program, seeds)
    assert _digests_in_subprocess(program, seeds, 1) == here
    assert _digests_in_subprocess(program, seeds, 12345) == here


CONTENDED = [[["lock", 0, 0.5], ["set", 0], ["checkpoint"]], [["checkpoint"], ["lock", 0, 0.5]], [["wait", 0, 3], ["rand"]]]


def test_different_seeds_explore_different_interleavings():
    seen = {World(seed).run(run_program, CONTENDED).digest() for seed in range(20)}
    assert len(seen) >= 5


def test_mismatched_decision_list_is_a_divergence_error():
    original = World(3).run(run_program, CONTENDED)
    tampered = list(original.decisions)
    index = next(i for i, d in enumerate(tampered) if isinstance(d, TaskChoice))
    options = tampered[index].options
    tampered[index] = TaskChoice(options + 1, 0)
    with pytest.raises(DivergenceError, match=f"decision {index}: the recording chose option 0 of {options + 1}"):
        replay(tampered, run_program, CONTENDED, seed=3)


def test_a_recording_longer_than_the_run_is_a_divergence_error():
    original = World(3).run(run_program, CONTENDED)
    with pytest.raises(DivergenceError, match="1 more"):
        replay(original.decisions + [TaskChoice(2, 0)], run_program, CONTENDED, seed=3)


def test_random_draws_are_recorded_and_replayed():
    original = World(5).run(run_program, CONTENDED)
    draws = [d for d in original.decisions if isinstance(d, Draw)]
    assert draws and draws[0].stream == "program"
    value = next(e.fields["value"] for e in original.history if e.kind == "program.draw")
    assert draws[0].choice == value


def test_a_recording_that_does_not_fit_a_draw_is_a_divergence_error_naming_that_draw():
    """The world remembers the draw's divergence (its code may swallow the exception), so the run's error names
    the decision that did not fit, not a later symptom such as a recording left unused."""
    original = World(5).run(run_program, CONTENDED)
    tampered = list(original.decisions)
    index = next(i for i, d in enumerate(tampered) if isinstance(d, Draw))
    tampered[index] = TaskChoice(2, 0)
    with pytest.raises(DivergenceError, match=f"decision {index}: the recording has"):
        replay(tampered, run_program, CONTENDED, seed=5)
