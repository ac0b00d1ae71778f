"""`list`: the scenarios, fault kinds and invariants this checkout has."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sim.cli.common import EXIT_OK, load_scenarios


def _list(args: argparse.Namespace) -> int:
    if args.what == "scenarios":
        for scenario in load_scenarios(args.paths or ["scenarios"]):
            source = scenario.source or ""
            print(f"{scenario.name:<48} {scenario.race or '':<5} {source:<18} {scenario.reported or scenario.description or ''}")
    elif args.what == "faults":
        from faults import FAULT_KINDS

        for kind, fault in FAULT_KINDS.items():
            print(f"{kind:<26} {fault.where:<7} {(sys.modules[fault.__module__].__doc__ or '').splitlines()[0]}")
    else:
        from sim.invariants import INVARIANTS

        for name, invariant in INVARIANTS.items():
            print(f"{name:<40} {','.join(invariant.races):<14} {invariant.description}")
    return EXIT_OK


def add_list(commands: Any) -> None:
    listing = commands.add_parser("list", help="list scenarios, faults or invariants")
    listing.add_argument("what", choices=["scenarios", "faults", "invariants"])
    listing.add_argument("paths", nargs="*", metavar="PATH")
    listing.set_defaults(handler=_list)
