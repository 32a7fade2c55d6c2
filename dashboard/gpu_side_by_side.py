"""The GPU tab's view of every GPU of one run side by side: a straggler shows at a glance.

For each selected run that recorded two or more GPUs: a heatmap of utilization (one row per GPU over
time) and a table of each GPU's means over the selected window, the GPU furthest below the others'
median utilization marked. Reads telemetry.csv only (through dashboard.runs), draws with figures.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from dash import html

from dashboard import figures
from dashboard.runs import RunInfo, read_telemetry

GPU_UTIL = re.compile(r"^gpu(\d+)_util_pct$")
STRAGGLER_GAP_PCT = 10.0  # utilization points below the other GPUs' median that mark a straggler
MEANS = (("util_pct", "Utilization", "%"), ("power_w", "Power", "W"), ("sm_clock_mhz", "SM clock", "MHz"),
         ("mem_used_bytes", "Memory used", "GiB"), ("temp_c", "Temperature", "°C"))  # fmt: skip


def gpu_indices(run: RunInfo) -> list[int]:
    columns = read_telemetry(run).columns
    return sorted(int(m.group(1)) for c in columns if (m := GPU_UTIL.match(str(c))))


def per_gpu_means(run: RunInfo, window: tuple[float, float]) -> dict[int, dict[str, float | None]]:
    """Each GPU's mean of every MEANS column over the window (percent of the run), None when unrecorded."""
    frame = read_telemetry(run)
    clock = figures.clock_of(run, frame)
    if clock is None or not len(clock.seconds):
        return {}
    low_s, high_s = clock.base.window_s(window)
    inside = (clock.seconds >= low_s) & (clock.seconds <= high_s)
    means: dict[int, dict[str, float | None]] = {}
    for index in gpu_indices(run):
        means[index] = {}
        for suffix, _, unit in MEANS:
            column = f"gpu{index}_{suffix}"
            values = clock.values(frame, column)[inside] if column in frame else np.array([])
            values = values[np.isfinite(values)]
            scale = 2**30 if unit == "GiB" else 1.0
            means[index][suffix] = float(values.mean() / scale) if len(values) else None
    return means


def straggler(means: dict[int, dict[str, float | None]]) -> tuple[int, float] | None:
    """The GPU whose utilization is furthest below the other GPUs' median, and by how many points."""
    known = {i: m["util_pct"] for i, m in means.items() if m.get("util_pct") is not None}
    if len(known) < 2:
        return None
    gaps = {i: float(np.median([v for j, v in known.items() if j != i])) - u for i, u in known.items()}
    worst = max(gaps, key=lambda i: gaps[i])
    return (worst, gaps[worst]) if gaps[worst] >= STRAGGLER_GAP_PCT else None


def side_by_side(runs: Sequence[RunInfo], x_mode: str, window: tuple[float, float]) -> list[tuple[str, Any]]:
    """(kind, item) per run with ≥ 2 GPUs: ("figure", heatmap) and ("table", html.Table)."""
    parts: list[tuple[str, Any]] = []
    for run in runs:
        indices = gpu_indices(run)
        if len(indices) < 2:
            continue
        rows = [(f"gpu{i}", f"gpu{i}_util_pct") for i in indices]
        heatmap = figures.heatmap_figure(run, x_mode, window, rows=rows, title="Utilization of every GPU")
        if heatmap is not None:
            parts.append(("figure", heatmap))
        parts.append(("table", _table(run, per_gpu_means(run, window))))
    return parts


def _table(run: RunInfo, means: dict[int, dict[str, float | None]]) -> Any:
    slow = straggler(means)
    titles = [html.Th(f"{title} ({unit})") for _, title, unit in MEANS]
    header = html.Tr([html.Th("GPU"), *titles, html.Th("")])
    body = []
    for index, values in means.items():
        cells = [html.Td("n/a" if values[s] is None else f"{values[s]:,.1f}") for s, _, _ in MEANS]
        flag = f"straggler: {slow[1]:.0f} points below the others" if slow and slow[0] == index else ""
        body.append(html.Tr([html.Td(f"gpu{index}"), *cells, html.Td(flag)]))
    caption = html.Caption(f"Every GPU of {run.label}: means over the selected window")
    return html.Table([caption, html.Thead(header), html.Tbody(body)], className="gpu-side-by-side")
