"""Plotly figures of runs: pure functions from RunInfo (and the cached frames of dashboard.runs) to figures.

Long runs stay light: x is float seconds (or % of runtime) since run.json's `start_unix`, and every trace
is cut to the visible window and downsampled server-side with MinMaxLTTB (tsdownsample) to at most
`max_points` points, so a 24 h × 10 Hz run costs the browser what a short one does. Traces are SVG, not
WebGL: at that size SVG is light enough, and a browser without a GPU (a VM, a remote desktop, headless)
renders WebGL in software (tests/dashboard/test_dash_browser.py's three tests took 125 s of CPU with WebGL
traces, 74 s with SVG).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from dashboard.colors import colors_for
from dashboard.runs import RunInfo, read_telemetry, read_training
from dashboard.timebase import WHOLE_RUN, X_PERCENT, TimeView, clock_of, series_xy
from runformat.columns import (
    TIME_COLUMNS,
    UTIL_PCT,
    core_indices,
    cpu_column,
    gpu_pattern,
)

HEATMAP_BINS = 300
PERCENT_RANGE = (0, 105)
_TIME_COLUMNS = set(TIME_COLUMNS)


@dataclass(frozen=True)
class Metric:
    """One figure of a component view: every column matching `pattern` of every selected run."""

    pattern: str
    title: str
    unit: str

    def columns(self, available: Iterable[str]) -> list[str]:
        regex = re.compile(self.pattern)
        return [name for name in available if regex.fullmatch(name)]


COMPONENT_METRICS: dict[str, list[Metric]] = {
    "processor": [
        Metric("cpu_util_pct", "CPU utilization, all cores", "%"),
        Metric("proc_cpu_pct", "Launched command's CPU (100 = one core)", "% of a core"),
        Metric("cpu_freq_mhz", "CPU frequency", "MHz"),
        Metric("load1", "Load average (1 min)", "load"),
    ],
    "memory": [
        Metric("mem_util_pct", "Memory utilization", "%"),
        Metric("mem_used_bytes|proc_rss_bytes", "Memory used: system and launched command", "bytes"),
        Metric("swap_used_bytes", "Swap used", "bytes"),
    ],
    "disk": [
        Metric("disk_util_pct", "Disk busy time (busiest disk)", "%"),
        Metric("disk_read_bps|disk_write_bps", "Disk throughput", "bytes/s"),
        Metric("net_rx_bps|net_tx_bps", "Network throughput", "bytes/s"),
    ],
    "cpu-temp": [
        Metric("cpu_temp_c", "CPU temperature", "°C"),
    ],
    "gpu": [
        Metric(gpu_pattern("util_pct"), "GPU utilization", "%"),
        Metric(gpu_pattern("temp_c"), "GPU temperature", "°C"),
        Metric(
            gpu_pattern("power_w", "power_instant_w", "power_limit_w"),
            "GPU power: average, instant and limit",
            "W",
        ),
        Metric(gpu_pattern("sm_clock_mhz", "mem_clock_mhz"), "GPU clocks (SM and memory)", "MHz"),
        Metric(gpu_pattern("mem_used_bytes"), "GPU memory used", "bytes"),
        Metric(gpu_pattern("mem_util_pct"), "GPU memory-controller utilization", "%"),
    ],
}

# -------------------------------------------------------------------------------------------- figures


def display_names(runs: Sequence[RunInfo]) -> dict[str, str]:
    """Legend names: the label, made unique with the run id where two runs share one."""
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.label] = counts.get(run.label, 0) + 1
    return {
        run.run_id: run.label if counts[run.label] == 1 else f"{run.label} ({run.run_id})" for run in runs
    }


def run_colors(runs: Sequence[RunInfo]) -> dict[str, str]:
    """Stable per run across tabs and selections (dashboard.colors): CPU runs blues, GPU runs oranges."""
    return colors_for((run.run_id, run.device) for run in runs)


def metric_figure(runs: Sequence[RunInfo], metric: Metric, view: TimeView = WHOLE_RUN) -> go.Figure:
    """One line per matching column per run; a note instead of lines where no run has the data."""
    names, colors = display_names(runs), run_colors(runs)
    figure = go.Figure()
    dashes = ("solid", "dot", "dash", "dashdot")
    for run in runs:
        frame = read_telemetry(run)
        columns = metric.columns(frame.columns)
        for position, column in enumerate(columns):
            x, y = series_xy(run, frame, column, view)
            if not len(x):
                continue
            suffix = f" · {_short_column(column)}" if len(columns) > 1 or column.startswith("gpu") else ""
            figure.add_trace(
                go.Scatter(
                    x=x,
                    y=y,
                    mode="lines",
                    name=f"{names[run.run_id]}{suffix}",
                    legendgroup=run.run_id,
                    line={"color": colors[run.run_id], "dash": dashes[position % len(dashes)], "width": 1.5},
                )
            )
    style_time_figure(figure, metric.title, metric.unit, view.x_mode, view.x_range)
    not_recorded = f"{metric.title}: not recorded in the selected runs (no readings in any row)"
    explain_empty(figure, view.x_range, not_recorded)
    return figure


def per_core_columns(run: RunInfo) -> list[tuple[int, str]]:
    """(core number, column) of the run's per-core utilization columns, in core order."""
    frame = read_telemetry(run)
    return [(index, cpu_column(index, UTIL_PCT)) for index in core_indices(frame.columns)]


def heatmap_figure(run: RunInfo, view: TimeView = WHOLE_RUN, bins: int = HEATMAP_BINS) -> go.Figure | None:
    """Per-core utilization of one run: mean per time bin, one row per logical CPU; None without readings.

    The view's x_mode, window and x_range apply; `bins`, not its max_points, sets the resolution.
    """
    frame = read_telemetry(run)
    cores = per_core_columns(run)
    clock = clock_of(run, frame)
    if clock is None or not cores or not len(clock.seconds):
        return None
    base, seconds = clock.base, clock.seconds
    low_s, high_s = view.bounds_s(base)
    low_s, high_s = max(low_s, float(seconds[0])), min(high_s, float(seconds[-1]))
    if high_s <= low_s:
        return None
    edges = np.linspace(low_s, high_s, bins + 1)
    boundaries = np.searchsorted(seconds, edges, side="left")
    boundaries[-1] = np.searchsorted(seconds, high_s, side="right")
    z = np.vstack([_bin_means(clock.values(frame, name), boundaries) for _, name in cores])
    if not np.isfinite(z).any():
        return None  # per-core columns present but empty in this window
    centers = (edges[:-1] + edges[1:]) / 2
    figure = go.Figure(
        go.Heatmap(
            x=base.x(centers + base.origin_unix, view.x_mode),
            y=[f"cpu{n}" for n, _ in cores],
            z=z,
            zmin=0,
            zmax=100,
            colorscale="Viridis",
            colorbar={"title": {"text": "%"}},
            hovertemplate="%{y} at %{x:.4~g}: %{z:.0f} %<extra></extra>",
        )
    )
    style_time_figure(figure, f"Per-core utilization · {run.label}", "", view.x_mode, view.x_range)
    figure.update_layout(height=max(220, 60 + 22 * len(cores)), showlegend=False)
    return figure


def timeseries_columns(runs: Sequence[RunInfo]) -> list[str]:
    """Every telemetry column and `training.<column>` of the runs, for the metric picker."""
    telemetry: dict[str, None] = {}
    training: dict[str, None] = {}
    for run in runs:
        telemetry |= dict.fromkeys(c for c in read_telemetry(run).columns if c not in _TIME_COLUMNS)
        training |= dict.fromkeys(
            f"training.{c}" for c in read_training(run).columns if c not in _TIME_COLUMNS
        )
    return list(telemetry) + list(training)


def any_metric_figure(runs: Sequence[RunInfo], column: str | None, view: TimeView = WHOLE_RUN) -> go.Figure:
    """The picked column (a telemetry column, or `training.<column>`) of every run, on one axis."""
    if not column:
        figure = go.Figure()
        style_time_figure(figure, "Time series", "", view.x_mode, None)
        _say_instead(figure, "pick a metric")
        return figure
    is_training = column.startswith("training.")
    name = column.removeprefix("training.")
    metric = Metric(re.escape(name), name, unit_of(name))
    if not is_training:
        return metric_figure(runs, metric, view)
    names, colors = display_names(runs), run_colors(runs)
    figure = go.Figure()
    for run in runs:
        x, y = series_xy(run, read_training(run), name, view)
        if len(x):
            figure.add_trace(line_trace(x, y, names[run.run_id], colors[run.run_id], True, run.run_id))
    style_time_figure(figure, f"training · {name}", metric.unit, view.x_mode, view.x_range)
    if not figure.data:
        _say_instead(figure, f"training · {name}: not recorded in the selected runs")
    return figure


def unit_of(column: str) -> str:
    suffixes = {
        "_pct": "%",
        "_bytes": "bytes",
        "_bps": "bytes/s",
        "_c": "°C",
        "_mhz": "MHz",
        "_w": "W",
        "_j": "J",
        "_s": "s",
        "_ms": "ms",
    }
    return next((unit for suffix, unit in suffixes.items() if column.endswith(suffix)), "")


def empty_range_figure(title: str, x_mode: str, x_range: tuple[float, float]) -> go.Figure:
    """A zoomed graph with nothing in its range: the axes stay, so a double-click zooms back out."""
    figure = go.Figure()
    style_time_figure(figure, title, "", x_mode, x_range)
    explain_empty(figure, x_range, "")
    return figure


def empty_figure(message: str) -> go.Figure:
    figure = go.Figure()
    figure.update_layout(xaxis={"visible": False}, yaxis={"visible": False}, height=300)
    _add_note(figure, message)
    return figure


# ------------------------------------------------------------------------------------------- helpers


def line_trace(x: np.ndarray, y: np.ndarray, name: str, color: str, legend: bool, group: str) -> go.Scatter:
    return go.Scatter(
        x=x,
        y=y,
        mode="lines",
        name=name,
        legendgroup=group,
        showlegend=legend,
        line={"color": color, "width": 1.5},
    )


def _bin_means(values: np.ndarray, boundaries: np.ndarray) -> np.ndarray:
    """Mean of values[boundaries[i]:boundaries[i + 1]] per bin; NaN where a bin holds no reading."""
    segment = values[boundaries[0] : boundaries[-1]]
    counts = np.diff(boundaries)
    if not len(segment):
        return np.full(len(counts), np.nan)
    starts = np.minimum(boundaries[:-1] - boundaries[0], len(segment) - 1)
    finite = np.isfinite(segment)
    if finite.all():
        sums, valid = np.add.reduceat(segment, starts), counts
    else:
        sums = np.add.reduceat(np.where(finite, segment, 0.0), starts)
        valid = np.add.reduceat(finite.astype(np.int64), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((counts > 0) & (valid > 0), sums / np.maximum(valid, 1), np.nan)


def x_title(x_mode: str) -> str:
    return "% of runtime" if x_mode == X_PERCENT else "seconds since run start"


def style_time_figure(
    figure: go.Figure, title: str, unit: str, x_mode: str, x_range: tuple[float, float] | None
) -> None:
    yaxis: dict = {"title": {"text": unit}}
    if unit == "%":
        yaxis["range"] = PERCENT_RANGE
    elif unit.startswith("bytes"):
        yaxis |= {"tickformat": ".3~s", "rangemode": "tozero"}
    xaxis: dict = {"title": {"text": x_title(x_mode)}}
    if x_range is not None:
        xaxis["range"] = list(x_range)
    figure.update_layout(
        title=title,
        xaxis=xaxis,
        yaxis=yaxis,
        height=340,
        uirevision=f"{title}-{x_mode}",
        margin={"t": 50, "l": 60, "r": 20, "b": 45},
        legend={"orientation": "h", "y": -0.25},
        hovermode="x unified",
        showlegend=True,
    )


def explain_empty(figure: go.Figure, x_range: tuple[float, float] | None, not_recorded: str) -> None:
    """A figure that drew nothing says why: zoomed, it keeps its axes so a double-click zooms back out."""
    if figure.data:
        return
    if x_range is not None:
        _add_note(figure, "no readings in the zoomed range (double-click to zoom out)")
    else:
        _say_instead(figure, not_recorded)


def _say_instead(figure: go.Figure, text: str) -> None:
    """A figure with nothing to draw: no axes, one line saying why."""
    figure.update_layout(xaxis={"visible": False}, yaxis={"visible": False}, height=200)
    _add_note(figure, text)


def _add_note(figure: go.Figure, text: str) -> None:
    figure.add_annotation(
        text=text,
        xref="paper",
        yref="paper",
        x=0.5,
        y=0.5,
        showarrow=False,
        font={"size": 14, "color": "#777"},
    )


def _short_column(column: str) -> str:
    return column.removesuffix("_pct").removesuffix("_bytes").removesuffix("_bps").removesuffix("_mhz")
