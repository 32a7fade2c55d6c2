"""What the dashboard's "Inference" tab shows: latency and images/s per batch size, per runtime, CPU vs GPU.

Reads each selected run's inference.json (written by `python -m training infer` and the phase after
training) and nothing else; a runtime that could not take the model is listed with its reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from dash import dcc, html

from dashboard import figures
from dashboard.views import GRAPH_CONFIG, selected_runs

INFERENCE_JSON = "inference.json"
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


def read_inference(run_dir: Path) -> tuple[dict | None, str | None]:
    """(summary, None), or (None, why there is none)."""
    path = run_dir / INFERENCE_JSON
    if not path.is_file():
        return None, "no inference.json (run `python -m training infer RUN_DIR`, or a run without --no-infer)"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"inference.json unreadable: {exc}"
    return (data, None) if isinstance(data, dict) else (None, "inference.json is not an object")


def inference_view(data_dir: Path, run_ids: Sequence[str] | None) -> list[Any]:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return [html.P("Select runs in the picker above.", className="hint")]
    loaded, notes = [], []
    for run in runs:
        summary, reason = read_inference(run.path)
        if summary is None:
            notes.append(html.Li(f"{run.label}: {reason}"))
        else:
            loaded.append((run.label, summary))
    if not loaded:
        return [html.Ul(notes, className="warnings"), html.P("No selected run has inference results.")]
    return [
        html.Ul(notes, className="warnings") if notes else html.Div(),
        html.Div([_model_line(label, summary) for label, summary in loaded]),
        dcc.Graph(id="inference-latency", figure=latency_figure(loaded), config=GRAPH_CONFIG),
        dcc.Graph(id="inference-throughput", figure=throughput_figure(loaded), config=GRAPH_CONFIG),
        _table(loaded),
    ]


def _series(loaded: list[tuple[str, dict]]):
    for index, (label, summary) in enumerate(loaded):
        device = str(summary.get("device") or "cpu")
        for entry in summary.get("runtimes", []):
            cells = [c for c in entry.get("cells", []) if isinstance(c.get("images_per_s"), (int, float))]
            if cells:
                yield (
                    index,
                    f"{label} ({device}) · {entry['runtime']}",
                    device,
                    sorted(cells, key=lambda c: c["batch_size"]),
                )


def latency_figure(loaded: list[tuple[str, dict]]) -> go.Figure:
    """p50 latency per call vs batch size, the bar reaching up to p99."""
    figure = go.Figure()
    for index, name, device, cells in _series(loaded):
        p50 = [c["latency_ms_p50"] for c in cells]
        figure.add_trace(
            go.Scatter(
                x=[c["batch_size"] for c in cells],
                y=p50,
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [c["latency_ms_p99"] - m for c, m in zip(cells, p50, strict=True)],
                    "arrayminus": [0] * len(cells),
                },
                mode="lines+markers",
                name=name,
                line={"dash": DEVICE_DASH.get(device, "solid"), "color": _color(index, name)},
            )
        )
    return _finish(figure, "Latency per call (p50, bar to p99)", "ms per call")


def throughput_figure(loaded: list[tuple[str, dict]]) -> go.Figure:
    figure = go.Figure()
    for index, name, device, cells in _series(loaded):
        figure.add_trace(
            go.Scatter(
                x=[c["batch_size"] for c in cells],
                y=[c["images_per_s"] for c in cells],
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


def _model_line(label: str, summary: dict) -> Any:
    model = summary.get("model") or {}
    params = model.get("parameters")
    flops = model.get("flops_per_image")
    params_text = (
        f"{params / 1e6:.2f} M parameters" if params else f"parameters {model.get('parameters_note')}"
    )
    flops_text = f"{flops / 1e9:.2f} GFLOPs per image" if flops else f"FLOPs {model.get('flops_note')}"
    size = summary.get("input") or {}
    return html.P(
        f"{label} ({summary.get('device')}, {summary.get('framework')}): {params_text}, {flops_text}, "
        f"input {size.get('height')}×{size.get('width')}; {summary.get('duration_per_cell_s')} s measured "
        f"per runtime × batch size after {summary.get('warmup_calls')} warm-up calls",
        className="hint",
        title=model.get("flops_note", ""),
    )


def _table(loaded: list[tuple[str, dict]]) -> Any:
    rows = []
    for label, summary in loaded:
        device = str(summary.get("device"))
        for entry in summary.get("runtimes", []):
            if not entry.get("available"):
                reason = f"cannot take this model: {entry.get('reason')}"
                rows.append(
                    [label, device, entry.get("runtime"), html.Td(reason, colSpan=len(TABLE_COLUMNS) - 3)]
                )
                continue
            for cell in entry.get("cells", []):
                rows.append([label, device, entry["runtime"], *_cell_values(cell)])
    header = html.Tr([html.Th(name) for name in TABLE_COLUMNS])
    body = [html.Tr([v if isinstance(v, html.Td) else html.Td(v) for v in row]) for row in rows]
    return html.Table([html.Thead(header), html.Tbody(body)], className="summary-table")


def _cell_values(cell: dict) -> list[Any]:
    if "latency_ms_p50" not in cell:
        return [
            cell.get("batch_size"),
            html.Td(cell.get("error", "no measured call"), colSpan=len(TABLE_COLUMNS) - 4),
        ]
    gpu = cell.get("gpu_mem_peak_bytes")
    return [
        cell["batch_size"],
        *(f"{cell[k]:.1f}" for k in ("latency_ms_p50", "latency_ms_p90", "latency_ms_p99", "latency_ms_max")),
        f"{cell['images_per_s']:.2f}",
        f"{cell['ms_per_image_p99']:.1f}",
        f"{cell.get('warmup_calls')} calls, {cell.get('warmup_s', 0):.1f} s",
        _mib(cell.get("rss_peak_bytes")),
        _mib(gpu) if gpu is not None else cell.get("gpu_mem_peak_note", "n/a"),
    ]


def _mib(value: Any) -> str:
    return f"{value / 2**20:,.0f} MiB" if isinstance(value, (int, float)) else "n/a"
