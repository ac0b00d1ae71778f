"""`list`: every name a scenario file may use, each with a one-line description.

Scenarios, fault kinds and invariants describe themselves in code. Event kinds, coverage marks (which are
event kinds) and named points are described by the contract (an event class's docstring, a point's place),
through the registry; config fields by the reference's CONFIG.md table. `descriptions` is the one place that
knows where those words live. Mutants are described by the fix each reverts.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from typing import Any

from sim.cli.common import EXIT_OK, UsageError, load_scenarios
from sim.scenario import targets
from sim.scenario.catalogue import ROOT, SCENARIOS_DIR

# The config fields are described in the reference's CONFIG.md table, in this column.
CONFIG_TABLE, CONFIG_COLUMN = "CONFIG.md", 3
_NAMES_CELL = re.compile(r"`([^`]+)`")
UNDESCRIBED = "(not described in the reference's tables)"


def descriptions(subject: str) -> dict[str, str]:
    """Name -> one line for "events", "points" or "config".

    Events and points: the registry's descriptions (the contract's: an event class's docstring, a point's
    place). Config fields: the rows of CONFIG.md, whose first cell holds a row's names in backticks.
    Backticks are dropped, since the line is read on a terminal.
    """
    from sim.scenario.names import registry

    if subject in ("events", "points"):
        described = registry().events if subject == "events" else registry().points
        return {name: text.replace("`", "") for name, text in described.items()}
    found: dict[str, str] = {}
    for line in (ROOT / "reference" / CONFIG_TABLE).read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("| `") or len(cells) <= CONFIG_COLUMN:
            continue
        for name in _NAMES_CELL.findall(cells[0]):
            found[name] = cells[CONFIG_COLUMN].replace("`", "")
    return found


def _named(subject: str, names: Any) -> list[dict[str, Any]]:
    described = descriptions(subject)
    return [{"name": name, "description": described.get(name, UNDESCRIBED)} for name in sorted(names)]


def _events() -> list[dict[str, Any]]:
    from sim.scenario.names import registry

    return _named("events", registry().events)


def _marks() -> list[dict[str, Any]]:
    from sim.scenario.names import registry

    return _named("events", registry().coverage_marks)


def _points() -> list[dict[str, Any]]:
    from sim.scenario.names import registry

    return _named("points", registry().points)


def _config() -> list[dict[str, Any]]:
    from sim.scenario.builder import config_defaults
    from sim.scenario.names import registry

    items = _named("config", registry().config_fields)
    defaults = config_defaults()
    for item in items:
        item["type"] = registry().config_fields[item["name"]].__name__
        item["default"] = defaults[item["name"]]
    return items


def _mutants() -> list[dict[str, Any]]:
    from reference.fixes import FIXES
    from sim.mutation.mutants import load_mutants

    fixes = {fix.name: fix for fix in FIXES}
    return [{"name": name, "race": fixes[name].race if name in fixes else "",
             "description": f"reverts: {fixes[name].summary}" if name in fixes else UNDESCRIBED}
            for name in sorted(load_mutants())]


def _faults() -> list[dict[str, Any]]:
    from faults import FAULT_KINDS

    return [{"name": kind, "where": fault.where,
             "description": (sys.modules[fault.__module__].__doc__ or "").splitlines()[0].removeprefix(f"{kind}: "),
             "parameters": [_parameter(name, param) for name, param in fault.params.items()]}
            for kind, fault in FAULT_KINDS.items()]


def _parameter(name: str, param: Any) -> dict[str, Any]:
    """A fault parameter as a scenario writes it: its type, its default (absent: required), its values."""
    from contract.params import REQUIRED

    described: dict[str, Any] = {"name": name, "type": str(param.type), "description": param.description}
    if param.default is not REQUIRED:
        described["default"] = param.default
    if param.values:
        described["values"] = list(param.values)
    return described


def _parameter_text(parameter: dict[str, Any]) -> str:
    """`times (integer, default 1)`, `duration (duration, required)`, `phase (before_commit|after_commit, default ...)`."""
    kind = "|".join(parameter["values"]) if "values" in parameter else parameter["type"]
    if "default" not in parameter:
        return f"{parameter['name']} ({kind}, required)"
    return f"{parameter['name']} ({kind}, default {_default_text(parameter['default'])})"


def _default_text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else _cell(value)


def _invariants(target: str | None = None) -> list[dict[str, Any]]:
    """Every invariant; with a target, whether it applies there, or why not (`sim.scenario.targets.applies`)."""
    from sim.invariants import INVARIANTS

    items = []
    for name, invariant in INVARIANTS.items():
        item = {"name": name, "race": ",".join(invariant.races)}
        if target is not None:
            reason = targets.applies(invariant, target)
            item["applies"] = "yes" if reason is None else "no"
            item["description"] = invariant.description if reason is None else f"not applicable: {reason}"
        else:
            item["description"] = invariant.description
        items.append(item)
    return items


SUBJECTS: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "events": _events, "points": _points, "config": _config, "marks": _marks, "mutants": _mutants,
    "faults": _faults, "invariants": _invariants,
}


def _scenarios(paths: list[str]) -> list[dict[str, Any]]:
    return [{"name": s.name, "race": s.race or "", "source": s.source or "", "path": str(s.path),
             "description": s.reported or s.description or ""}
            for s in load_scenarios(paths or [str(SCENARIOS_DIR)])]


def render(items: list[dict[str, Any]]) -> str:
    """Aligned columns: the name, any short facts (race, where, type, default), then the description; a fault
    kind's parameters on an indented line below it."""
    if not items:
        return ""
    keys = [key for key in items[0] if key not in ("name", "description", "path", "parameters")]
    columns = [[item["name"] for item in items]] + [[_cell(item[key]) for item in items] for key in keys]
    widths = [max(map(len, column)) for column in columns]
    lines = []
    for index, item in enumerate(items):
        cells = [column[index].ljust(width) for column, width in zip(columns, widths)]
        lines.append("  ".join([*cells, item["description"]]).rstrip())
        if item.get("parameters"):
            lines.append("    parameters: " + ", ".join(map(_parameter_text, item["parameters"])))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "none" if value is None else str(value)


# What `list` with no subject shows: each subject, and what in a scenario file names it.
KINDS = {
    "scenarios": "scenario files: the catalogue's, or those under PATH",
    "events": "event kinds: after_event, and coverage marks",
    "points": "named points: a fault's point",
    "config": "[world] config keys, with their types and defaults",
    "marks": "coverage marks: [expect] coverage",
    "mutants": "curated mutants: [expect] must_fail_under, --mutant",
    "faults": "fault kinds: a fault's kind, with its parameters",
    "invariants": "invariants: [expect] invariants",
}


def _list(args: argparse.Namespace) -> int:
    if args.what is None:
        items = [{"name": name, "description": text} for name, text in KINDS.items()]
        print(json.dumps({"subject": None, "items": items}, sort_keys=True) if args.json else render(items))
        return EXIT_OK
    if args.paths and args.what != "scenarios":
        raise UsageError(f"list {args.what} takes no PATH (only `list scenarios` reads scenario files)")
    if args.target is not None and args.what != "invariants":
        raise UsageError(f"list {args.what} takes no --target (only `list invariants` says what applies to a target)")
    if args.what == "invariants" and args.target is not None:
        try:
            items = _invariants(targets.parse(args.target))
        except ValueError as error:
            raise UsageError(f"--target: {error}") from None
    else:
        items = _scenarios(args.paths) if args.what == "scenarios" else SUBJECTS[args.what]()
    print(json.dumps({"subject": args.what, "items": items}, sort_keys=True) if args.json else render(items))
    return EXIT_OK


def add_list(commands: Any) -> None:
    subjects = list(KINDS)
    listing = commands.add_parser("list", help="list the names a scenario may use, each with a one-line description",
                                  description="List what a scenario file may name: " + ", ".join(subjects) + " "
                                              "(with no subject: the subjects).")
    listing.add_argument("what", nargs="?", choices=subjects, help="what to list (default: the subjects)")
    listing.add_argument("paths", nargs="*", default=[], metavar="PATH", help="scenarios only: files or folders (default: the catalogue)")
    listing.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    listing.add_argument("--target", metavar="TARGET", help='invariants only: which apply to this target, like "hermes==0.19.0"')
    listing.set_defaults(handler=_list)
