"""The Run details tab (and the Training tab's table): what run.json, training.json, eval.json and phases.csv
say, unknowns written as "n/a".

Besides the system and the command it shows where the run really lives, the free-text notes (run.json's
`notes` and each source's `notes`), and which telemetry columns each source actually recorded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from dash import html

from dashboard.cells import NA, gib, hint, mapping, text
from dashboard.gpu_state_view import gpu_state_parts
from dashboard.runs import RunInfo, read_phases, read_telemetry, run_warnings
from dashboard.tuning_view import tag_text
from runformat import format_duration
from runformat.columns import GPU_COLUMN, TIME_COLUMNS, UTIL_PCT, core_indices, cpu_column
from runformat.gpm import GPM_COLUMN

PHASES = ("train", "export", "evaluate", "detect", "infer")
# Which source writes a telemetry column (docs/run-format.md); anything else is listed under "other".
_SOURCE_OF = [
    ("sampler", re.compile(r"late_ms|skipped_ticks")),
    ("thermal", re.compile(r"cpu_temp_c")),
    ("rapl", re.compile(r"cpu_energy_j")),
    ("cpu", re.compile(r"cpu(\d+)?_\w+|load\d+")),
    ("memory", re.compile(r"(mem|swap)_\w+")),
    ("disk", re.compile(r"disk_\w+")),
    ("network", re.compile(r"net_\w+")),
    ("process", re.compile(r"proc_\w+")),
    ("gpm", GPM_COLUMN),
    ("nvml", GPU_COLUMN),
]
_TIME_COLUMNS = set(TIME_COLUMNS)
TRAINING_KEYS = (
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


def source_of(column: str) -> str:
    return next((name for name, pattern in _SOURCE_OF if pattern.fullmatch(column)), "other")


def recorded_columns(run: RunInfo) -> dict[str, tuple[list[str], list[str]]]:
    """{source: (columns with at least one reading, columns present but empty)} from telemetry.csv."""
    frame = read_telemetry(run)
    found: dict[str, tuple[list[str], list[str]]] = {}
    for column in frame.columns:
        if column in _TIME_COLUMNS:
            continue
        values = frame[column].to_numpy(dtype=np.float64)
        with_data, empty = found.setdefault(source_of(column), ([], []))
        (with_data if np.isfinite(values).any() else empty).append(column)
    return found


def details_view(runs: Sequence[RunInfo]) -> list[Any]:
    return [html.Div([details_card(run) for run in runs], className="cards")]


def phase_durations(run: RunInfo) -> list[str]:
    """Seconds spent in each phase (phases.csv), 'n/a' if absent, marked when the phase failed."""
    phases = read_phases(run)
    cells = []
    for phase in PHASES:
        rows = phases[phases["phase"] == phase]
        seconds = (rows["end_unix"] - rows["start_unix"]).sum(min_count=1)
        failed = " (failed)" if (rows["status"] == "failed").any() else ""
        cells.append(f"{seconds:.0f}{failed}" if pd.notna(seconds) else "n/a")
    return cells


def training_table(runs: Sequence[RunInfo]) -> Any:
    header = ["run", "device used", "steps", "first step s", "steady steps/s", "steady examples/s", "mAP@0.5"]
    header += [f"{phase} s" for phase in PHASES]
    tuned = any(run.tuning is not None for run in runs)  # a `--tune` sweep's runs: which is which
    header[1:1] = ["tuning"] * tuned
    rows = []
    for run in runs:
        t = run.training
        rows.append(
            [
                run.label,
                *[tag_text(run) or "not tuned"] * tuned,
                text(t.get("device_used")),
                text(t.get("global_step")),
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


def _num(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, int | float) and not isinstance(value, bool) else "n/a"


def _slurm(slurm: dict) -> str:
    """run.json's system.slurm in one line: the job, where it ran, what it was given."""
    job = text(slurm.get("job_id"))
    if slurm.get("array_job_id"):
        job += f" (array task {slurm['array_job_id']}_{text(slurm.get('array_task_id'))})"
    gpus = slurm.get("gpus")
    gpu_text = ", ".join(map(str, gpus)) if isinstance(gpus, list) and gpus else "none" if gpus == [] else NA
    return (
        f"{job}, partition {text(slurm.get('partition'))}, node {text(slurm.get('node_rank'))} of "
        f"{text(slurm.get('nnodes'))} ({text(slurm.get('nodelist'))}), "
        f"{text(slurm.get('cpus_per_task'))} CPUs per task, "
        f"GPUs {gpu_text}"
    )


def details_card(run: RunInfo) -> Any:
    meta, system, training = run.meta, mapping(run.meta.get("system")), run.training
    command = meta.get("command")
    interval = meta.get("interval_s")
    rows = {
        "run id": run.run_id,
        "directory": str(Path(run.path).absolute()),
        "label": run.label,
        "device / host": f"{run.device} / {run.host}",
        "framework": f"{run.framework} {run.framework_version}".strip(),
        "start": run.start_utc or "unknown",
        "duration": format_duration(run.duration_s) if run.duration_s else "unknown",
        "end reason / exit code": f"{run.end_reason} / {text(meta.get('exit_code'))}",
        "samples / interval": f"{text(meta.get('samples'))} every {text(interval, 's')}",
        "late / skipped ticks": f"{_measured(meta.get('late_ticks'))} / "
        f"{_measured(meta.get('skipped_ticks'))}",
    }
    imported = mapping(meta.get("imported_from"))
    if imported:
        version = f" {imported['sysstat_version']}" if imported.get("sysstat_version") else ""
        rows["imported from"] = f"{text(imported.get('file'))} ({text(imported.get('tool'))}{version})"
        if imported.get("instance"):
            rows["imported from"] += f", instance {imported['instance']}"
    for source in [imported, *(m for m in meta.get("merged_from") or [] if isinstance(m, dict))]:
        if source.get("utc_offset"):
            rows[f"{text(source.get('tool'))} times"] = (
                f"read as UTC{source['utc_offset']} ({text(source.get('utc_offset_from'))})"
            )
    merged = [m for m in meta.get("merged_from") or [] if isinstance(m, dict)]
    if merged:
        rows["merged from"] = "; ".join(
            f"{text(m.get('file'))} ({text(m.get('tool'))}, {text(m.get('format'))})" for m in merged
        )
    not_recorded = mapping(meta.get("not_recorded"))
    if not_recorded:
        rows["not recorded"] = "; ".join(f"{key}: {why}" for key, why in not_recorded.items())
    system_rows = {
        "CPU": f"{text(system.get('cpu_model'))} ({text(system.get('cpu_cores_physical'))} cores, "
        f"{text(system.get('cpu_cores_logical'))} threads, {text(system.get('cpu_sockets'))} socket(s))",
        "memory": gib(system.get("mem_total_bytes")),
        "GPUs": _gpus(system),
        "driver / CUDA": f"{text(system.get('gpu_driver_version'))} / {text(system.get('cuda_version'))}",
        "OS / kernel": f"{text(system.get('os'))} / {text(system.get('kernel'))}",
        "Python / packages": f"{text(system.get('python'))} / "
        + (
            ", ".join(
                f"{k} {v if v else 'not installed'}" for k, v in mapping(system.get("packages")).items()
            )
            or NA
        ),
    }
    if mapping(system.get("slurm")):
        system_rows["Slurm job"] = _slurm(mapping(system.get("slurm")))
    body = [
        html.H4(run.label),
        _kv_table(rows),
        _notes(meta.get("notes")),
        html.H5("System"),
        _kv_table(system_rows) if system else hint("no system info (run.json missing or unreadable)"),
        *gpu_state_parts(meta),
        html.H5("Sources and the columns they recorded"),
        _sources_table(run),
        html.H5("Command"),
        html.Pre(
            " ".join(str(part) for part in command)
            if isinstance(command, list)
            else "(no command: sampling only)"
        ),
    ]
    training_rows = {k: text(training.get(k)) for k in TRAINING_KEYS if k in training}
    eval_rows = {
        k: text(run.evaluation.get(k))
        for k in ("map_50", "recall_50", "precision_50", "num_images")
        if k in run.evaluation
    }
    body += (
        [html.H5("Training"), _kv_table(training_rows)]
        if training_rows
        else [
            html.H5("Training"),
            hint("not recorded: no training.json in this run"),
        ]
    )
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


def _sources_table(run: RunInfo) -> Any:
    """One row per source: available or why not, its notes, and the columns it actually filled."""
    sources = mapping(run.meta.get("sources"))
    recorded = recorded_columns(run)
    names = list(dict.fromkeys([*sources, *recorded]))
    rows = []
    for name in names:
        info = mapping(sources.get(name))
        with_data, empty = recorded.get(name, ([], []))
        if info:
            state = "yes" if info.get("available") else f"no — {text(info.get('reason'))}"
        else:
            state = "not in run.json"
        columns = _compact(with_data) or "none recorded"
        if empty:
            columns += f"; empty: {_compact(empty)}"
        notes = [str(n) for n in _notes_list(info.get("notes"))]
        if name == "thermal" and info.get("sensor"):
            notes.insert(0, f"sensor: {info['sensor']}")
        rows.append(
            html.Tr([html.Th(name), html.Td(state), html.Td(columns), html.Td("; ".join(notes) or "none")])
        )
    if not rows:
        return hint("no sources listed and no telemetry.csv")
    header = html.Thead(
        html.Tr([html.Th("source"), html.Th("available"), html.Th("columns"), html.Th("notes")])
    )
    return html.Table([header, html.Tbody(rows)], className="kv sources")


def _compact(columns: list[str]) -> str:
    """Column names, per-core and per-GPU runs folded: `cpu0..cpu11_util_pct`."""
    numbers = core_indices(columns)
    cores = [cpu_column(n, UTIL_PCT) for n in numbers]
    rest = [c for c in columns if c not in cores]
    if len(cores) > 2:
        rest.insert(min(1, len(rest)), f"cpu{numbers[0]}..{cpu_column(numbers[-1], UTIL_PCT)}")
    else:
        rest = columns
    return ", ".join(rest)


def _notes(value: Any) -> Any:
    notes = _notes_list(value)
    if not notes:
        return None
    return html.Div([html.H5("Notes"), html.Ul([html.Li(str(note)) for note in notes])], className="notes")


def _notes_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    return [v for v in value if v not in (None, "")] if isinstance(value, list) else []


def _measured(value: Any) -> str:
    return "not recorded" if value is None else str(value)


def _gpus(system: dict[str, Any]) -> str:
    gpus = system.get("gpus")
    if not isinstance(gpus, list):
        return NA if "gpu_count" not in system else "none"
    return ", ".join(text(g.get("name")) for g in gpus if isinstance(g, dict)) or "none"


def _kv_table(rows: dict[str, Any]) -> Any:
    return html.Table(
        html.Tbody([html.Tr([html.Th(k), html.Td(str(v))]) for k, v in rows.items()]), className="kv"
    )
