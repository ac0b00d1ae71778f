"""What the detection and classic benchmarks share: the figures of one search repeated over root seeds,
and the text table of runs to detection, one row per subject and one column per strategy."""

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
