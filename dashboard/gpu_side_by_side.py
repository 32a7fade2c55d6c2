"""The GPU tab's view of every GPU of one run side by side: a straggler shows at a glance.

For each selected run that recorded two or more GPUs: a heatmap of utilization (one row per GPU over
time) and a table of each GPU's means over the selected window, the GPU furthest below the others'
median utilization marked. Reads telemetry.csv only (through dashboard.runs), draws with figures.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash import dcc, html

from dashboard import figures
from dashboard.runs import RunInfo, read_telemetry
from runformat import columns

HEATMAP_BINS = 200
STRAGGLER_GAP_PCT = 10.0  # utilization points below the other GPUs' median that mark a straggler
MEANS = (("util_pct", "Utilization", "%"), ("power_w", "Power", "W"), ("sm_clock_mhz", "SM clock", "MHz"),
         ("mem_used_bytes", "Memory used", "GiB"), ("temp_c", "Temperature", "°C"))  # fmt: skip


def gpu_indices(run: RunInfo) -> list[int]:
    return columns.gpu_indices(read_telemetry(run).columns, columns.UTIL_PCT)


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
            column = columns.gpu_column(index, suffix)
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


def gpu_tab_parts(runs: Sequence[RunInfo], x_mode: str, window: tuple[float, float]) -> list[Any]:
    """For each run with ≥ 2 GPUs: the utilization heatmap (one row per GPU) and the per-GPU table."""
    parts: list[Any] = []
    for run in runs:
        if len(gpu_indices(run)) < 2:
            continue
        heatmap = utilization_heatmap(run, x_mode, window)
        if heatmap is not None:
            parts.append(
                dcc.Graph(figure=heatmap, id=f"graph-gpus-{run.run_id}", config={"displaylogo": False},
                          className="graph")
            )  # fmt: skip
        parts.append(_table(run, per_gpu_means(run, window)))
    return parts


def utilization_heatmap(run: RunInfo, x_mode: str, window: tuple[float, float]) -> go.Figure | None:
    """Mean utilization per time bin, one row per GPU; None without readings in the window."""
    frame = read_telemetry(run)
    clock = figures.clock_of(run, frame)
    indices = gpu_indices(run)
    if clock is None or not len(clock.seconds) or not indices:
        return None
    low_s, high_s = clock.base.window_s(window)
    low_s, high_s = max(low_s, float(clock.seconds[0])), min(high_s, float(clock.seconds[-1]))
    if high_s <= low_s:
        return None
    edges = np.linspace(low_s, high_s, HEATMAP_BINS + 1)
    bins = np.clip(np.searchsorted(edges, clock.seconds, side="right") - 1, 0, HEATMAP_BINS - 1)
    inside = (clock.seconds >= low_s) & (clock.seconds <= high_s)
    z = np.full((len(indices), HEATMAP_BINS), np.nan)
    for row, index in enumerate(indices):
        values = clock.values(frame, columns.gpu_column(index, columns.UTIL_PCT))
        keep = inside & np.isfinite(values)
        sums = np.bincount(bins[keep], weights=values[keep], minlength=HEATMAP_BINS)
        counts = np.bincount(bins[keep], minlength=HEATMAP_BINS)
        with np.errstate(invalid="ignore", divide="ignore"):
            z[row] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    if not np.isfinite(z).any():
        return None
    centers = (edges[:-1] + edges[1:]) / 2 + clock.base.origin_unix
    figure = go.Figure(
        go.Heatmap(
            x=clock.base.x(centers, x_mode), y=[f"gpu{i}" for i in indices], z=z, zmin=0, zmax=100,
            colorscale="Viridis", colorbar={"title": {"text": "%"}},
            hovertemplate="%{y} at %{x:.4~g}: %{z:.0f} %<extra></extra>",
        )
    )  # fmt: skip
    figure.update_layout(
        title=f"Utilization of every GPU · {run.label}", xaxis_title=figures.x_title(x_mode),
        height=max(220, 60 + 28 * len(indices)), showlegend=False,
    )  # fmt: skip
    return figure


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
