"""The GPU tab's profiling-counter figure: a GPU's utilization beside its SM, tensor and DRAM activity."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from dashboard.figures import display_names, explain_empty, line_trace, run_colors, style_time_figure
from dashboard.runs import RunInfo, read_telemetry
from dashboard.timebase import WHOLE_RUN, TimeView, series_xy
from runformat.columns import gpu_column, gpu_indices

# The GPU tab's profiling counters (runformat/gpm.py) beside utilization, per GPU: (suffix, name, dash).
GPU_ACTIVITY = (
    ("util_pct", "utilization", "solid"),
    ("sm_active_pct", "SM active", "dot"),
    ("tensor_active_pct", "tensor active", "dash"),
    ("dram_active_pct", "DRAM active", "dashdot"),
)
_GPM_SUFFIXES = [suffix for suffix, _, _ in GPU_ACTIVITY[1:]]


def gpm_gpu_indices(run: RunInfo) -> list[int]:
    """The GPUs of a run with a reading of SM, tensor or DRAM activity (GPM) in some row."""
    frame = read_telemetry(run)
    found = {index for suffix in _GPM_SUFFIXES for index in gpu_indices(frame.columns, suffix)}
    return sorted(index for index in found if _reads_gpm(frame, index))


def _reads_gpm(frame: pd.DataFrame, index: int) -> bool:
    """Whether GPU `index` has a reading of SM, tensor or DRAM activity in some row."""
    columns = [gpu_column(index, suffix) for suffix in _GPM_SUFFIXES]
    return any(frame[column].notna().any() for column in columns if column in frame)


def gpu_activity_figure(runs: Sequence[RunInfo], index: int, view: TimeView = WHOLE_RUN) -> go.Figure:
    """GPU `index`'s utilization beside its SM, tensor and DRAM activity, for each run that read them."""
    names, colors = display_names(runs), run_colors(runs)
    title = f"GPU {index}: utilization beside SM, tensor and DRAM activity (profiling counters)"
    figure = go.Figure()
    for run in runs:
        frame = read_telemetry(run)
        if not _reads_gpm(frame, index):
            continue
        for suffix, label, dash in GPU_ACTIVITY:
            x, y = series_xy(run, frame, gpu_column(index, suffix), view)
            if len(x):
                trace = line_trace(
                    x, y, f"{names[run.run_id]} · {label}", colors[run.run_id], True, run.run_id
                )
                trace.line.dash = dash
                figure.add_trace(trace)
    style_time_figure(figure, title, "%", view.x_mode, view.x_range)
    explain_empty(figure, view.x_range, f"{title}: not recorded in the selected runs")
    return figure
