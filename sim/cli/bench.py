"""`bench`: the simulator measured against the raw loop and trio, the catalogue's run rates, detection, and
the classic concurrency bugs."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from sim.bench.figures import render_figures
from sim.cli.common import CATALOGUE, DEFAULT_OUT, EXIT_OK, UsageError, add_json_options, add_mutant_option, load_scenarios, positive_int, progress
from sim.core import stopping


def _bench(args: argparse.Namespace) -> int:
    """A benchmark's figures need every measurement: a first Ctrl+C stops it at its next run, and it prints none."""
    with stopping.graceful("stopping at the next run; a benchmark prints no figure it did not finish "
                           "(press Ctrl+C again to stop at once)", at_next_run=True):
        return _measure(args)


def _measure(args: argparse.Namespace) -> int:
    if args.target == "detection":
        return _bench_detection(args)
    if args.target == "classic":
        return _bench_classic(args)
    if args.target == "swarm":
        return _bench_swarm(args)
    if args.target == "mutate":
        return _bench_mutate(args)
    if args.target == "hermes":
        return _bench_hermes(args)
    if args.target == "kernel":
        from sim.bench.kernel import bench_kernel

        result = bench_kernel(repeats=args.repeats)
    else:
        from sim.bench.scenarios import bench_scenarios

        scenarios = load_scenarios(args.paths or [CATALOGUE])
        result = bench_scenarios(scenarios, runs=args.runs or 20, on_done=progress(args, len(scenarios)).done)
    print(json.dumps(result, sort_keys=True) if args.json else render_figures(result))
    return EXIT_OK


def _bench_detection(args: argparse.Namespace) -> int:
    from sim.bench.detection import DETECTION_STRATEGIES, bench_detection, render
    from sim.mutation.kill_matrix import claimed_mutants
    from sim.mutation.mutants import load_mutants

    scenarios = load_scenarios(args.paths or [CATALOGUE])
    mutants = sorted(load_mutants())
    claimed = [name for name in claimed_mutants(scenarios) if name in mutants]
    if not claimed:
        raise UsageError("no given scenario names a curated mutant in must_fail_under, so there is nothing to detect")
    lines = progress(args, len(claimed) + len(DETECTION_STRATEGIES))  # each claimed mutant, then coverage per strategy
    result = bench_detection(scenarios, mutants, root_seeds=args.seeds or 20, max_runs=args.max_runs or 200, coverage_runs=args.runs or 20,
                             jobs=args.jobs, on_done=lines.done)
    print(json.dumps(result, sort_keys=True) if args.json else render(result))
    return EXIT_OK


def _bench_classic(args: argparse.Namespace) -> int:
    from sim.bench.classic import bench_classic, programs, render

    units = len(programs(args.threads)) + (2 if args.threads else 0)  # each bug, then each peer tool
    result = bench_classic(root_seeds=args.seeds or 20, cap=args.cap, on_done=progress(args, units).done,
                           threads=args.threads, peer_python=args.peer_python)
    print(json.dumps(result, sort_keys=True) if args.json else render(result))
    return EXIT_OK


def _bench_mutate(args: argparse.Namespace) -> int:
    from sim.bench.mutate import bench_mutate, render

    scenarios = load_scenarios(args.paths or [CATALOGUE])
    mutants = _chosen_mutants(args.mutants)
    result = bench_mutate(scenarios, mutants, jobs=args.jobs, out=DEFAULT_OUT / "bench-mutate",
                          on_done=progress(args, 2 * len(mutants)).done)  # each mutant selected, then in the full matrix
    print(json.dumps(result, sort_keys=True) if args.json else render(result))
    return EXIT_OK


def _bench_hermes(args: argparse.Namespace) -> int:
    """In the release's process (this command re-runs itself there): its runs timed, beside real threads."""
    from sim.cli.common import in_target_process
    from sim.scenario import targets

    try:
        target = targets.parse(args.release)
    except ValueError as error:
        raise UsageError(f"--target {error}") from None
    if targets.plugin(target) is None or not target.startswith("hermes=="):
        raise UsageError(f"--target {target}: bench hermes measures a hermes release, like hermes==0.19.0")
    if targets.loaded() != target:
        return in_target_process(target, args.argv)
    from targets.hermes.bench import bench_hermes

    units = 3  # seed 000 simulated, the generated runs, seed 000 with real threads
    result = bench_hermes(target, runs=args.runs or 30, real_runs=args.repeats, generated_runs=args.runs or 30,
                          on_done=progress(args, units).done)
    print(json.dumps(result, sort_keys=True) if args.json else render_figures(result))
    return EXIT_OK


def _swarm_workloads(paths: list[str]) -> list[Any]:
    from sim.cli.swarm import default_workloads
    from sim.scenario.names import registry
    from sim.swarm.workload_loader import load_workloads

    return load_workloads([Path(path) for path in paths or [default_workloads()]], registry())


def _bench_swarm(args: argparse.Namespace) -> int:
    from sim.bench.swarm import bench_swarm, render, render_speed, speed

    workloads = _swarm_workloads(args.paths)
    if args.speed_only:
        figures = speed(workloads, args.runs or 200)
        print(json.dumps({"benchmark": "swarm", "speed": figures}, sort_keys=True) if args.json else render_speed(figures))
        return EXIT_OK
    mutants = _chosen_mutants(args.mutants)
    if args.feedback:
        return _compare_feedback(args, workloads, mutants)
    result = bench_swarm(workloads, mutants, roots=args.seeds or 10, max_runs=args.max_runs or 2000, speed_runs=args.runs or 200,
                         jobs=args.jobs, out_dir=args.out, on_done=progress(args, len(mutants) + 2).done)  # the baseline, each mutant, the speed
    print(json.dumps(result, sort_keys=True) if args.json else render(result))
    return EXIT_OK


def _chosen_mutants(names: str | None) -> list[str]:
    """The curated mutants `--mutants` names (all of them by default); an unknown name is a usage error."""
    from sim.mutation.mutants import load_mutants

    curated = sorted(load_mutants())
    if names is None:
        return curated
    chosen = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in curated]
    if unknown or not chosen:
        raise UsageError(f"--mutants: expected curated mutant names separated by commas (python -m sim list mutants), got {names!r}")
    return chosen


def _compare_feedback(args: argparse.Namespace, workloads: list[Any], mutants: list[str]) -> int:
    from sim.bench.swarm_feedback import compare_feedback, render

    result = compare_feedback(workloads, mutants, roots=args.seeds or 10, max_runs=args.max_runs or 2000, jobs=args.jobs,
                              out_dir=args.out / "feedback", on_done=progress(args, len(mutants) + 1).done)
    print(json.dumps(result, sort_keys=True) if args.json else render(result))
    return EXIT_OK


def _json_set(path: Path | None) -> frozenset[Any]:
    """The JSON list a parent wrote for its child (run indices, scenario digests), as a set; none: empty."""
    return frozenset(json.loads(path.read_text(encoding="utf-8"))) if path else frozenset()


def _swarm_race(args: argparse.Namespace) -> int:
    """Under one mutant (run with --mutant): the first failing run of one root seed that the parent, asked over
    stdin and stdout one JSON line at a time, counts (it passes on the unmutated reference)."""
    from sim.bench.swarm_feedback import ask_parent, first_find

    found = first_find(_swarm_workloads(args.paths), args.root, args.max_runs, args.feedback, _json_set(args.known_file),
                       ask_parent)
    print(json.dumps(found, sort_keys=True), flush=True)
    return EXIT_OK


def add_swarm_race(commands: Any) -> None:
    """The internal command `bench swarm --feedback` runs under each mutant, per mode and root seed."""
    race = commands.add_parser("swarm-race")
    race.add_argument("paths", nargs="*")
    race.add_argument("--root", type=int, default=0)
    race.add_argument("--max-runs", type=positive_int, default=2000)
    race.add_argument("--feedback", action="store_true")
    race.add_argument("--known-file", type=Path, help="a JSON list of scenario digests that fail unmutated")
    race.add_argument("--json", action="store_true")
    add_mutant_option(race)
    race.set_defaults(handler=_swarm_race)


def _swarm_detect(args: argparse.Namespace) -> int:
    """Under one mutant (run with --mutant): the first failing runs of one root seed, or the shrink of one run."""
    from sim.bench.swarm import first_detection, shrink_find

    workloads = _swarm_workloads(args.paths)
    if args.shrink_index is None:
        result = first_detection(workloads, args.root, args.max_runs, _json_set(args.skip_file))
    else:
        result = shrink_find(workloads, args.root, args.shrink_index, args.out, args.under_mutant)
    print(json.dumps(result, sort_keys=True))
    return EXIT_OK


def add_swarm_detect(commands: Any) -> None:
    """The internal command `bench swarm` runs under each mutant."""
    detect = commands.add_parser("swarm-detect")
    detect.add_argument("paths", nargs="*")
    detect.add_argument("--root", type=int, default=0)
    detect.add_argument("--max-runs", type=positive_int, default=2000)
    detect.add_argument("--skip-file", type=Path, help="a JSON list of run indices that fail unmutated")
    detect.add_argument("--shrink-index", type=int)
    detect.add_argument("--out", type=Path, default=DEFAULT_OUT / "bench-swarm")
    detect.add_argument("--json", action="store_true")
    add_mutant_option(detect)
    detect.set_defaults(handler=_swarm_detect)


def add_bench(commands: Any) -> None:
    bench = commands.add_parser("bench", help="measure the simulator (ratios measured in one run)")
    bench.add_argument("target", choices=["kernel", "scenarios", "detection", "classic", "swarm", "mutate", "hermes"])
    bench.add_argument("paths", nargs="*", default=[], metavar="PATH",
                       help="scenarios, detection, mutate: files or folders (default: the catalogue); swarm: workloads (default: scenarios/swarm/)")
    add_json_options(bench)
    bench.add_argument("--repeats", type=positive_int, default=5, help="kernel: measurements per runtime; the best is kept; "
                                                                      "hermes: runs with real threads (10 s each)")
    bench.add_argument("--runs", type=positive_int,
                       help="scenarios, detection's coverage: runs per scenario (default 20); swarm: runs timed for speed (default 200); "
                            "hermes: simulated runs of seed 000, and generated runs (default 30 each)")
    bench.add_argument("--target", dest="release", default="hermes==0.19.0", metavar="TARGET",
                       help="hermes: the release measured (default hermes==0.19.0)")
    bench.add_argument("--seeds", type=positive_int, help="detection, classic: root seeds per mutant/bug, scenario and strategy (default 20); "
                                                          "swarm: root seeds per mutant (default 10)")
    bench.add_argument("--cap", type=positive_int, default=2000, help="classic: runs before a search counts as undetected")
    bench.add_argument("--threads", action="store_true",
                       help="classic: the bugs in plain threading (and three with SQLite), beside frontrun and interleave-test")
    bench.add_argument("--peer-python", metavar="PYTHON",
                       help="classic --threads: a Python >= 3.12 with interleave-test installed (default: python3.12 or newer on the PATH)")
    bench.add_argument("--max-runs", type=positive_int, help="detection, swarm: runs before a search counts as undetected (default 200; swarm 2000)")
    bench.add_argument("--out", type=Path, default=DEFAULT_OUT / "bench-swarm", metavar="DIR", help="swarm: where the shrunk finds go")
    bench.add_argument("--speed-only", action="store_true",
                       help="swarm: only the cost of a run (seconds, not the hour detection takes): no detection, no shrinking")
    bench.add_argument("--mutants", metavar="NAME,...", help="swarm, mutate: only these curated mutants (default: all)")
    bench.add_argument("--feedback", action="store_true",
                       help="swarm: compare plain swarm with coverage feedback instead (runs to first detection per mode)")
    bench.add_argument("-j", "--jobs", type=positive_int, default=os.cpu_count() or 1, help="detection, mutate: mutants measured at once")
    bench.set_defaults(handler=_bench)
