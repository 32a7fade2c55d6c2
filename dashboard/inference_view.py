"""What the dashboard's "Inference" tab shows: latency and images/s per batch size, per runtime, CPU vs GPU.

Shows each selected run's inference.json (written by `python -m training infer` and the phase after
training), as runformat.read_run reads it; a runtime that could not take the model is listed with its reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from dash import dcc, html

from dashboard import figures
from dashboard.runs import run_files
from dashboard.views import GRAPH_CONFIG, selected_runs
from runformat import INFERENCE_JSON
from runformat.records import CellRecord, InferenceRecord, ModelRecord

NO_INFERENCE = "no inference.json (run `python -m training infer RUN_DIR`, or a run without --no-infer)"
DEVICE_DASH = {"cpu": "dot", "gpu": "solid"}
TABLE_COLUMNS = (
    "run",
    "device",
    "runtime",
    "batch",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "max ms",
    "images/s",
    "p99 ms/image",
    "warm-up",
    "peak RSS",
    "peak GPU memory",
)


def inference_view(data_dir: Path, run_ids: Sequence[str] | None) -> list[Any]:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return [html.P("Select runs in the picker above.", className="hint")]
    loaded, notes = [], []
    for run in runs:
        files = run_files(run.path)
        if files.inference is None:
            notes.append(html.Li(f"{run.label}: {files.problems.get(INFERENCE_JSON) or NO_INFERENCE}"))
        else:
            loaded.append((run.label, files.inference))
    if not loaded:
        return [html.Ul(notes, className="warnings"), html.P("No selected run has inference results.")]
    return [
        html.Ul(notes, className="warnings") if notes else html.Div(),
        html.Div([_model_line(label, summary) for label, summary in loaded]),
        dcc.Graph(id="inference-latency", figure=latency_figure(loaded), config=GRAPH_CONFIG),
        dcc.Graph(id="inference-throughput", figure=throughput_figure(loaded), config=GRAPH_CONFIG),
        _table(loaded),
    ]


Loaded = list[tuple[str, InferenceRecord]]


def _series(loaded: Loaded) -> Iterator[tuple[int, str, str, list[CellRecord]]]:
    for index, (label, summary) in enumerate(loaded):
        device = summary.device or "cpu"
        for entry in summary.runtimes or ():
            if cells := entry.measured:
                yield (
                    index,
                    f"{label} ({device}) · {entry.runtime}",
                    device,
                    sorted(cells, key=lambda c: c.batch_size or 0),
                )


def latency_figure(loaded: Loaded) -> go.Figure:
    """p50 latency per call vs batch size, the bar reaching up to p99."""
    figure = go.Figure()
    for index, name, device, cells in _series(loaded):
        p50 = [c.latency_ms_p50 for c in cells]
        figure.add_trace(
            go.Scatter(
                x=[c.batch_size for c in cells],
                y=p50,
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [_above(c.latency_ms_p99, m) for c, m in zip(cells, p50, strict=True)],
                    "arrayminus": [0] * len(cells),
                },
                mode="lines+markers",
                name=name,
                line={"dash": DEVICE_DASH.get(device, "solid"), "color": _color(index, name)},
            )
        )
    return _finish(figure, "Latency per call (p50, bar to p99)", "ms per call")


def _above(top: float | None, value: float | None) -> float:
    return top - value if top is not None and value is not None else 0.0


def throughput_figure(loaded: Loaded) -> go.Figure:
    figure = go.Figure()
    for index, name, device, cells in _series(loaded):
        figure.add_trace(
            go.Scatter(
                x=[c.batch_size for c in cells],
                y=[c.images_per_s for c in cells],
                mode="lines+markers",
                name=name,
                line={"dash": DEVICE_DASH.get(device, "solid"), "color": _color(index, name)},
            )
        )
    return _finish(figure, "Throughput", "images/s")


def _finish(figure: go.Figure, title: str, y_title: str) -> go.Figure:
    if not figure.data:
        return figures.empty_figure("no runtime measured a call in the selected runs")
    figure.update_layout(
        title=title,
        xaxis={"title": "batch size", "type": "log", "dtick": 0.30103},
        yaxis={"title": y_title, "rangemode": "tozero"},
        height=380,
        legend={"orientation": "h", "y": -0.25},
        margin={"t": 50, "l": 60, "r": 20},
    )
    return figure


_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_RUNTIME_ORDER = ("tf-savedmodel", "tf-xla", "onnxruntime", "torchscript")


def _color(run_index: int, name: str) -> str:
    runtime = name.rsplit(" · ", 1)[-1]
    offset = _RUNTIME_ORDER.index(runtime) if runtime in _RUNTIME_ORDER else 0
    return _PALETTE[(run_index * len(_RUNTIME_ORDER) + offset) % len(_PALETTE)]


def _model_line(label: str, summary: InferenceRecord) -> Any:
    model, size = summary.model or ModelRecord(), summary.input or {}
    params, flops = model.parameters, model.flops_per_image
    params_text = f"{params / 1e6:.2f} M parameters" if params else f"parameters {model.parameters_note}"
    flops_text = f"{flops / 1e9:.2f} GFLOPs per image" if flops else f"FLOPs {model.flops_note}"
    return html.P(
        f"{label} ({summary.device}, {summary.framework}): {params_text}, {flops_text}, "
        f"input {size.get('height')}×{size.get('width')}; {summary.duration_per_cell_s} s measured "
        f"per runtime × batch size after {summary.warmup_calls} warm-up calls",
        className="hint",
        title=model.flops_note or "",
    )


def _table(loaded: Loaded) -> Any:
    rows = []
    for label, summary in loaded:
        device = str(summary.device)
        for entry in summary.runtimes or ():
            if not entry.available:
                reason = f"cannot take this model: {entry.reason}"
                rows.append([label, device, entry.runtime, html.Td(reason, colSpan=len(TABLE_COLUMNS) - 3)])
                continue
            for cell in entry.cells or ():
                rows.append([label, device, entry.runtime, *_cell_values(cell)])
    header = html.Tr([html.Th(name) for name in TABLE_COLUMNS])
    body = [html.Tr([v if isinstance(v, html.Td) else html.Td(v) for v in row]) for row in rows]
    return html.Table([html.Thead(header), html.Tbody(body)], className="summary-table")


def _cell_values(cell: CellRecord) -> list[Any]:
    if cell.latency_ms_p50 is None:
        return [cell.batch_size, html.Td(cell.error or "no measured call", colSpan=len(TABLE_COLUMNS) - 4)]
    latencies = (cell.latency_ms_p50, cell.latency_ms_p90, cell.latency_ms_p99, cell.latency_ms_max)
    gpu = cell.gpu_mem_peak_bytes
    return [
        cell.batch_size,
        *(_fixed(value, 1) for value in latencies),
        _fixed(cell.images_per_s, 2),
        _fixed(cell.ms_per_image_p99, 1),
        f"{cell.warmup_calls} calls, {cell.warmup_s or 0:.1f} s",
        _mib(cell.rss_peak_bytes),
        _mib(gpu) if gpu is not None else cell.gpu_mem_peak_note or "n/a",
    ]


def _fixed(value: float | None, places: int) -> str:
    return f"{value:.{places}f}" if value is not None else "n/a"


def _mib(value: Any) -> str:
    return f"{value / 2**20:,.0f} MiB" if isinstance(value, (int, float)) else "n/a"
