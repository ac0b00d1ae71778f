"""`python -m targets.hermes`: install, lock, check and baseline the released hermes-agent.

    install [VERSION ...] [--all]   put releases in the store (default: every locked release)
    lock VERSION ...                re-resolve a release's dependencies into its lock file
    check VERSION [--no-stubs]      AIAgent() and one offline compaction, timed; exit 1 if a probe escaped
    baseline VERSION [--mode M] [--grace S] [--runs N] [--json]
                                    seed 000's interleaving with real threads and real time
    seams                           the seams table of SEAMS.md, counted from the installed releases
    races VERSION [--runs N] [--seed S] [--json]
                                    the swarm's first run showing each race the release fails (races.py)

Exit status: 0 done, 1 a failed install or an escaped probe, 2 bad usage or a release with no lock.
`check` and `baseline` load the release into this process, so they take one version each.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
from pathlib import Path

from targets.hermes import locks, probes, store
from targets.hermes.loader import load, make_home
from targets.hermes.target import RELEASES

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
WORKLOADS = Path(__file__).resolve().parents[2] / "scenarios" / "swarm" / "hermes"


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of runs of at least 1, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except locks.LockError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except store.ReleaseMissing as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m targets.hermes", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    install = commands.add_parser("install", help="put releases in the store")
    install.add_argument("versions", nargs="*", metavar="VERSION")
    install.set_defaults(run=_install)
    lock = commands.add_parser("lock", help="re-resolve releases into their lock files")
    lock.add_argument("versions", nargs="+", metavar="VERSION")
    lock.set_defaults(run=_lock)
    check = commands.add_parser("check", help="time AIAgent() and one compaction, probes stubbed")
    check.add_argument("version", metavar="VERSION")
    check.add_argument("--no-stubs", action="store_true", help="leave the probes in (to compare)")
    check.set_defaults(run=_check)
    baseline = commands.add_parser("baseline", help="seed 000 with real threads and real time")
    baseline.add_argument("version", metavar="VERSION")
    baseline.add_argument("--mode", choices=("in_place", "rotation"), default="in_place")
    baseline.add_argument("--grace", type=float, default=10.0, metavar="S", help="the CLI's grace (10 s)")
    baseline.add_argument("--runs", type=int, default=1, metavar="N")
    baseline.add_argument("--json", action="store_true")
    baseline.set_defaults(run=_baseline)
    commands.add_parser("seams", help="print the seams table from the installed releases").set_defaults(run=_seams)
    hunt = commands.add_parser("races", help="the swarm's first run showing each race the release fails")
    hunt.add_argument("version", choices=RELEASES, metavar="VERSION")
    hunt.add_argument("--runs", type=_positive, default=2000, metavar="N", help="runs at most (default 2000)")
    hunt.add_argument("--seed", type=int, default=1, metavar="S", help="the campaign's root seed (default 1)")
    hunt.add_argument("--workloads", type=Path, default=WORKLOADS, metavar="PATH", help="default scenarios/swarm/hermes")
    hunt.add_argument("--json", action="store_true")
    hunt.set_defaults(run=_races)
    return parser


def _install(args: argparse.Namespace) -> int:
    failed = 0
    for version in args.versions or locks.locked_versions():
        try:
            report = store.install(version)
        except store.ReleaseUnavailable as error:
            print(f"error: {error}", file=sys.stderr)
            failed += 1
            continue
        print(f"{report.release.name}: {len(report.installed)} distributions installed in {report.seconds:.1f}s, "
              f"{report.size_bytes() / 1e6:.0f} MB on sys.path ({report.release.store})")
    return EXIT_FAILED if failed else EXIT_OK


def _lock(args: argparse.Namespace) -> int:
    for version in args.versions:
        print(locks.write_lock(version, locks.resolve(version)))
    return EXIT_OK


def _home() -> Path:
    home = make_home("hermes-home-")
    probes.write_config(home)
    return home


def _release_prints_to_stderr() -> contextlib.AbstractContextManager:
    """hermes prints status lines ("Compacting context...") on stdout; ours is for the result alone."""
    return contextlib.redirect_stdout(sys.stderr)


def _check(args: argparse.Namespace) -> int:
    from targets.hermes.check import run_check

    home = make_home("hermes-home-") if args.no_stubs else _home()
    with _release_prints_to_stderr():
        report = run_check(load(args.version, home), stub=not args.no_stubs)
    print(json.dumps(report.__dict__, indent=1))
    return EXIT_FAILED if report.escaped and not args.no_stubs else EXIT_OK


def _baseline(args: argparse.Namespace) -> int:
    from targets.hermes.baseline import run_seed_000

    with _release_prints_to_stderr():
        loaded = load(args.version, _home())
        outcomes = [run_seed_000(loaded, args.mode, args.grace) for _ in range(args.runs)]
    walls = [outcome.wall_s for outcome in outcomes]
    if args.json:
        print(json.dumps([{**o.__dict__, "lost": o.lost} for o in outcomes], indent=1, default=str))
    else:
        last = outcomes[-1]
        print(f"{loaded.release.name} {args.mode}, grace {args.grace:g}s, {len(outcomes)} runs: "
              f"median wall {statistics.median(walls):.2f}s (setup {last.setup_s:.2f}s excluded)")
        for label, place in last.where.items():
            print(f"  {label:15s} {place}")
        print(f"  lost: {', '.join(last.lost) or 'nothing'}")
    return EXIT_OK


def _races(args: argparse.Namespace) -> int:
    from sim.scenario.names import registry
    from sim.swarm.workload_loader import load_workloads
    from targets.hermes import races, target

    target.enter(args.version)
    workloads = load_workloads([args.workloads], registry(), f"hermes=={args.version}")
    wanted = races.SCRIPTED_FAILING[args.version]
    with _release_prints_to_stderr():
        hunt = races.first_finds(workloads, args.seed, range(args.runs), frozenset(wanted), _said_found)
    found = {"version": args.version, "root_seed": args.seed, **races.describe(hunt, wanted)}
    print(json.dumps(found, indent=1) if args.json else
          "\n".join(f"{race}: {'not within ' + str(hunt.runs) if index is None else 'run ' + str(index)}"
                    for race, index in {**found["first_run"], **found["also_found"]}.items()))
    return EXIT_OK


def _said_found(race: str, index: int) -> None:
    print(f"{race}: run {index}", file=sys.stderr, flush=True)


def _seams(args: argparse.Namespace) -> int:
    from targets.hermes.seams import table

    print(table({v: store.release(v).require().paths[0] for v in locks.locked_versions()}), end="")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
