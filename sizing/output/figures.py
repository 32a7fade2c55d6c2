"""The HTML report's plots: steady examples/s per run, smoothed loss and temperatures over time."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from sizing.analysis import throughput as tp
from sizing.model import RunData
from sizing.report import Report
from sizing.sections.scaling import scaling_figure


def _thin(frame: pd.DataFrame, max_points: int = 4000) -> pd.DataFrame:
    step = max(1, math.ceil(len(frame) / max_points))
    return frame.iloc[::step]


DEFAULT_COLORS = {"gpu": "#d62728", "cpu": "#1f77b4"}


def report_figures(report: Report, colors: dict[str, str] | None = None) -> list:
    """Throughput bars, smoothed loss over time and temperatures over time (plotly figures); `colors`
    ({run_id: colour}, e.g. the dashboard's, stable across its tabs) else one colour per device kind."""
    import plotly.graph_objects as go

    kinds = {a.run_id: a.kind for a in report.analyses}

    def color(run_id: str) -> str:
        return (colors or {}).get(run_id) or DEFAULT_COLORS.get(kinds.get(run_id, ""), "#7f7f7f")

    figures = []
    bars = go.Figure(
        go.Bar(
            x=[a.run_id for a in report.analyses],
            y=[a.throughput.examples_per_s for a in report.analyses],
            text=[a.kind.upper() for a in report.analyses],
            marker_color=[color(a.run_id) for a in report.analyses],
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
        loss.add_trace(
            go.Scatter(
                x=frame["elapsed"], y=frame["loss"], mode="lines", name=run.run_id,
                line={"color": color(run.run_id)},
            )
        )  # fmt: skip
    if loss.data:
        loss.update_layout(
            title=f"Smoothed total loss ({tp.LOSS_WINDOW_STEPS}-step trailing mean)",
            xaxis_title="training time (s)",
            yaxis_title="loss",
            height=360,
        )
        figures.append(loss)
    temps = _temperature_figure(report.runs, color)
    if temps is not None:
        figures.append(temps)
    scaling = next((s for s in report.sections if s.key == "scaling"), None)
    if scaling is not None and (plot := scaling_figure(scaling)) is not None:
        figures.append(plot)
    return figures


def _temperature_figure(runs: Sequence[RunData], color):  # type: ignore[no-untyped-def]
    import plotly.graph_objects as go

    figure = go.Figure()
    for run in runs:
        telemetry = run.telemetry
        if telemetry.empty or "time_unix" not in telemetry:
            continue
        start = run.meta.get("start_unix")
        times = pd.to_numeric(telemetry["time_unix"], errors="coerce").to_numpy(dtype=float)
        origin = float(start) if isinstance(start, (int, float)) else float(np.nanmin(times))
        dashes = iter(("solid", "dot", "dash", "dashdot", "longdash") * 8)
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
                    line={"color": color(run.run_id), "dash": next(dashes)},
                )
            )
    if not figure.data:
        return None
    figure.update_layout(
        title="Temperatures", xaxis_title="time since run start (s)", yaxis_title="°C", height=360
    )
    return figure
