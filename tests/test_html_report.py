"""The HTML report: one self-contained page with a lane per task, the witnesses, the replay command.

The page is checked structurally on every run, and rendered in headless Chromium: where one is installed, and
always in CI (`.ci/run` installs it; without it the test fails there rather than skip).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support import run_cli

from sim.invariants.invariant import Violation
from sim.reports.html_report import render, task_lanes
from sim.scenario.loader import load_scenario
from sim.scenario.names import registry
from sim.scenario.runner import RunReport, run_once

ROOT = Path(__file__).resolve().parent.parent
LATE_RELEASE = ROOT / "scenarios" / "late_release_frees_new_holders_lease.toml"
MUTANT = "holder-qualified-release"
AWKWARD = '<b>bold</b> & "quoted"'
REPLAY = "python -m sim replay 'out/a b.repro.json'"


class Page(HTMLParser):
    """What the structural checks look at: element texts by class, and every src/href."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.by_class: dict[str, list[str]] = {}
        self.links: list[str] = []
        self._open: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.links += [value or "" for name, value in attrs if name in ("src", "href")]
        for name in (values.get("class") or "").split():
            self.by_class.setdefault(name, [])
        self._open.append(values.get("class") or "")

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for name in (self._open[-1] if self._open else "").split():
            self.by_class.setdefault(name, []).append(data)


@pytest.fixture(scope="module")
def failing(tmp_path_factory) -> RunReport:
    """A real run whose turn text needs escaping, given a violation with two witnesses (lease events)."""
    folder = tmp_path_factory.mktemp("scenario")
    path = folder / LATE_RELEASE.name
    path.write_text(LATE_RELEASE.read_text().replace("a question that triggers compaction", json.dumps(AWKWARD)[1:-1]))
    report = run_once(load_scenario(path, registry()), 0)
    leases = [event.seq for event in report.result.history if event.kind in ("lease.acquired", "lease.released")][:2]
    # Named latest first, as an invariant may name them: the page orders them by time.
    violation = Violation("lease_mutual_exclusion", f"explained with {AWKWARD}", tuple(reversed(leases)), 0.0)
    return dataclasses.replace(report, violations=[violation])


@pytest.fixture(scope="module")
def page(failing) -> str:
    return render(failing, REPLAY, MUTANT)


def test_the_page_names_the_mutant_the_run_was_made_under(failing, page):
    assert f"code <b>mutant {MUTANT} (the reference with that fix reverted)</b>" in page
    assert "code <b>the unmodified reference</b>" in render(failing, REPLAY)


def test_the_page_says_what_the_violated_invariant_requires(page):
    from sim.invariants import INVARIANTS

    invariant = INVARIANTS["lease_mutual_exclusion"]
    assert Page(page).by_class["invariant"] == [
        f"The invariant lease_mutual_exclusion (races {', '.join(invariant.races)}): {invariant.description}"]


def test_the_witnesses_are_numbered_in_the_order_they_happened(failing, page):
    first, second = sorted(failing.violations[0].witnesses)
    history = failing.result.history
    table = page[page.index('<table class="witnesses">'):]
    assert table.index(history[first].kind) < table.index(history[second].kind) or history[first].kind == history[second].kind
    rows = table.split("<tr>")[2:4]
    assert [row.split("<td>")[1].split("</td>")[0] for row in rows] == ["W1", "W2"]
    assert [float(row.split("<td>")[2].split("s</td>")[0]) for row in rows] == [history[first].time, history[second].time]
    timeline = page[page.index('<svg class="swimlane"'):]
    w1, w2 = (float(timeline.split(f">W{n}</text>")[0].rsplit('x="', 1)[1].split('"')[0]) for n in (1, 2))
    assert w1 < w2


def test_the_facts_say_how_the_run_ended_not_an_outcome_beside_fail(page):
    assert "run ended <b>normally</b>" in page
    assert "outcome" not in "".join(Page(page).by_class["facts"])


def test_every_task_has_a_lane(failing, page):
    lanes = Page(page).by_class["lane"]
    tasks = task_lanes(failing.result.history)
    assert len(tasks) > 5
    assert set(tasks) <= set(lanes)
    assert any(lane.startswith("lease s1 · ") for lane in lanes)


def test_the_violation_and_its_witnesses_stand_out(failing, page):
    parsed = Page(page)
    witnesses = failing.violations[0].witnesses
    timeline = page[page.index('<svg class="swimlane"'):]
    assert timeline.count('class="halo"') == timeline.count('class="wline"') == len(witnesses)
    assert parsed.by_class["wnum"] == [f"W{i}" for i in range(1, len(witnesses) + 1)]
    assert len(parsed.by_class["witness-line"]) == len(witnesses)
    assert "lease_mutual_exclusion" in page.split("<h1>")[1].split("</h1>")[0]
    assert "fault" in parsed.by_class and "commit" in parsed.by_class and "bar" in parsed.by_class


def test_the_replay_command_scenario_and_decisions_are_on_the_page(failing, page):
    parsed = Page(page)
    assert parsed.by_class["command"] == [REPLAY]
    assert 'kind = "second_process"' in "".join(parsed.by_class["text"])
    assert f"decisions at {len(failing.result.decisions)} choice points" in page
    assert page.count('<li class="') == len(failing.result.decisions)


def test_all_text_is_escaped(page):
    assert "<b>bold</b>" not in page
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;" in page
    assert Page(page).by_class["explanation"] == [f"explained with {AWKWARD}"]


def test_the_page_loads_nothing_from_anywhere(page):
    links = Page(page).links
    assert not [link for link in links if link.startswith(("http://", "https://", "//"))]
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page and "<link" not in page and "@import" not in page


def test_run_replay_and_shrink_write_reports(tmp_path):
    def sim(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, "--mutant", MUTANT, cwd=tmp_path)

    out = tmp_path / "out"
    run = sim("run", str(LATE_RELEASE), "--out", str(out), "--report", str(tmp_path / "run.html"), "--json")
    shrunk_repro = json.loads(run.stdout)["scenarios"][0]["shrink"]["repro"]
    replay = sim("replay", shrunk_repro, "--report", str(tmp_path / "replay.html"))
    assert replay.returncode == 1 and f"report: {tmp_path / 'replay.html'}" in replay.stderr
    first, again = (tmp_path / "run.html").read_text(), (tmp_path / "replay.html").read_text()
    assert "lease_mutual_exclusion" in first and "late_release_frees_new_holders_lease-seed0.repro.json" in first
    assert "late_release_frees_new_holders_lease_shrunk" in again


def test_chromium_renders_the_page(page, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None and os.environ.get("CI"):
        pytest.fail("chromium is not installed, and CI must render the page (.ci/run installs Debian's chromium)")
    if browser is None:
        pytest.skip("chromium is not installed")
    html_path, png = tmp_path / "report.html", tmp_path / "report.png"
    html_path.write_text(page, encoding="utf-8")
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", "--window-size=1400,900", html_path.as_uri()],
        capture_output=True, timeout=30,
    )
    assert png.exists(), "chromium wrote no screenshot"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000
