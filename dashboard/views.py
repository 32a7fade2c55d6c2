"""What each view shows, as Dash components: pure functions of the data dir, the selection and the controls.

The callbacks (dashboard.tabs, and the frame in dashboard.app) only read their inputs, call one function
here and return its result.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dash import dcc, html

from dashboard import details, figures, gpu_figures, overview, tuning_view
from dashboard.cells import hint, mapping
from dashboard.runs import (
    RunInfo,
    discover_runs,
    files_signature,
    get_run,
    read_training,
    run_warnings,
    step_log_bursts,
)
from dashboard.timebase import MAX_POINTS, TimeView, window_of, zoom_range
from runformat import format_duration
from runformat.bursts import bursts_hint, bursts_text, worth_saying
from runformat.layout import run_id_like, runs_elsewhere, unlisted_dirs
from runformat.tuning import TRIAL

MAX_SELECTED = 8
MAX_DETECTION_RUNS = 24  # the Detections tab reads JSON only, so it looks further down a long selection
GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
COMPONENT_TABS = {
    "processor": "Processor",
    "memory": "Memory",
    "disk": "Disk & network",
    "cpu-temp": "CPU temperature",
    "gpu": "GPU",
}
COMPONENT_SOURCES = {
    "processor": ("cpu",),
    "memory": ("memory",),
    "disk": ("disk", "network"),
    "cpu-temp": ("thermal",),
    "gpu": ("nvml",),
}
ZOOMABLE = "zoomable"


# ----------------------------------------------------------------------------------------- selection


def option_label(run: RunInfo) -> str:
    duration = format_duration(run.duration_s) if run.duration_s else "?"
    parts = [run.label, run.device, run.framework, run.host, run.start_utc or "start unknown", duration]
    parts.append(run.end_reason)
    if run.tuning is not None:  # the runs of one `--tune` sweep belong together
        parts.append(tuning_view.tag_text(run))
    return " · ".join(parts) + (" ⚠" if run.warnings else "")


def picker_options(runs: Sequence[RunInfo]) -> list[dict[str, str]]:
    return [{"label": option_label(run), "value": run.run_id} for run in runs]


def default_selection(runs: Sequence[RunInfo]) -> list[str]:
    """The newest run of each of the two newest devices (a CPU and a GPU run side by side); a `--tune`
    sweep's trials are parts of their sweep (its final run stands for it)."""
    whole = [run for run in runs if run.tuning is None or run.tuning.role != TRIAL] or list(runs)
    chosen: dict[str, str] = {}
    for run in whole:
        chosen.setdefault(run.device, run.run_id)
    picked = list(chosen.values())[:2]
    return picked if len(picked) == 2 else [run.run_id for run in whole[:2]]


def selected_runs(data_dir: Path, run_ids: Sequence[str] | None, limit: int = MAX_SELECTED) -> list[RunInfo]:
    """The runs named in the selection; unsafe or vanished ids are dropped (never a path outside data_dir)."""
    found = [get_run(data_dir, run_id) for run_id in (run_ids or [])[:limit] if isinstance(run_id, str)]
    return [run for run in found if run is not None]


def listing(data_dir: Path, current: Sequence[str] | None) -> tuple[list[dict[str, str]], list[str]]:
    """Picker options for every run now on disk, and the current selection minus runs that disappeared."""
    runs = discover_runs(data_dir)
    known = {run.run_id for run in runs}
    return picker_options(runs), [run_id for run_id in (current or []) if run_id in known]


def selection_signature(data_dir: Path, run_ids: Sequence[str] | None) -> str:
    """Changes exactly when a file the views read changes in one of the selected runs, or a run directory
    the banner names as not listed comes or goes."""
    parts: list[Any] = [
        (run.run_id, files_signature(run)) for run in selected_runs(data_dir, run_ids, MAX_DETECTION_RUNS)
    ]
    parts.append([str(path) for path in (*unlisted_dirs(data_dir), *runs_elsewhere(data_dir))])
    return hashlib.sha1(json.dumps(parts).encode()).hexdigest()


SHOWN_ELSEWHERE = 3  # runs named in the banner's line, then how many more


def warnings_banner(data_dir: Path, run_ids: Sequence[str] | None) -> list[Any]:
    items = []
    if len(run_ids or []) > MAX_SELECTED:
        items.append(
            html.Li(
                f"{len(run_ids or [])} runs selected: the graphs show the first {MAX_SELECTED}, "
                f"Detections the first {MAX_DETECTION_RUNS}."
            )
        )
    for run in selected_runs(data_dir, run_ids):
        for warning in run_warnings(run):
            items.append(html.Li(f"{run.label} ({run.run_id}): {warning}"))
    for entry in unlisted_dirs(data_dir):
        items.append(html.Li(
            f"{entry.parent.name}/{entry.name} is not listed: a run directory's name is letters, digits "
            f"and . _ - (rename it, e.g. to {run_id_like(entry.name)})"
        ))  # fmt: skip
    elsewhere = runs_elsewhere(data_dir)
    if elsewhere:
        named = ", ".join(str(run.relative_to(data_dir)) for run in elsewhere[:SHOWN_ELSEWHERE])
        more = f" and {len(elsewhere) - SHOWN_ELSEWHERE} more" if len(elsewhere) > SHOWN_ELSEWHERE else ""
        one = len(elsewhere) == 1
        items.append(html.Li(
            f"{named}{more} {'is' if one else 'are'} not listed (the picker lists {data_dir}/runs and "
            f"{data_dir}/examples): copy {'it' if one else 'them'} into {data_dir}/runs to see "
            f"{'it' if one else 'them'} here; python -m sizing {data_dir} sizes "
            f"{'it where it is' if one else 'them where they are'}"
        ))  # fmt: skip
    return [html.Strong("Warnings"), html.Ul(items)] if items else []


# ---------------------------------------------------------------------------------------- time views


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
    max_points: int = MAX_POINTS,
) -> Any:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return figures.empty_figure("select runs in the picker above")
    time_view = TimeView(x_mode, window_of(window), zoom_range(relayout), max_points)
    figure = figures.any_metric_figure(runs, column, time_view)
    drawn = {trace.legendgroup for trace in figure.data}
    lacking = [run.label for run in runs if run.run_id not in drawn]
    if drawn and lacking:
        figure.update_layout(title=f"{figure.layout.title.text} · not recorded in {', '.join(lacking)}")
    return figure


def panel_id(view: str, panel: str) -> dict[str, str]:
    """The id of a time-series graph that refines itself on zoom (dashboard.app's zoom callback)."""
    return {"type": ZOOMABLE, "view": view, "panel": panel}


def component_view(
    data_dir: Path, run_ids: Sequence[str] | None, component: str, x_mode: str, window: Sequence[float] | None
) -> list[Any]:
    """One graph per metric some selected run recorded; one line each for what is missing, and why."""
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return [hint("Select runs in the picker above.")]
    time_view = TimeView(x_mode, window_of(window))
    graphs: list[Any] = []
    not_anywhere: list[str] = []
    partly: list[Any] = []
    for index, metric in enumerate(figures.COMPONENT_METRICS[component]):
        if component == "gpu" and index == 1:  # the profiling counters, right after utilization
            graphs += _gpu_activity_graphs(runs, time_view)
        figure = figures.metric_figure(runs, metric, time_view)
        drawn = {trace.legendgroup for trace in figure.data}
        if not drawn:
            not_anywhere.append(metric.title)
            continue
        graphs.append(_graph(figure, panel_id(component, f"metric-{index}")))
        lacking = [run.label for run in runs if run.run_id not in drawn]
        if lacking:
            partly.append(hint(f"{metric.title}: not recorded in {', '.join(lacking)}."))
    if component == "processor":
        lacking = []
        for run in runs:
            heatmap = figures.heatmap_figure(run, time_view)
            if heatmap is None:
                lacking.append(run.label)
            else:
                graphs.append(_graph(heatmap, panel_id(component, f"heatmap-{run.run_id}")))
        if lacking:
            partly.append(hint(f"Per-core utilization: not recorded in {', '.join(lacking)}."))
    notes = _unavailable_sources(runs, COMPONENT_SOURCES[component])
    if component == "gpu":
        notes += _gpm_hints(runs)
    if not_anywhere:
        notes.append(hint(f"Not recorded in the selected runs: {', '.join(not_anywhere)}."))
    return notes + partly + graphs


def zoomed_panel(
    data_dir: Path,
    run_ids: Sequence[str] | None,
    view: str,
    panel: str,
    x_mode: str,
    window: Sequence[float] | None,
    relayout: dict[str, Any] | None,
    max_points: int = MAX_POINTS,
) -> Any:
    """A component or training graph redrawn for the x range the user zoomed to, at full detail."""
    runs = selected_runs(data_dir, run_ids)
    time_view = TimeView(x_mode, window_of(window), zoom_range(relayout), max_points)
    figure = None
    if view == "training":
        figure = overview.training_figure(runs, time_view)
    elif panel.startswith("metric-") and view in figures.COMPONENT_METRICS:
        metrics = figures.COMPONENT_METRICS[view]
        index = int(panel.removeprefix("metric-")) if panel.removeprefix("metric-").isdigit() else -1
        if 0 <= index < len(metrics):
            figure = figures.metric_figure(runs, metrics[index], time_view)
    elif view == "gpu" and panel.startswith("gpm-") and panel.removeprefix("gpm-").isdigit():
        index = int(panel.removeprefix("gpm-"))
        figure = gpu_figures.gpu_activity_figure(runs, index, time_view)
    elif panel.startswith("heatmap-"):
        run = next((r for r in runs if r.run_id == panel.removeprefix("heatmap-")), None)
        figure = figures.heatmap_figure(run, time_view) if run else None
    if figure is not None:
        return figure
    if time_view.x_range is not None:
        return figures.empty_range_figure(panel, x_mode, time_view.x_range)
    return figures.empty_figure("not recorded in the selected runs")


def summary_view(data_dir: Path, run_ids: Sequence[str] | None, window: Sequence[float] | None) -> list[Any]:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return [hint("Select runs in the picker above.")]
    span = window_of(window)
    figure = overview.summary_figure(runs, span)
    if figure is None:
        return [
            hint("No component readings (CPU, memory, disk, GPU, temperature, power) in the selected runs.")
        ]
    stats = {run.run_id: overview.component_stats(run, span) for run in runs}
    keys = overview.summary_keys()
    absent = [
        f"{label} ({unit})" for unit, label in keys if not any((unit, label) in s for s in stats.values())
    ]
    shown = [key for key in keys if any(key in s for s in stats.values())]
    children: list[Any] = [_graph(figure, "summary")]
    if absent:
        children.append(hint(f"Not recorded in the selected runs: {', '.join(absent)}."))
    header = html.Thead(
        html.Tr([html.Th("component"), *[html.Th(f"{run.label} mean / peak") for run in runs]])
    )
    rows = [
        html.Tr(
            [
                html.Th(f"{label} ({unit})"),
                *[html.Td(_mean_peak(stats[run.run_id].get((unit, label)), unit)) for run in runs],
            ]
        )
        for unit, label in shown
    ]
    children.append(html.Table([header, html.Tbody(rows)], className="grid"))
    return children


def training_view(
    data_dir: Path, run_ids: Sequence[str] | None, x_mode: str, window: Sequence[float] | None
) -> list[Any]:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return [hint("Select runs in the picker above.")]
    trained = [run for run in runs if run.training or not read_training(run).empty]
    untrained = [run.label for run in runs if run not in trained]
    if not trained:
        return [
            hint(
                "No training in the selected runs: none has training.csv or training.json "
                "(sampling-only or imported recordings)."
            )
        ]
    children: list[Any] = [details.training_table(trained)]
    if untrained:
        children.append(
            hint(f"Not training runs (no training.csv or training.json): {', '.join(untrained)}.")
        )
    children += [hint(note) for run in trained if (note := _bursts_note(run))]
    figure = overview.training_figure(trained, TimeView(x_mode, window_of(window)))
    if figure is None:
        children.append(hint("No training steps in training.csv yet, in the selected window."))
    else:
        children.append(_graph(figure, panel_id("training", "training")))
    return children


def _bursts_note(run: RunInfo) -> str | None:
    """A job's step log that came in bursts (runformat.bursts): its per-row rates are the reader's."""
    bursts = step_log_bursts(run)
    if not worth_saying(bursts):
        return None
    return (
        f"{run.label}: its step log {bursts_text(bursts)}; its steps/s and examples/s between rows "
        f"within a burst are the collector's reading speed. The sizing report times it burst to burst. "
        f"To time each step: {bursts_hint(run.training['progress'].get('from'))}."
    )


# ------------------------------------------------------------------------------------------- details


def details_view(data_dir: Path, run_ids: Sequence[str] | None) -> list[Any]:
    runs = selected_runs(data_dir, run_ids)
    if not runs:
        return [hint("Select runs in the picker above.")]
    return details.details_view(runs)


# ------------------------------------------------------------------------------------------- helpers


def _graph(figure: Any, name: str | dict[str, str]) -> Any:
    """A graph; a dict id (`panel_id`) makes it refine itself on zoom."""
    graph_id = name if isinstance(name, dict) else f"graph-{name}"
    return dcc.Graph(figure=figure, id=graph_id, config=GRAPH_CONFIG, className="graph")


def _gpu_activity_graphs(runs: Sequence[RunInfo], time_view: TimeView) -> list[Any]:
    """One graph per GPU that some run read profiling counters of; nothing for runs without them."""
    indices = sorted({index for run in runs for index in gpu_figures.gpm_gpu_indices(run)})
    return [
        _graph(gpu_figures.gpu_activity_figure(runs, index, time_view), panel_id("gpu", f"gpm-{index}"))
        for index in indices
    ]


def _gpm_hints(runs: Sequence[RunInfo]) -> list[Any]:
    """Why a GPU run (or one of its GPUs) has no profiling counters, where run.json says (sources.gpm)."""
    hints = []
    for run in runs:
        sources = mapping(run.meta.get("sources"))
        gpm = sources.get("gpm")
        if not isinstance(gpm, dict) or not mapping(sources.get("nvml")).get("available"):
            continue
        if not gpm.get("available"):
            hints.append(hint(f"{run.label}: no profiling counters ({gpm.get('reason') or 'unavailable'})."))
            continue
        for gpu in gpm.get("gpus") or []:
            if isinstance(gpu, dict) and gpu.get("supported") is False:
                reason = gpu.get("reason") or "not supported"
                hints.append(hint(f"{run.label}: no profiling counters on gpu{gpu.get('index')} ({reason})."))
    return hints


def _unavailable_sources(runs: Sequence[RunInfo], sources: Sequence[str]) -> list[Any]:
    notes = []
    for run in runs:
        for source in sources:
            info = mapping(run.meta.get("sources")).get(source)
            if isinstance(info, dict) and not info.get("available"):
                reason = info.get("reason") or "unavailable"
                notes.append(hint(f"{run.label}: no {source} readings ({reason})."))
    return notes


def _mean_peak(value: tuple | None, unit: str) -> str:
    return "n/a (not recorded)" if value is None else f"{value[0]:.1f} / {value[1]:.1f} {unit}"


def _column_label(column: str) -> str:
    unit = figures.unit_of(column.removeprefix("training."))
    return f"{column} ({unit})" if unit else column
