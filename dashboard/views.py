"""What each view shows, as Dash components: pure functions of the data dir, the selection and the controls.

The callbacks in dashboard.app only read their inputs, call one function here and return its result.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd
from dash import dcc, html

from dashboard import figures
from dashboard.runs import (
    RunInfo,
    discover_runs,
    files_signature,
    get_run,
    read_detections,
    read_phases,
    run_warnings,
)
from runformat import format_duration

MAX_SELECTED = 8
FILES_ROUTE = "/run-files"
GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
COMPONENT_TABS = {
    "processor": "Processor",
    "memory": "Memory",
    "disk": "Disk & network",
    "cpu-temp": "CPU temperature",
    "gpu": "GPU",
}
PHASES = ("train", "export", "evaluate", "detect")
_SAFE_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.png$")


# ----------------------------------------------------------------------------------------- selection


def option_label(run: RunInfo) -> str:
    duration = format_duration(run.duration_s) if run.duration_s else "?"
    parts = [run.label, run.device, run.framework, run.host, run.start_utc or "start unknown", duration]
    parts.append(run.end_reason)
    return " · ".join(parts) + (" ⚠" if run.warnings else "")


def picker_options(runs: Sequence[RunInfo]) -> list[dict[str, str]]:
    return [{"label": option_label(run), "value": run.run_id} for run in runs]


def default_selection(runs: Sequence[RunInfo]) -> list[str]:
    """The newest run of each of the two newest devices (a CPU and a GPU run side by side)."""
    chosen: dict[str, str] = {}
    for run in runs:
        chosen.setdefault(run.device, run.run_id)
    picked = list(chosen.values())[:2]
    return picked if len(picked) == 2 or not runs else [run.run_id for run in runs[:2]]


def selected_runs(data_dir: Path, run_ids: Sequence[str] | None) -> list[RunInfo]:
    """The runs named in the selection; unsafe or vanished ids are dropped (never a path outside data_dir)."""
    found = [
        get_run(data_dir, run_id) for run_id in (run_ids or [])[:MAX_SELECTED] if isinstance(run_id, str)
    ]
    return [run for run in found if run is not None]


def listing(data_dir: Path, current: Sequence[str] | None) -> tuple[list[dict[str, str]], list[str]]:
    """Picker options for every run now on disk, and the current selection minus runs that disappeared."""
    runs = discover_runs(data_dir)
    known = {run.run_id for run in runs}
    return picker_options(runs), [run_id for run_id in (current or []) if run_id in known]


def selection_signature(data_dir: Path, run_ids: Sequence[str] | None) -> str:
    """Changes exactly when a file the views read changes in one of the selected runs."""
    parts = [(run.run_id, files_signature(run)) for run in selected_runs(data_dir, run_ids)]
    return hashlib.sha1(json.dumps(parts).encode()).hexdigest()


def warnings_banner(data_dir: Path, run_ids: Sequence[str] | None) -> list[Any]:
    items = []
    for run in selected_runs(data_dir, run_ids):
        for warning in run_warnings(run):
            items.append(html.Li(f"{run.label} ({run.run_id}): {warning}"))
    return [html.Strong("Warnings"), html.Ul(items)] if items else []


# ---------------------------------------------------------------------------------------- time views


def zoom_range(relayout: dict[str, Any] | None) -> tuple[float, float] | None:
    """The x range a user zoomed to in a graph (None after a reset or for other relayout events)."""
    if not relayout:
        return None
    if "xaxis.range[0]" in relayout and "xaxis.range[1]" in relayout:
        low, high = relayout["xaxis.range[0]"], relayout["xaxis.range[1]"]
    elif isinstance(relayout.get("xaxis.range"), list) and len(relayout["xaxis.range"]) == 2:
        low, high = relayout["xaxis.range"]
    else:
        return None
    try:
        low, high = float(low), float(high)
    except (TypeError, ValueError):
        return None
    return (low, high) if low < high else None


def changes_x_range(relayout: dict[str, Any]) -> bool:
    """True for a zoom or a reset of the x axis; legend clicks, pans of y and the like change nothing here."""
    return zoom_range(relayout) is not None or "xaxis.autorange" in relayout


def window_of(value: Sequence[float] | None) -> tuple[float, float]:
    """The percent-of-runtime window from the range slider, clamped to [0, 100]."""
    if not value or len(value) != 2:
        return figures.FULL_WINDOW
    low, high = sorted(min(max(float(v), 0.0), 100.0) for v in value)
    return (low, high) if high > low else figures.FULL_WINDOW


def timeseries_options(data_dir: Path, run_ids: Sequence[str] | None) -> list[dict[str, str]]:
    columns = figures.timeseries_columns(selected_runs(data_dir, run_ids))
    return [{"label": _column_label(column), "value": column} for column in columns]


def metric_choices(
    data_dir: Path, run_ids: Sequence[str] | None, current: str | None
) -> tuple[list[dict[str, str]], str | None]:
    """The metric picker's options, and its value: the current one if still there, else CPU utilization."""
    options = timeseries_options(data_dir, run_ids)
    values = [option["value"] for option in options]
    fallback = "cpu_util_pct" if "cpu_util_pct" in values else (values[0] if values else None)
    return options, current if current in values else fallback


def timeseries_figure(
    data_dir: Path,
    run_ids: Sequence[str] | None,
    column: str | None,
    x_mode: str,
    window: Sequence[float] | None,
    relayout: dict[str, Any] | None,
    max_points: int = figures.MAX_POINTS,
) -> Any:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return figures.empty_figure("select runs in the picker above")
    return figures.any_metric_figure(
        runs, column, x_mode, window_of(window), zoom_range(relayout), max_points
    )


def component_view(
    data_dir: Path, run_ids: Sequence[str] | None, component: str, x_mode: str, window: Sequence[float] | None
) -> list[Any]:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return [_hint("Select runs in the picker above.")]
    span = window_of(window)
    drawn = [
        figures.metric_figure(runs, metric, x_mode, span) for metric in figures.COMPONENT_METRICS[component]
    ]
    graphs = [_graph(figure, f"{component}-{i}") for i, figure in enumerate(drawn) if figure.data]
    if not graphs:
        graphs = [_hint(f"No {COMPONENT_TABS[component].lower()} readings in the selected runs.")]
    if component == "processor":
        graphs += [
            _graph(figures.heatmap_figure(run, x_mode, span), f"heatmap-{i}") for i, run in enumerate(runs)
        ]
    notes = _unavailable_sources(runs, {"cpu-temp": "thermal", "gpu": "nvml"}.get(component))
    return notes + graphs


def summary_view(data_dir: Path, run_ids: Sequence[str] | None, window: Sequence[float] | None) -> list[Any]:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return [_hint("Select runs in the picker above.")]
    return [_graph(figures.summary_figure(runs, window_of(window)), "summary")]


def training_view(
    data_dir: Path, run_ids: Sequence[str] | None, x_mode: str, window: Sequence[float] | None
) -> list[Any]:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return [_hint("Select runs in the picker above.")]
    return [
        _training_table(runs),
        _graph(figures.training_figure(runs, x_mode, window_of(window)), "training"),
    ]


# ---------------------------------------------------------------------------------------- detections


def image_options(data_dir: Path, run_ids: Sequence[str] | None) -> list[dict[str, str]]:
    """Held-out image ids in any selected run, those shared by every run first."""
    runs = selected_runs(data_dir, run_ids)
    per_run = [[image.get("image_id") for image in _images(run)] for run in runs]
    every = [
        image_id for image_id in dict.fromkeys(i for ids in per_run for i in ids) if isinstance(image_id, str)
    ]
    shared = [i for i in every if all(i in ids for ids in per_run)]
    rest = [i for i in every if i not in shared]
    return [{"label": i, "value": i} for i in shared] + [
        {"label": f"{i} (not in every run)", "value": i} for i in rest
    ]


def image_choices(
    data_dir: Path, run_ids: Sequence[str] | None, current: str | None
) -> tuple[list[dict[str, str]], str | None]:
    """The image picker's options, and its value: the current image if still there, else the first."""
    options = image_options(data_dir, run_ids)
    values = [option["value"] for option in options]
    return options, current if current in values else (values[0] if values else None)


def detections_view(data_dir: Path, run_ids: Sequence[str] | None, image_id: str | None) -> list[Any]:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return [_hint("Select runs in the picker above.")]
    if not image_id:
        return [_hint("No held-out images with detections in the selected runs.")]
    return [html.Div([_detection_card(run, image_id) for run in runs], className="cards")]


def detection_file(data_dir: Path, run_id: str, file_name: str) -> Path | None:
    """The detections PNG a browser may fetch: a safe name inside a valid run's detections/ only."""
    run = get_run(data_dir, run_id)
    if run is None or not _SAFE_FILE.fullmatch(file_name):
        return None
    path = run.path / "detections" / file_name
    return path.absolute() if path.is_file() else None  # Flask resolves relative paths from its package


def _detection_card(run: RunInfo, image_id: str) -> Any:
    image = next((i for i in _images(run) if i.get("image_id") == image_id), None)
    map_50 = run.evaluation.get("map_50")
    header = html.H4(f"{run.label} · {run.device}")
    score = html.P(
        f"mAP@0.5 {map_50:.3f}" if isinstance(map_50, int | float) else "mAP@0.5: no eval.json",
        className="map",
    )
    if image is None:
        return html.Div(
            [header, score, _hint(f"{image_id} is not among this run's detections.")], className="card"
        )
    file_name = str(image.get("file") or "")
    body: list[Any] = [header, score]
    if _SAFE_FILE.fullmatch(file_name):
        src = f"{FILES_ROUTE}/{quote(run.run_id)}/detections/{quote(file_name)}"
        body.append(html.Img(src=src, alt=f"{image_id} · {run.label}", className="detection-image"))
    found = [d for d in image.get("detections", []) if isinstance(d, dict)]
    rows = [
        html.Tr([html.Td(f"{d.get('score', float('nan')):.2f}"), html.Td(_box_text(d.get("box")))])
        for d in found
    ]
    truth = len(image.get("ground_truth") or [])
    body.append(
        html.P(f"{len(found)} detection(s), {truth} ground-truth box(es); red: predicted, green: truth")
    )
    if rows:
        body.append(
            html.Table(
                [
                    html.Thead(html.Tr([html.Th("score"), html.Th("box [ymin, xmin, ymax, xmax]")])),
                    html.Tbody(rows),
                ],
                className="kv",
            )
        )
    return html.Div(body, className="card")


def _images(run: RunInfo) -> list[dict[str, Any]]:
    return [image for image in read_detections(run).get("images", []) if isinstance(image, dict)]


def _box_text(box: Any) -> str:
    if isinstance(box, list) and all(isinstance(v, int | float) for v in box):
        return "[" + ", ".join(f"{v:.0f}" for v in box) + "]"
    return "?"


# ------------------------------------------------------------------------------------------- details


def details_view(data_dir: Path, run_ids: Sequence[str] | None) -> list[Any]:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return [_hint("Select runs in the picker above.")]
    return [html.Div([_details_card(run) for run in runs], className="cards")]


def _details_card(run: RunInfo) -> Any:
    meta, system, training = run.meta, _mapping(run.meta.get("system")), run.training
    command = meta.get("command")
    rows = {
        "run id": run.run_id,
        "directory": f"data/{run.kind}/{run.run_id}" if run.kind != "path" else str(run.path),
        "label": run.label,
        "device / host": f"{run.device} / {run.host}",
        "framework": f"{run.framework} {run.framework_version}".strip(),
        "start": run.start_utc or "unknown",
        "duration": format_duration(run.duration_s) if run.duration_s else "unknown",
        "end reason / exit code": f"{run.end_reason} / {meta.get('exit_code')}",
        "samples / interval": f"{meta.get('samples')} every {meta.get('interval_s')} s",
        "late / skipped ticks": f"{meta.get('late_ticks')} / {meta.get('skipped_ticks')}",
    }
    system_rows = {
        "CPU": f"{system.get('cpu_model')} ({system.get('cpu_cores_physical')} cores, "
        f"{system.get('cpu_cores_logical')} threads, {system.get('cpu_sockets')} socket(s))",
        "memory": _gib(system.get("mem_total_bytes")),
        "GPUs": ", ".join(str(g.get("name")) for g in _sequence(system.get("gpus")) if isinstance(g, dict))
        or "none",
        "driver / CUDA": f"{system.get('gpu_driver_version')} / {system.get('cuda_version')}",
        "OS / kernel": f"{system.get('os')} / {system.get('kernel')}",
        "Python / packages": f"{system.get('python')} / "
        + ", ".join(f"{k} {v}" for k, v in _mapping(system.get("packages")).items()),
    }
    sources = [
        f"{name}: {'yes' if s.get('available') else 'no — ' + str(s.get('reason'))}"
        for name, s in _mapping(meta.get("sources")).items()
        if isinstance(s, dict)
    ]
    training_rows = {
        k: training.get(k)
        for k in (
            "status",
            "device_used",
            "preset",
            "backbone",
            "image_size",
            "batch_size",
            "precision",
            "steps",
            "global_step",
            "first_step_s",
            "steady_steps_per_s",
            "steady_examples_per_s",
            "duration_budget_s",
        )
        if k in training
    }
    eval_rows = {
        k: run.evaluation.get(k)
        for k in ("map_50", "recall_50", "precision_50", "num_images")
        if k in run.evaluation
    }
    body = [
        html.H4(run.label),
        _kv_table(rows),
        html.H5("System"),
        _kv_table(system_rows) if system else _hint("no system info (run.json missing or unreadable)"),
        html.P("Sources: " + "; ".join(sources), className="sources") if sources else None,
        html.H5("Command"),
        html.Pre(" ".join(str(part) for part in command) if isinstance(command, list) else "(sampling only)"),
    ]
    if training_rows:
        body += [html.H5("Training"), _kv_table(training_rows)]
    if eval_rows:
        body += [html.H5("Evaluation"), _kv_table(eval_rows)]
    if training.get("config"):
        body.append(
            html.Details(
                [
                    html.Summary("Training config (Model Garden ExperimentConfig)"),
                    html.Pre(json.dumps(training["config"], indent=2)),
                ]
            )
        )
    warnings = run_warnings(run)
    if warnings:
        body += [html.H5("Warnings"), html.Ul([html.Li(w) for w in warnings])]
    return html.Div([part for part in body if part is not None], className="card")


def phase_durations(run: RunInfo) -> list[str]:
    """Seconds spent in each phase (phases.csv), '—' if absent, marked when the phase failed."""
    phases = read_phases(run)
    cells = []
    for phase in PHASES:
        rows = phases[phases["phase"] == phase]
        seconds = (rows["end_unix"] - rows["start_unix"]).sum(min_count=1)
        failed = " (failed)" if (rows["status"] == "failed").any() else ""
        cells.append(f"{seconds:.0f}{failed}" if pd.notna(seconds) else "—")
    return cells


def _training_table(runs: Sequence[RunInfo]) -> Any:
    header = ["run", "device used", "steps", "first step s", "steady steps/s", "steady examples/s", "mAP@0.5"]
    header += [f"{phase} s" for phase in PHASES]
    rows = []
    for run in runs:
        t = run.training
        rows.append(
            [
                run.label,
                t.get("device_used", "—"),
                t.get("global_step", "—"),
                _num(t.get("first_step_s")),
                _num(t.get("steady_steps_per_s")),
                _num(t.get("steady_examples_per_s")),
                _num(run.evaluation.get("map_50")),
                *phase_durations(run),
            ]
        )
    return html.Table(
        [
            html.Thead(html.Tr([html.Th(h) for h in header])),
            html.Tbody([html.Tr([html.Td(str(v)) for v in row]) for row in rows]),
        ],
        className="grid",
    )


# ------------------------------------------------------------------------------------------- helpers


def _graph(figure: Any, name: str) -> Any:
    return dcc.Graph(figure=figure, id=f"graph-{name}", config=GRAPH_CONFIG, className="graph")


def _hint(text: str) -> Any:
    return html.P(text, className="hint")


def _unavailable_sources(runs: Sequence[RunInfo], source: str | None) -> list[Any]:
    if source is None:
        return []
    notes = []
    for run in runs:
        info = _mapping(run.meta.get("sources")).get(source)
        if isinstance(info, dict) and not info.get("available"):
            notes.append(_hint(f"{run.label}: no {source} readings ({info.get('reason', 'unavailable')})."))
    return notes


def _kv_table(rows: dict[str, Any]) -> Any:
    return html.Table(
        html.Tbody([html.Tr([html.Th(k), html.Td(str(v))]) for k, v in rows.items()]), className="kv"
    )


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _sequence(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _column_label(column: str) -> str:
    unit = figures.unit_of(column.removeprefix("training."))
    return f"{column} ({unit})" if unit else column


def _num(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, int | float) and not isinstance(value, bool) else "—"


def _gib(value: Any) -> str:
    return f"{value / 2**30:.1f} GiB" if isinstance(value, int | float) else "unknown"
