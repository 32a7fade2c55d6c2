"""The HTML report's plots: steady examples/s per run, smoothed loss and temperatures over time."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from sizing import throughput as tp
from sizing.model import RunData
from sizing.report import Report


def _thin(frame: pd.DataFrame, max_points: int = 4000) -> pd.DataFrame:
    step = max(1, math.ceil(len(frame) / max_points))
    return frame.iloc[::step]


def report_figures(report: Report) -> list:
    """Throughput bars, smoothed loss over time and temperatures over time (plotly figures)."""
    import plotly.graph_objects as go

    figures = []
    bars = go.Figure(
        go.Bar(
            x=[a.run_id for a in report.analyses],
            y=[a.throughput.examples_per_s for a in report.analyses],
            text=[a.kind.upper() for a in report.analyses],
            marker_color=["#d62728" if a.kind == "gpu" else "#1f77b4" for a in report.analyses],
        )
    )
    bars.update_layout(title="Steady-state examples/s", yaxis_title="examples/s", height=360)
    if any(a.throughput.examples_per_s is not None for a in report.analyses):
        figures.append(bars)  # a run without a work counter has no bar (unknown, not 0)
    loss = go.Figure()
    for run in report.runs:
        rows = tp.clean_training(run.training)
        smooth = tp.smoothed_loss(rows)
        if smooth.dropna().empty:
            continue
        elapsed = tp.training_elapsed(rows, run.training_info)
        frame = _thin(pd.DataFrame({"elapsed": elapsed, "loss": smooth.to_numpy(dtype=float)}))
        loss.add_trace(go.Scatter(x=frame["elapsed"], y=frame["loss"], mode="lines", name=run.run_id))
    if loss.data:
        loss.update_layout(
            title=f"Smoothed total loss ({tp.LOSS_WINDOW_STEPS}-step trailing mean)",
            xaxis_title="training time (s)",
            yaxis_title="loss",
            height=360,
        )
        figures.append(loss)
    temps = _temperature_figure(report.runs)
    if temps is not None:
        figures.append(temps)
    return figures


def _temperature_figure(runs: Sequence[RunData]):
    import plotly.graph_objects as go

    figure = go.Figure()
    for run in runs:
        telemetry = run.telemetry
        if telemetry.empty or "time_unix" not in telemetry:
            continue
        start = run.meta.get("start_unix")
        times = pd.to_numeric(telemetry["time_unix"], errors="coerce").to_numpy(dtype=float)
        origin = float(start) if isinstance(start, (int, float)) else float(np.nanmin(times))
        for column in [c for c in telemetry.columns if str(c).endswith("_temp_c")]:
            values = pd.to_numeric(telemetry[column], errors="coerce").to_numpy(dtype=float)
            if not np.isfinite(values).any():
                continue
            frame = _thin(pd.DataFrame({"t": times - origin, "v": values}))
            figure.add_trace(
                go.Scatter(
                    x=frame["t"],
                    y=frame["v"],
                    mode="lines",
                    name=f"{run.run_id} {column.removesuffix('_temp_c')}",
                )
            )
    if not figure.data:
        return None
    figure.update_layout(
        title="Temperatures", xaxis_title="time since run start (s)", yaxis_title="°C", height=360
    )
    return figure
