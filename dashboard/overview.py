"""Figures over whole runs: Mean & peak per component, and training progress beside utilization.

Pure functions of RunInfo, like dashboard.figures (whose clock, downsampling and colours they use).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures import PERCENT_RANGE, Metric, display_names, line_trace, run_colors, x_title
from dashboard.runs import RunInfo, read_telemetry, read_training
from dashboard.timebase import FULL_WINDOW, WHOLE_RUN, TimeView, clock_of, series_xy
from runformat.columns import gpu_pattern

SUMMARY_METRICS: list[tuple[str, Metric]] = [
    ("%", Metric("cpu_util_pct", "CPU", "%")),
    ("%", Metric("mem_util_pct", "memory", "%")),
    ("%", Metric("disk_util_pct", "disk", "%")),
    ("%", Metric(gpu_pattern("util_pct"), "GPU", "%")),
    ("%", Metric(gpu_pattern("mem_util_pct"), "GPU memory", "%")),
    ("°C", Metric("cpu_temp_c", "CPU", "°C")),
    ("°C", Metric(gpu_pattern("temp_c"), "GPU", "°C")),
    ("W", Metric(gpu_pattern("power_w"), "GPU", "W")),
]


def summary_figure(runs: Sequence[RunInfo], window: tuple[float, float] = FULL_WINDOW) -> go.Figure | None:
    """Mean (solid) and peak (hatched) per component per run, over the chosen window of each run.

    Only components some selected run recorded get a category; a run that lacks one gets an "n/a"
    label there instead of a bar (never a zero). None when no run recorded any component.
    """
    all_stats = {run.run_id: component_stats(run, window) for run in runs}
    measured = [key for key in summary_keys() if any(key in stats for stats in all_stats.values())]
    units = list(dict.fromkeys(unit for unit, _ in measured))
    if not units:
        return None
    widths = {"%": 0.6, "°C": 0.25, "W": 0.15}
    figure = make_subplots(
        rows=1,
        cols=len(units),
        column_widths=[widths[unit] for unit in units],
        subplot_titles=units,
        horizontal_spacing=0.06,
    )
    names, colors = display_names(runs), run_colors(runs)
    for run in runs:
        stats = all_stats[run.run_id]
        for col, unit in enumerate(units, start=1):
            labels = [label for u, label in measured if u == unit]
            for position, kind in enumerate(("mean", "peak")):
                values = [
                    stats[(unit, label)][position] if (unit, label) in stats else None for label in labels
                ]
                figure.add_trace(
                    go.Bar(
                        x=labels,
                        y=[0.0 if v is None else v for v in values],
                        text=["n/a" if v is None else "" for v in values],
                        textposition="outside",
                        cliponaxis=False,
                        customdata=["not recorded" if v is None else f"{v:.1f} {unit}" for v in values],
                        name=f"{names[run.run_id]} {kind}",
                        legendgroup=run.run_id,
                        showlegend=col == 1,
                        offsetgroup=f"{run.run_id}-{kind}",
                        marker={
                            "color": [
                                colors[run.run_id] if v is not None else "rgba(0,0,0,0)" for v in values
                            ],
                            "pattern": {"shape": "/" if kind == "peak" else ""},
                            "opacity": 0.55 if kind == "peak" else 1.0,
                        },
                        hovertemplate=f"{names[run.run_id]} {kind} %{{x}}: %{{customdata}}<extra></extra>",
                    ),
                    row=1,
                    col=col,
                )
    figure.update_layout(
        title="Mean and peak per component",
        barmode="group",
        height=420,
        margin={"t": 70, "l": 50, "r": 20, "b": 40},
        legend={"orientation": "h", "y": -0.15},
        showlegend=True,
    )
    return figure


def summary_keys() -> list[tuple[str, str]]:
    """(unit, component) of every Mean & peak category, in display order."""
    return [(unit, metric.title) for unit, metric in SUMMARY_METRICS]


def component_stats(run: RunInfo, window: tuple[float, float] = FULL_WINDOW) -> dict[tuple[str, str], tuple]:
    """{(unit, component): (mean, peak)} over the window; GPUs of a multi-GPU run are averaged / maxed."""
    frame = read_telemetry(run)
    clock = clock_of(run, frame)
    if clock is None:
        return {}
    low_s, high_s = clock.base.window_s(window)
    rows = slice(
        np.searchsorted(clock.seconds, low_s, "left"), np.searchsorted(clock.seconds, high_s, "right")
    )
    stats: dict[tuple[str, str], tuple] = {}
    for unit, metric in SUMMARY_METRICS:
        columns = metric.columns(frame.columns)
        values = [clock.values(frame, column)[rows] for column in columns]
        finite = [v[np.isfinite(v)] for v in values]
        if any(len(v) for v in finite):
            joined = np.concatenate(finite)
            stats[(unit, metric.title)] = (float(joined.mean()), float(joined.max()))
    return stats


TRAINING_ROWS = (("step", "global step"), ("loss_total", "total loss"), ("examples_per_s", "examples/s"))


def training_figure(runs: Sequence[RunInfo], view: TimeView = WHOLE_RUN) -> go.Figure | None:
    """Steps, loss and examples/s over time, above the CPU and GPU utilization on the same clock.

    Only the training rows some run has data for are drawn; None when no selected run has training.csv.
    """
    names, colors = display_names(runs), run_colors(runs)
    training_series = {
        (run.run_id, column): series_xy(run, read_training(run), column, view)
        for run in runs
        for column, _ in TRAINING_ROWS
    }
    if not any(len(x) for x, _ in training_series.values()):
        return None
    rows = [(c, t) for c, t in TRAINING_ROWS if any(len(training_series[(r.run_id, c)][0]) for r in runs)]
    rows.append(("utilization", "utilization %"))
    figure = make_subplots(
        rows=len(rows),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=[title for _, title in rows],
    )
    for run in runs:
        for row, (column, _) in enumerate(rows[:-1], start=1):
            x, y = training_series[(run.run_id, column)]
            if len(x):
                trace = line_trace(x, y, names[run.run_id], colors[run.run_id], row == 1, run.run_id)
                figure.add_trace(trace, row=row, col=1)
        telemetry = read_telemetry(run, ["time_unix", "cpu_util_pct", "gpu0_util_pct"])
        for column, dash in (("cpu_util_pct", "solid"), ("gpu0_util_pct", "dot")):
            x, y = series_xy(run, telemetry, column, view)
            if len(x):
                name = f"{names[run.run_id]} · {column.split('_')[0]} utilization"
                trace = line_trace(x, y, name, colors[run.run_id], True, run.run_id)
                trace.line.dash = dash
                figure.add_trace(trace, row=len(rows), col=1)
    figure.update_layout(
        height=170 + 170 * len(rows),
        title="Training progress, aligned with telemetry",
        margin={"t": 70, "l": 60, "r": 20, "b": 40},
        uirevision=f"training-{view.x_mode}",
        legend={"orientation": "h", "y": -0.08},
        showlegend=True,
    )
    figure.update_xaxes(title_text=x_title(view.x_mode), row=len(rows), col=1)
    if view.x_range is not None:
        figure.update_xaxes(range=list(view.x_range))
    figure.update_yaxes(range=PERCENT_RANGE, row=len(rows), col=1)
    return figure
