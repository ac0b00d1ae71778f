"""What the benchmarks share: the figures of one search repeated over root seeds, the text table of runs to
detection (one row per subject, one column per strategy), and a result's figures as aligned `name: value` lines."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def summary(runs: Sequence[int | None], cap: int) -> dict[str, Any]:
    """Median and max over root seeds, an undetected search (None) counting as `cap`."""
    capped = [cap if r is None else r for r in runs]
    return {"runs": list(runs), "median": statistics.median(capped), "max": max(capped),
            "undetected": sum(r is None for r in runs)}


def runs_table(labels: Sequence[str], rows: Sequence[tuple[Sequence[str], dict[str, Any]]], strategies: Sequence[str]) -> list[str]:
    """Aligned lines: each row's labels, then median/max runs per strategy, flagging undetected searches."""
    table = [(*labels, *(f"{s} med/max" for s in strategies))]
    for row_labels, figures_by_strategy in rows:
        cells = []
        for strategy in strategies:
            figures = figures_by_strategy[strategy]
            flag = f" ({figures['undetected']} undetected)" if figures["undetected"] else ""
            cells.append(f"{figures['median']:g}/{figures['max']}{flag}")
        table.append((*row_labels, *cells))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def render_figures(result: dict[str, Any], indent: str = "") -> str:
    """`name: value` lines, aligned; a nested table's figures indented under its name."""
    width = max(map(len, result), default=0)
    lines = []
    for key, value in result.items():
        if isinstance(value, dict):
            lines += [f"{indent}{key}:", render_figures(value, indent + "  ")]
        elif isinstance(value, (list, tuple)):
            lines.append(f"{indent}{key:<{width}}  {', '.join(map(str, value))}")
        else:
            lines.append(f"{indent}{key:<{width}}  {value}")
    return "\n".join(lines)
