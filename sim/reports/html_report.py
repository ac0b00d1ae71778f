"""One run as a self-contained HTML page: a swimlane timeline, the violation and its witnesses, and the repro.

The terminal timeline shows the events around the witnesses; a race is easier to see as lanes. Each task
gets a lane; each event is a mark on its task's lane, placed on a virtual-time axis. Most events of a run
happen at a few instants (everything between two timer firings shares one virtual time), so the axis gives
each instant a column group, its events side by side in the order they happened, with a gap and a time
label between instants: order within an instant is what a race is about. Lease holders get bars from
`lease.acquired` to `lease.released`, faults and commits their own marks, witnesses a highlight and a line
across every lane. Hovering a mark shows its trace line (SVG titles, no script).

The page carries everything inline (CSS, SVG, text) and loads nothing: it can be mailed, attached to an
issue or opened from a CI artifact years later. Every piece of text from the run is escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from contract.events import LeaseAcquired, LeaseReleased
from contract.history import HistoryEvent
from contract.ids import HolderId
from sim.core.trace import render_text
from sim.invariants import INVARIANTS
from sim.invariants.invariant import Violation
from sim.kernel.decisions import Decision, non_default
from sim.scenario.runner import RunReport

COMMIT_KINDS = ("commit.archived", "commit.published")
LIFETIME_KINDS = ("task.spawn", "task.exit")
# How the run itself ended, said so that nobody reads "ok" as the verdict beside a FAIL.
RUN_ENDINGS = {"ok": "normally", "error": "with an error", "deadlock": "in a deadlock", "budget": "out of budget"}
LANE_HEIGHT = 26
AXIS_HEIGHT = 64
LABEL_CHAR_WIDTH = 7.4
PLOT_TARGET_WIDTH = 1100.0
COLUMN_MIN, COLUMN_MAX = 11.0, 24.0
INSTANT_GAP = 16.0
TICK_SPACING = 26.0
RIGHT_PAD = 30.0


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


# ---- the axis ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """Where each event sits (by seq), the instants' starting x with their times, and the plot's right end."""

    x: dict[int, float]
    instants: list[tuple[float, float]]
    right: float


def build_axis(history: Sequence[HistoryEvent], left: float) -> Axis:
    """Columns of equal width per event, grouped by instant, a gap between instants."""
    instants = len({event.time for event in history})
    column = min(COLUMN_MAX, max(COLUMN_MIN, (PLOT_TARGET_WIDTH - instants * INSTANT_GAP) / max(1, len(history))))
    x: dict[int, float] = {}
    starts: list[tuple[float, float]] = []
    cursor = left
    previous: float | None = None
    for event in history:
        if event.time != previous:
            cursor += INSTANT_GAP
            starts.append((cursor - INSTANT_GAP / 2, event.time))
            previous = event.time
        x[event.seq] = cursor + column / 2
        cursor += column
    return Axis(x, starts, cursor + RIGHT_PAD)


def _time_label(seconds: float) -> str:
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"


# ---- the swimlane --------------------------------------------------------------------------------


def task_lanes(history: Iterable[HistoryEvent]) -> list[str]:
    """Task names in the order they first appear."""
    return list(dict.fromkeys(event.task for event in history))


@dataclass(frozen=True)
class LeaseBar:
    """One holding of a session's lease, from its `lease.acquired` to its `lease.released` (or the end)."""

    row: str
    start: int
    end: int | None


def lease_bars(history: Sequence[HistoryEvent]) -> list[LeaseBar]:
    open_since: dict[tuple[str, HolderId], int] = {}
    bars: list[LeaseBar] = []
    for record in history:
        event = record.event
        if not isinstance(event, (LeaseAcquired, LeaseReleased)):
            continue
        holder = (event.session, event.holder)
        if isinstance(event, LeaseAcquired):
            open_since[holder] = record.seq
        elif holder in open_since:
            bars.append(LeaseBar(_lease_row(*holder), open_since.pop(holder), record.seq))
    bars += [LeaseBar(_lease_row(*holder), start, None) for holder, start in open_since.items()]
    return sorted(bars, key=lambda bar: bar.start)


def _lease_row(session: str, holder: HolderId) -> str:
    return f"lease {session} · {holder.attempt or holder}"


def _category(kind: str) -> str:
    if kind == "fault.fired":
        return "fault"
    if kind in COMMIT_KINDS:
        return "commit"
    if kind in LIFETIME_KINDS:
        return "life"
    return "lease" if kind.startswith("lease.") else "event"


def _mark(event: HistoryEvent, x: float, y: float, line: str, witness: bool) -> str:
    """An event's mark: its shape says its category; a witness gets a halo; faults and commits a label."""
    category = _category(event.kind)
    title = f"<title>{_e(line)}</title>"
    parts = [f'<circle class="halo" cx="{x:.1f}" cy="{y:.1f}" r="10"/>'] if witness else []
    if category == "fault":
        parts.append(f'<path class="m fault" d="M{x:.1f} {y - 7:.1f} L{x + 7:.1f} {y + 6:.1f} L{x - 7:.1f} {y + 6:.1f} Z">{title}</path>'
                     f'<text class="note" x="{x + 8:.1f}" y="{y - 4:.1f}">{_e(event.fields.get("fault_kind", "fault"))}</text>')
    elif category == "commit":
        parts.append(f'<rect class="m commit" x="{x - 6:.1f}" y="{y - 6:.1f}" width="12" height="12">{title}</rect>'
                     f'<text class="note" x="{x + 8:.1f}" y="{y - 4:.1f}">{_e(event.kind.split(".")[-1])}</text>')
    elif category == "life":
        parts.append(f'<rect class="m life" x="{x - 1.5:.1f}" y="{y - 7:.1f}" width="3" height="14">{title}</rect>')
    else:
        parts.append(f'<circle class="m {category}" cx="{x:.1f}" cy="{y:.1f}" r="{4.5 if category == "lease" else 3.5}">{title}</circle>')
    return "".join(parts)


def swimlane_svg(history: Sequence[HistoryEvent], witnesses: Sequence[int]) -> str:
    """The timeline: lease rows, then a lane per task; witness lines drawn across every row."""
    lanes = task_lanes(history)
    bars = lease_bars(history)
    lease_rows = list(dict.fromkeys(bar.row for bar in bars))
    rows = lease_rows + lanes
    left = 16 + LABEL_CHAR_WIDTH * max((len(row) for row in rows), default=8)
    axis = build_axis(history, left)
    height = AXIS_HEIGHT + LANE_HEIGHT * len(rows) + 12
    y_of = {row: AXIS_HEIGHT + LANE_HEIGHT * i + LANE_HEIGHT / 2 for i, row in enumerate(rows)}
    lines = dict(zip((event.seq for event in history), render_text(history).splitlines()))
    out = [f'<svg class="swimlane" width="{axis.right:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {axis.right:.0f} {height:.0f}" role="img" aria-label="timeline of the run, a lane per task">']
    out += _rows(rows, lease_rows, y_of, left, axis.right)
    out += _ticks(axis, height)
    out += _lifelines(history, axis, y_of)
    for bar in bars:
        out.append(_bar(bar, axis, y_of[bar.row], lines))
    for number, seq in enumerate(witnesses, start=1):
        out.append(f'<line class="wline" x1="{axis.x[seq]:.1f}" y1="{AXIS_HEIGHT - 18}" x2="{axis.x[seq]:.1f}" y2="{height - 6:.0f}"/>'
                   f'<text class="wnum" x="{axis.x[seq]:.1f}" y="{AXIS_HEIGHT - 21}">W{number}</text>')
    marked = set(witnesses)
    for event in history:
        out.append(_mark(event, axis.x[event.seq], y_of[event.task], lines[event.seq], event.seq in marked))
    out.append("</svg>")
    return "\n".join(out)


def _rows(rows: Sequence[str], lease_rows: Sequence[str], y_of: dict[str, float], left: float, right: float) -> list[str]:
    out = []
    for i, row in enumerate(rows):
        top = y_of[row] - LANE_HEIGHT / 2
        kind = "leaserow" if row in lease_rows else ("odd" if i % 2 else "even")
        out.append(f'<rect class="row {kind}" x="0" y="{top:.1f}" width="{right:.0f}" height="{LANE_HEIGHT}"/>'
                   f'<text class="lane" x="8" y="{y_of[row] + 4:.1f}">{_e(row)}</text>')
    out.append(f'<line class="labeledge" x1="{left:.1f}" y1="{AXIS_HEIGHT}" x2="{left:.1f}" y2="{AXIS_HEIGHT + LANE_HEIGHT * len(rows)}"/>')
    return out


def _ticks(axis: Axis, height: float) -> list[str]:
    """A gridline at every instant; a time label where there is room for one."""
    out = [f'<text class="axistitle" x="8" y="{AXIS_HEIGHT - 38}">virtual time →</text>']
    labelled = -TICK_SPACING
    for x, seconds in axis.instants:
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{AXIS_HEIGHT - 34}" x2="{x:.1f}" y2="{height - 6:.0f}"/>')
        if x - labelled >= TICK_SPACING:
            out.append(f'<text class="tick" x="{x:.1f}" y="{AXIS_HEIGHT - 38}">{_e(_time_label(seconds))}</text>')
            labelled = x
    return out


def _lifelines(history: Sequence[HistoryEvent], axis: Axis, y_of: dict[str, float]) -> list[str]:
    """A thin line per task from its first event to its last: when it was alive."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for event in history:
        first.setdefault(event.task, event.seq)
        last[event.task] = event.seq
    return [f'<line class="lifeline" x1="{axis.x[first[task]]:.1f}" y1="{y_of[task]:.1f}" x2="{axis.x[last[task]]:.1f}" y2="{y_of[task]:.1f}"/>'
            for task in first]


def _bar(bar: LeaseBar, axis: Axis, y: float, lines: dict[int, str]) -> str:
    x0 = axis.x[bar.start]
    x1 = axis.right - RIGHT_PAD if bar.end is None else axis.x[bar.end]
    until = "the end of the run (never released)" if bar.end is None else lines[bar.end].strip()
    title = f"{bar.row}\nfrom: {lines[bar.start].strip()}\nuntil: {until}"
    kind = "bar open" if bar.end is None else "bar"
    return (f'<rect class="{kind}" x="{x0:.1f}" y="{y - 6:.1f}" width="{max(x1 - x0, 3):.1f}" height="12" rx="3">'
            f'<title>{_e(title)}</title></rect>')


# ---- the page ------------------------------------------------------------------------------------


CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330; margin: 24px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 6px; }
h2 { font-size: 16px; margin: 26px 0 8px; }
.verdict { display: inline-block; padding: 1px 8px; border-radius: 4px; color: #fff; font-size: 14px; vertical-align: 3px; }
.verdict.fail { background: #c62828; }
.verdict.pass { background: #2e7d32; }
.explanation { font-size: 15px; margin: 4px 0 10px; padding: 8px 12px; background: #fff4e5; border-left: 4px solid #ef6c00; }
.facts { color: #4a5263; margin: 0 0 6px; }
.invariant { color: #4a5263; margin: 0 0 10px; }
.facts b { color: #1d2330; font-weight: 600; }
pre, code { font: 12.5px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
pre.command { background: #1d2330; color: #f3f5f9; padding: 10px 14px; border-radius: 6px; overflow-x: auto; }
pre.text { background: #f6f7f9; padding: 10px 14px; border-radius: 6px; overflow-x: auto; }
.scroll { overflow-x: auto; border: 1px solid #d9dde5; border-radius: 6px; }
.legend { display: flex; flex-wrap: wrap; gap: 16px; margin: 0 0 8px; color: #4a5263; }
.legend svg { vertical-align: -3px; margin-right: 4px; }
svg.swimlane text { font: 12px ui-monospace, Menlo, Consolas, monospace; fill: #1d2330; }
svg.swimlane text.tick { font-size: 11px; fill: #4a5263; text-anchor: middle; }
svg.swimlane text.axistitle { font: 12px system-ui, sans-serif; fill: #4a5263; }
svg.swimlane text.wnum { font: 700 12px system-ui, sans-serif; fill: #b45309; text-anchor: middle; }
svg.swimlane text.note { font: 600 10.5px system-ui, sans-serif; fill: #1d2330; paint-order: stroke; stroke: #fff; stroke-width: 3px; }
.row.even { fill: #ffffff; } .row.odd { fill: #f4f6f9; } .row.leaserow { fill: #eef4fc; }
.labeledge { stroke: #c3c9d4; }
.grid { stroke: #e1e5ec; stroke-width: 1; }
.lifeline { stroke: #aab2bf; stroke-width: 1.5; }
.m.event { fill: #6b7585; } .m.life { fill: #aab2bf; } .m.lease { fill: #1e66c9; }
.m.fault { fill: #d32f2f; } .m.commit { fill: #2e9d44; }
.bar { fill: #1e66c9; fill-opacity: .35; stroke: #1e66c9; } .bar.open { stroke-dasharray: 4 3; }
.halo { fill: #fbbf24; fill-opacity: .55; stroke: #d97706; stroke-width: 2; }
.wline { stroke: #d97706; stroke-width: 1.5; stroke-dasharray: 5 3; }
.m:hover, .bar:hover { stroke: #1d2330; stroke-width: 2; }
table.witnesses { border-collapse: collapse; }
table.witnesses td, table.witnesses th { padding: 3px 10px; border-bottom: 1px solid #e1e5ec; text-align: left; vertical-align: top; }
table.witnesses td.fields { font: 12.5px ui-monospace, Menlo, Consolas, monospace; }
.witness-line { background: #fde68a; display: inline-block; width: 100%; }
details { margin: 14px 0; } summary { cursor: pointer; font-weight: 600; }
ol.decisions { columns: 4 220px; font: 12.5px ui-monospace, Menlo, Consolas, monospace; }
ol.decisions .nd { color: #b45309; font-weight: 700; }
"""

LEGEND = (
    ('<circle cx="7" cy="7" r="3.5" class="m event"/>', "event"),
    ('<rect x="5.5" y="0" width="3" height="14" class="m life"/>', "task start / exit"),
    ('<circle cx="7" cy="7" r="4.5" class="m lease"/>', "lease event"),
    ('<rect x="0" y="3" width="14" height="8" rx="2" class="bar"/>', "lease held (dashed: never released)"),
    ('<path d="M7 0 L14 13 L0 13 Z" class="m fault"/>', "fault fired"),
    ('<rect x="1" y="1" width="12" height="12" class="m commit"/>', "commit archived / published"),
    ('<circle cx="7" cy="7" r="6" class="halo"/>', "witness of the violation"),
)


def render(report: RunReport, replay: str, mutant: str | None = None) -> str:
    """The whole page for one run; `replay` is the command that reproduces it, `mutant` the curated mutant the run
    was made under (None: the unmodified reference)."""
    violation = report.violations[0] if report.violations else None
    history = report.result.history
    witnesses = sorted(set(violation.witnesses)) if violation is not None else []  # W1 first in time
    title = f"{report.scenario.name}: {violation.invariant if violation else 'all invariants hold'}"
    body = [
        _heading(report, violation, mutant),
        "<h2>Replay</h2>", f'<pre class="command">{_e(replay)}</pre>',
        "<h2>Timeline</h2>", _legend(),
        f'<div class="scroll">{swimlane_svg(history, witnesses)}</div>',
        _witness_table(history, witnesses, violation),
        _events(history, witnesses),
        _scenario_text(report),
        _decisions(report.result.decisions),
    ]
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{_e(title)}</title>\n'
            f"<style>{CSS}</style>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n")


def write_report(report: RunReport, replay: str, path: Path, mutant: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(report, replay, mutant), encoding="utf-8")
    return path


def _heading(report: RunReport, violation: Violation | None, mutant: str | None) -> str:
    result = report.result
    if violation is None:
        verdict = '<span class="verdict pass">PASS</span> all invariants hold'
        explanation = ""
    else:
        verdict = f'<span class="verdict fail">FAIL</span> {_e(violation.invariant)}'
        explanation = f'<p class="explanation">{_e(violation.explanation)}</p>\n{_invariant_text(violation.invariant)}'
    code = "the unmodified reference" if mutant is None else f"mutant {mutant} (the reference with that fix reverted)"
    facts = [("code", code), ("seed", report.seed), ("run ended", RUN_ENDINGS.get(result.outcome, result.outcome)),
             ("steps", result.steps),
             ("decisions", f"{non_default(result.decisions)} (of {len(result.decisions)} choice points)"),
             ("virtual time", _time_label(result.virtual_s)), ("events", len(result.history)),
             ("faults fired", ", ".join(f"{spec.kind} ×{count}" for spec, count in zip(report.scenario.faults, report.fired)) or "none")]
    facts_html = " · ".join(f"{_e(name)} <b>{_e(value)}</b>" for name, value in facts)
    return (f"<h1>{_e(report.scenario.name)} {verdict}</h1>\n{explanation}\n"
            f'<p class="facts">{facts_html}</p>')


def _invariant_text(name: str) -> str:
    """What the violated invariant requires, and the races it guards (a harness failure names none)."""
    invariant = INVARIANTS.get(name)
    if invariant is None:
        return ""
    races = f" (races {', '.join(invariant.races)})" if invariant.races else ""
    return f'<p class="invariant">The invariant {_e(name)}{_e(races)}: {_e(invariant.description)}</p>'


def _legend() -> str:
    items = "".join(f'<span><svg width="14" height="14" viewBox="0 0 14 14">{shape}</svg>{_e(text)}</span>' for shape, text in LEGEND)
    return f'<div class="legend">{items}</div>'


def _witness_table(history: Sequence[HistoryEvent], witnesses: Sequence[int], violation: Violation | None) -> str:
    if violation is None:
        return ""
    if not witnesses:
        return f"<h2>Witnesses</h2>\n<p>This violation names no witness events; it was found at {_e(_time_label(violation.time))}.</p>"
    rows = "".join(
        f"<tr><td>W{i}</td><td>{_e(_time_label(event.time))}</td><td>{_e(event.task)}</td><td>{_e(event.kind)}</td>"
        f'<td class="fields">{_e(json.dumps(event.fields, sort_keys=True, default=str))}</td></tr>'
        for i, event in enumerate((history[seq] for seq in witnesses), start=1)
    )
    return ("<h2>Witnesses</h2>\n<table class=\"witnesses\"><tr><th></th><th>time</th><th>task</th><th>event</th>"
            f"<th>fields</th></tr>{rows}</table>")


def _events(history: Sequence[HistoryEvent], witnesses: Sequence[int]) -> str:
    """The terminal's text timeline, whole, witness lines highlighted."""
    marked = set(witnesses)
    lines = [
        f'<span class="witness-line">&gt; {_e(line)}</span>' if event.seq in marked else f"  {_e(line)}"
        for event, line in zip(history, render_text(history).splitlines())
    ]
    return (f"<details><summary>All {len(history)} events, as text</summary>\n"
            f'<pre class="text">' + "\n".join(lines) + "</pre></details>")


def _scenario_text(report: RunReport) -> str:
    path = Path(report.scenario.path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        text = f"(the scenario file could not be read: {error})"
    return f'<details open><summary>Scenario {_e(path)}</summary>\n<pre class="text">{_e(text)}</pre></details>'


def _decisions(decisions: Sequence[Decision]) -> str:
    items = "".join(
        f'<li class="{"nd" if decision.choice != 0 else "d"}">{_e(str(decision))}</li>' for decision in decisions
    )
    return (f"<details><summary>Decision list ({non_default(decisions)} decisions at {len(decisions)} choice points; "
            f"the others took the default)</summary>\n"
            f'<ol class="decisions" start="0">{items}</ol></details>')

