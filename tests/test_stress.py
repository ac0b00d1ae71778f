"""The reference for real: a short stress run (three worker processes, about twenty seconds), the log merge,
and which invariants judge a real run.

The ten-minute run (`python -m sim stress --duration 600`) is not part of the test suite; this one proves
the machinery end to end: processes are struck and restarted, and the checker finds the database sound and
every applicable invariant holding.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sim.invariants import INVARIANTS
from sim.stress.check import NOT_APPLICABLE, REAL_INVARIANTS, planted_holders_reclaimed
from sim.stress.log import merged_history

ROOT = Path(__file__).resolve().parent.parent


def stress(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sim", "stress", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=240)


def test_a_short_real_run_strikes_restarts_and_holds_every_invariant(tmp_path):
    done = stress("--duration", "20", "--processes", "3", "--seed", "1", "--json", "--workdir", str(tmp_path / "run"))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["violations"] == [] and report["integrity"] == ["ok"]
    assert report["kills"] >= 1 and report["restarts"] >= 1
    assert report["acknowledged_messages"] > 0 and report["commits"] > 0
    assert report["planted_reclaims"] >= 1, "a session's first lease is taken from the planted recycled-pid holder"
    assert sorted(report["invariants_checked"]) == sorted(REAL_INVARIANTS)
    started, first = done.stderr.splitlines()[:2]
    assert started.startswith("started 3 workers: w1 pid ") and "kills" in first, "a progress line per ten seconds on stderr"
    logs = {path.name for path in (tmp_path / "run").glob("*.jsonl")}
    assert logs == {"parent.jsonl", "w1.jsonl", "w2.jsonl", "w3.jsonl"}


def test_the_invariants_split_into_judged_and_not_applicable_with_reasons():
    assert set(REAL_INVARIANTS).isdisjoint(NOT_APPLICABLE)
    assert set(REAL_INVARIANTS) | set(NOT_APPLICABLE) == set(INVARIANTS)
    assert all(reason for reason in NOT_APPLICABLE.values())


def line(t: float, writer: str, kind: str, now: float | None = None, **fields) -> str:
    return json.dumps({"t": t, "now": t if now is None else now, "process": writer, "pid": 7, "task": "main",
                       "kind": kind, "fields": fields})


def test_logs_merge_in_commit_order_with_clock_readings_as_times_and_named_deaths(tmp_path):
    (tmp_path / "w1.jsonl").write_text("\n".join([
        line(1.0, "w1-a", "process.started", process="w1-a", pid=7),
        line(3.0, "w1-a", "lease.acquired", now=2.5, session="s", holder="h"),
    ]) + '\n{"t": 4.0, "proc', encoding="utf-8")  # the last line, cut short by SIGKILL
    (tmp_path / "parent.jsonl").write_text(line(2.0, "parent", "process.crashed", pid=7) + "\n", encoding="utf-8")
    merged = merged_history(tmp_path.glob("*.jsonl"))
    assert [event.kind for event in merged.events] == ["process.started", "process.crashed", "lease.acquired"]
    assert merged.keys == [1.0, 2.0, 3.0] and merged.events[2].time == 2.5
    assert merged.events[1].fields["process"] == "w1-a" and merged.events[0].task == "w1-a/main"


def test_under_the_reused_pid_mutant_the_workers_sit_out_behind_the_planted_holder(tmp_path):
    """The real probe (`reference.identity`), which no simulated run calls, judged: with the recycled pid taken for
    its holder's, no worker can take a planted row, and the first one that wants it sits out."""
    done = stress("--duration", "20", "--processes", "3", "--seed", "1", "--json", "--workdir", str(tmp_path / "run"),
                  "--mutant", "reused-pid-is-not-the-holder")
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["planted_reclaims"] == 0
    assert [v["invariant"] for v in report["violations"]] == ["dead_holder_reclaimable"]


def planted(t: float, session: str) -> str:
    return line(t, "parent", "stress.lease_planted", session=session, holder=f"proc=recycled:pid=7:start=1:attempt=1:{session}")


def test_a_planted_holder_is_reclaimed_by_the_first_worker_that_wants_its_lease(tmp_path):
    holder = "proc=w1-a:pid=8:start=2:attempt=1"
    (tmp_path / "parent.jsonl").write_text(planted(1.0, "s0") + "\n" + planted(1.0, "s1") + "\n", encoding="utf-8")
    (tmp_path / "w1.jsonl").write_text("\n".join([
        line(2.0, "w1-a", "lease.acquired", session="s0", holder=holder),
        line(3.0, "w1-a", "lease.contended", session="s0", holder=holder),
        line(4.0, "w1-a", "lease.contended", session="s1", holder=holder),
    ]) + "\n", encoding="utf-8")
    history = merged_history(tmp_path.glob("*.jsonl")).events
    sat_out, reclaimed = planted_holders_reclaimed(history)
    assert reclaimed == 1 and sat_out is not None and "sat out behind proc=recycled" in sat_out.explanation
    assert planted_holders_reclaimed(history[:-1]) == (None, 1), "once reclaimed, the row is anyone's to contend for"


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("", encoding="utf-8")
    for args in (["--mutant", "no-such-fix"], ["--workdir", str(tmp_path / "busy")], ["--duration", "0"]):
        done = stress(*args)
        assert done.returncode == 2 and done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_python_m_reference_stress_is_the_same_command():
    done = subprocess.run([sys.executable, "-m", "reference", "stress", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "--processes" in done.stdout


KEPT_RUNS = Path(__file__).parent / "stress_runs"


def test_a_killed_holder_is_not_credited_with_the_commit_of_the_next_holder(tmp_path):
    """A real run kept as found (logs and database of `python -m sim stress --processes 2 --duration 8 --seed 2`):
    w1 was killed (SIGKILL) while its attempt held the lease of a session, above whose watermark w2 then
    appended a platform message and, once w1 was dead, committed a summary in place that covered it. The final
    database shows w2's summary above w1's watermark; crediting it to w1 at its death (as if w1 had committed
    just before it died) made w1's commit the first after the message, whose watermark does not cover it, and
    `acknowledged_appends_survive` reported the message lost. A summary written after the death is not the
    dead attempt's."""
    import tarfile

    from reference.stress_worker import STRESS_CONFIG
    from sim.stress.check import check

    with tarfile.open(KEPT_RUNS / "killed_holder_then_next_commit.tar.gz") as kept:
        kept.extractall(tmp_path, filter="data")
    result = check(tmp_path / "stress.db", merged_history(tmp_path.glob("*.jsonl")), STRESS_CONFIG)
    assert result.violations == [] and "acknowledged_appends_survive" in result.invariants
