"""The scenario guide is executed, so it cannot rot: its example scenario passes on the reference and fails
under the mutant it names, its shell examples run, the error lines it shows are the ones the loader prints,
and the key reference's examples are real names. (README.md's examples: tests/test_docs_readme.py.)
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from typing import Any

import pytest
from docs_examples import GUIDE, blocks, run_examples, shell_commands

from sim.scenario.loader import SCENARIO, load_scenario
from sim.scenario.names import registry
from sim.scenario.scenario_error import ScenarioError
from sim.scenario.schema import Registered


def test_the_guide_example_passes_on_the_reference_and_fails_under_the_mutant_it_names(tmp_path):
    (example,) = blocks(GUIDE, "toml")
    name = tomllib.loads(example)["name"]
    (tmp_path / f"{name}.toml").write_text(example, encoding="utf-8")
    scenario = load_scenario(tmp_path / f"{name}.toml", registry())
    assert scenario.expect.must_fail_under and scenario.faults and scenario.expect.coverage
    commands = [command for command, _ in shell_commands(GUIDE)]
    assert f"python -m sim run {name}.toml --must-fail-under" in commands, "the guide shows how its claim is checked"
    failures = run_examples(GUIDE, tmp_path)
    assert not failures, "\n\n".join(failures)


# The inputs behind the guide's error lines: file name, then the file's text.
MISTAKE_INPUTS = {
    'fault[1].duration: expected a duration': ("x.toml", '[[drive]]\nat = "0s"\nturn = "t"\n[[fault]]\nkind = "stall"\n'
                                               'point = "provider.summary"\nnth = 1\nduration = "1s"\n[[fault]]\nkind = "stall"\n'
                                               'point = "provider.summary"\nnth = 1\nduration = "ten minutes"\n'),
    "drive[0].after_event: expected only one": ("x.toml", '[[drive]]\nat = "0s"\nafter_event = "turn.persisted"\nturn = "t"\n'),
    "drive[0].after_event: expected an event kind": ("x.toml", '[[drive]]\nafter_event = "compaction.sumary_started"\nturn = "t"\n'),
    "drive: expected at least one": ("x.toml", ""),
    "expected valid TOML": ("y.toml", 'name = "y"\n\nrun = ?\n'),
}


def test_the_guide_shows_the_errors_the_loader_prints(tmp_path):
    (mistakes,) = [block for block in blocks(GUIDE, "text") if "scenarios/x.toml" in block]
    lines = mistakes.splitlines()
    assert len(lines) == len(MISTAKE_INPUTS)
    for line in lines:
        (file, text), = [inputs for marker, inputs in MISTAKE_INPUTS.items() if marker in line]
        path = tmp_path / file
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ScenarioError) as caught:
            load_scenario(path, registry())
        assert str(caught.value).replace(str(path), f"scenarios/{file}") == line


def registered_examples(spec: Any, example: str | None = None, seen: set[int] | None = None) -> Iterator[tuple[Registered, str]]:
    """Every Registered spec reachable in the schema, with the example shown for it (its own, or that of the
    list that holds it), however the schema nests them."""
    seen = set() if seen is None else seen
    if id(spec) in seen:
        return
    seen.add(id(spec))
    example = getattr(spec, "example", None) or example
    if isinstance(spec, Registered) and example:
        yield spec, example
    for child in list(getattr(spec, "fields", {}).values()) + list(getattr(spec, "include", ())):
        yield from registered_examples(child, None, seen)
    for name in ("item", "tag_spec"):
        if getattr(spec, name, None) is not None:
            yield from registered_examples(getattr(spec, name), example if name == "item" else None, seen)
    for alternative in getattr(spec, "alternatives", ()):
        yield from registered_examples(alternative, example, seen)


def test_every_example_in_the_key_reference_is_a_real_name():
    checked = 0
    for spec, example in registered_examples(SCENARIO):
        value = tomllib.loads(f"v = {example}")["v"]
        names = getattr(registry(), spec.source)
        for name in value if isinstance(value, list) else [value]:
            assert name in names or (spec.glob and name.endswith("*")), f"{spec.source}: {name!r} is not a real name"
            checked += 1
    assert checked >= 7, "the walk found the schema's registered names (event, point, kind, invariants, mutants, marks, strategy)"
