"""The contract between reference, faults and harness: declared once, typed, documented from itself.

Every event kind is one documented class; emit sites and named points use the contract's declarations, never
strings; the packages depend on one another only in the allowed direction; the event and point references
are renderings of the contract.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import checkout_env

from contract import docs, events, points
from contract.events import BY_KIND, LeaseAcquired, RealStoreBusyFired, SessionAdopted, StallFired, from_trace
from contract.events.base import layout, trace
from contract.ids import AttemptId, HolderId, SessionId
from reference.store import SessionStore
from sim.scenario.names import registry, store_operations

ROOT = Path(__file__).resolve().parent.parent
RACE = re.compile(r"R([1-9]|1[0-9]|2[0-6])")


def _camel(kind: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[._]", kind))


@pytest.mark.parametrize("cls", events.ALL, ids=lambda cls: cls.__name__)
def test_every_event_class_is_a_documented_frozen_dataclass(cls):
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    assert cls.kind in BY_KIND
    assert "__doc__" in vars(cls) and not cls.__doc__.startswith(cls.__name__ + "("), "say when it is emitted"
    assert cls.summary() and "\n" not in cls.summary()
    assert all(RACE.fullmatch(race) for race in cls.feeds)


def test_each_kind_has_one_class_named_after_it():
    kinds = [cls.kind for cls in events.ALL if BY_KIND[cls.kind] is cls]
    assert len(kinds) == len(set(kinds)) == len(BY_KIND)
    assert {cls.__name__ for cls in BY_KIND.values()} == {_camel(kind) for kind in BY_KIND}


def test_a_shape_of_a_kind_extends_the_class_that_declares_it():
    shapes = [cls for cls in events.ALL if BY_KIND[cls.kind] is not cls]
    assert shapes and all(issubclass(cls, BY_KIND[cls.kind]) for cls in shapes)


def test_the_trace_shows_keys_in_declaration_order_and_leaves_absent_optional_fields_out():
    adopted = SessionAdopted(from_session=SessionId("s"), to_session=SessionId("s/p1.1"))
    assert adopted.trace_fields() == {"from": "s", "to": "s/p1.1"}
    assert list(SessionAdopted(from_session="s", to_session="t", attempt=AttemptId("p1.1")).trace_fields()) == ["from", "to", "attempt"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        adopted.to_session = "x"  # type: ignore[misc]  # the point of the test: frozen
    with pytest.raises(TypeError):
        SessionAdopted(from_session="s")  # type: ignore[call-arg]  # a forgotten field is an error where it is made


def test_trace_keys_are_unique_within_each_class():
    for cls in events.ALL:
        keys = [field.key for field in layout(cls)]
        assert len(keys) == len(set(keys)), cls.__name__


def test_ids_are_built_and_read_back_in_one_place():
    holder = HolderId.of("p1r1", 101, 3)
    assert holder == "proc=p1r1:pid=101:attempt=3"
    assert holder.attempt == AttemptId.of("p1r1", 3) == "p1r1.3" and holder.attempt.process == "p1r1"
    assert holder.pid == 101
    assert HolderId("someone else").attempt is None and HolderId("someone else").pid is None
    assert SessionId("s1/p1.2").continuation("p2.1") == "s1/p2.1" and SessionId("s1").family == "s1"


def test_a_real_holder_id_names_its_host_start_and_nonce_and_reads_back_the_same():
    real = HolderId.of("w1-ab12", 4242, 7, host="box", start_ticks=99, nonce="ab12")
    assert real == "proc=w1-ab12:host=box:pid=4242:start=99:nonce=ab12:attempt=7"
    assert real.attempt == "w1-ab12.7" and real.pid == 4242 and real.fields["host"] == "box"


def test_a_minted_child_id_is_the_productions_format_and_names_its_family():
    child = SessionId("s1/20260101_000000_abcdef").minted_child("proc=p1:pid=100:attempt=1", 1000.0)
    assert child.startswith("s1/19700101_001640_") and len(child.rsplit("_", 1)[1]) == 6


def test_a_logged_event_reads_back_as_its_class_with_ids_typed():
    acquired = from_trace("lease.acquired", {"session": "s", "holder": "proc=p1:pid=100:attempt=2"})
    assert isinstance(acquired, LeaseAcquired) and acquired.holder.attempt == "p1.2"
    assert isinstance(from_trace("fault.fired", {"fault_kind": "db_busy", "op": "append_messages", "phase": "real"}),
                      RealStoreBusyFired)
    assert isinstance(from_trace("fault.fired", {"fault": 0, "fault_kind": "stall", "firing": 1, "point": "p",
                                                 "duration": 1.0}), StallFired)
    with pytest.raises(ValueError):
        from_trace("lease.acquired", {"session": "s"})


def test_the_documented_store_points_are_store_operations():
    operations = set(store_operations())
    assert {point.removeprefix(points.STORE_PREFIX) for point in points.STORE_POINTS} <= operations
    assert all(callable(getattr(SessionStore, op)) for op in operations)


def test_the_registry_lists_every_event_and_point_with_a_one_line_description():
    found = registry()
    assert set(found.events) == set(BY_KIND) and set(found.coverage_marks) == set(BY_KIND)
    assert set(points.REFERENCE_POINTS) <= set(found.points)
    assert {points.store_point(op) for op in store_operations()} <= set(found.points)
    for description in [*found.events.values(), *found.points.values()]:
        assert description and "\n" not in description


@pytest.mark.parametrize("path", sorted(docs.RENDERED), ids=lambda path: path.name)
def test_the_event_and_point_references_are_the_contracts_rendering(path):
    assert path.read_text(encoding="utf-8") == docs.RENDERED[path](), "run: python -m contract.docs"


# ---- the contract is used, not bypassed --------------------------------------------------------------


def _calls(folder: str, name: str):
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name:
                yield path.relative_to(ROOT), node


@pytest.mark.parametrize("folder", ["reference", "faults", "sim", "contract"])
def test_every_emit_passes_an_event_object(folder):
    strings = [f"{path}:{node.lineno}" for path, node in _calls(folder, "emit")
               if node.args and isinstance(node.args[0], ast.Constant) or node.keywords]
    assert strings == []


def test_the_reference_checkpoints_only_declared_points():
    literal = [f"{path}:{node.lineno}" for path, node in _calls("reference", "checkpoint")
               if node.args and isinstance(node.args[0], (ast.Constant, ast.JoinedStr))]
    assert literal == []


# ---- packages depend on one another in one direction -------------------------------------------------

ALLOWED = {
    "contract": set(),
    "reference": {"contract"},
    "faults": {"contract", "reference"},
    # A released program's adapter is driven by the harness and judged by the oracle: it builds on all of them,
    # and only sim's target registry reaches it, by name (sim/scenario/targets.py).
    "targets": {"contract", "faults", "sim"},
}


def _imported_packages(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_packages_import_only_what_lies_beneath_them(package):
    local = {"contract", "reference", "faults", "sim", "targets"}
    imported = {name: files for name, files in _imported_packages(package).items() if name in local - {package}}
    assert set(imported) <= ALLOWED[package], imported


# In sim, the harness that builds the system (with the registry of names, `sim/scenario/names.py`) reaches into the
# reference and the faults; so does the command line, which checks which `reference` an overlay imported and lists
# the fault kinds, and the harness of the real run, which starts the reference's workers and reads the store they
# leave.
HARNESS = ("sim/scenario/", "sim/cli/", "sim/stress/")


def test_in_sim_only_the_harness_imports_the_reference_and_the_faults():
    found = {path for name, files in _imported_packages("sim").items() if name in ("reference", "faults") for path in files}
    assert found and all(path.startswith(HARNESS) for path in found), sorted(found)


# ---- within sim, subpackages depend on one another in one direction ----------------------------------

# What each part of sim may import when it runs (at module level or inside a function); an import for annotations
# only, under `if TYPE_CHECKING:`, binds nothing at run time and is free. A new edge is a decision: made here.
SIM_ALLOWED: dict[str, set[str]] = {
    "kernel": set(),  # tasks, the clock, cancellation, sync primitives, the decision types it records
    "strategies": {"kernel"},  # pick among the kernel's runnable tasks
    "runtime": {"kernel"},  # the Runtime API on the kernel
    "invariants": set(),  # the oracle reads the contract's events and the store, never the simulator
    "core": {"kernel", "runtime", "strategies"},  # the World, its trace, the frozen clock, the search loop, stopping
    "threads": {"core", "kernel", "strategies"},  # a thread reports what each step touches to the DPOR strategy
    "scenario": {"core", "invariants", "kernel", "runtime", "strategies"},
    "reports": {"core", "invariants", "kernel", "scenario", "strategies"},
    "shrinking": {"core", "kernel", "reports", "scenario", "strategies"},
    "programs": {"core", "kernel", "shrinking", "strategies", "threads"},
    "swarm": {"core", "invariants", "kernel", "reports", "scenario"},
    "mutation": {"core", "scenario"},
    "stress": {"core", "invariants", "mutation"},
    "bench": {"core", "kernel", "mutation", "programs", "scenario", "shrinking", "strategies", "swarm", "threads"},
    "pytest_plugin": {"mutation", "programs", "reports", "scenario", "swarm"},
    "__init__": {"core", "kernel", "programs", "strategies", "threads"},  # the public API: `sim.explore`, `sim.World`
    "__main__": {"cli"},
    "cli": {"bench", "core", "invariants", "kernel", "mutation", "programs", "reports", "scenario", "shrinking",
            "strategies", "stress", "swarm"},
}

# Where a function imports a sim module, and why; none of them breaks a cycle (the graph above has none).
FUNCTION_LEVEL = {
    "sim/cli/": "a command imports what it runs (the benchmarks' trio and peers, the mutation and swarm machinery)",
    "sim/pytest_plugin.py": "the plugin loads in every pytest session where the project is installed, and imports "
                            "the harness only for the items it collects",
    "sim/mutation/coverage_map.py": "a tracing child imports the loader under the line tracer: what loading executes "
                                    "is charged to every scenario",
    "sim/scenario/loader.py": "checking a scenario against its target reads the reference's points: importing the "
                              "loader (every command does) imports no reference, which a command's process imports "
                              "under the coverage tracer, or after a released target's own modules",
}


def _part_of_sim(path: Path) -> str:
    """The part of sim a file belongs to: its subpackage, or its own name for a module at sim's top."""
    parts = path.relative_to(ROOT / "sim").parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def _sim_imports(tree: ast.AST, in_function: bool = False) -> Iterator[tuple[str, int, bool]]:
    """Every `sim.` module a tree imports when it runs, its line, and whether a function imports it."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _sim_imports(ast.Module(body=node.orelse, type_ignores=[]), in_function)
            continue
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno, in_function) for alias in node.names if alias.name.startswith("sim."))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "sim":
            yield from ((f"sim.{alias.name}", node.lineno, in_function) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("sim."):
            yield node.module or "", node.lineno, in_function
        yield from _sim_imports(node, in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def _sim_edges() -> dict[tuple[str, str], list[str]]:
    """(importing part, imported part) -> where, for every import of one part of sim by another."""
    parts = {_part_of_sim(path) for path in (ROOT / "sim").iterdir() if path.suffix == ".py" or (path / "__init__.py").exists()}
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted((ROOT / "sim").rglob("*.py")):
        importer = _part_of_sim(path)
        for module, line, _ in _sim_imports(ast.parse(path.read_text(encoding="utf-8"))):
            name = module.split(".")[1]
            imported = name if name in parts else "__init__"  # `from sim import World`: the public API
            if imported != importer:
                edges.setdefault((importer, imported), []).append(f"{path.relative_to(ROOT)}:{line}")
    return edges


def test_every_part_of_sim_has_its_place_in_the_allowed_graph():
    parts = {_part_of_sim(path) for path in (ROOT / "sim").iterdir() if path.suffix == ".py" or (path / "__init__.py").exists()}
    assert parts == set(SIM_ALLOWED)


def test_the_parts_of_sim_import_only_what_the_allowed_graph_lets_them():
    leaks = {f"{importer} -> {imported}": where for (importer, imported), where in _sim_edges().items()
             if imported not in SIM_ALLOWED[importer]}
    assert leaks == {}


def test_the_allowed_graph_of_sim_has_no_cycle():
    graph = {part: set(allowed) for part, allowed in SIM_ALLOWED.items()}
    while graph:
        lowest = {part for part, allowed in graph.items() if not allowed & set(graph)}
        assert lowest, f"a cycle among {sorted(graph)}"
        graph = {part: allowed for part, allowed in graph.items() if part not in lowest}


def test_a_function_imports_sim_modules_only_where_it_is_said_why():
    found = {f"{path.relative_to(ROOT)}:{line}" for path in sorted((ROOT / "sim").rglob("*.py"))
             for _, line, in_function in _sim_imports(ast.parse(path.read_text(encoding="utf-8"))) if in_function}
    assert found and {where for where in found if not where.startswith(tuple(FUNCTION_LEVEL))} == set()


def test_the_command_line_starts_without_importing_the_reference_or_the_faults():
    """A command's process imports the reference later: under the coverage map's line tracer (what importing it
    executes is charged to every scenario), or after a released target's own modules."""
    program = "import sys, sim.cli, sim.pytest_plugin; print(sorted({m.split('.')[0] for m in sys.modules} & {'reference', 'faults'}))"
    done = subprocess.run([sys.executable, "-P", "-c", program], capture_output=True, text=True, env=checkout_env(), check=True)
    assert done.stdout.strip() == "[]"


def test_a_field_left_out_while_none_must_say_its_default():
    """`@event` is a dataclass to a type checker too, which sees a default only where `default=` is written."""
    with pytest.raises(TypeError, match="default=None"):
        trace(omit_if_none=True)
    assert trace(omit_if_none=True, default=None).default is None
