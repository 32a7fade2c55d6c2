"""What the dashboard's "Sizing" tab shows (its form and callbacks: dashboard.tabs.sizing).

`sizing_content` turns the sizing package's report for the selected runs and the form's values
(tables, headline, figures) into Dash components. Every figure comes from `sizing.build_report`, exactly
as in `python -m sizing`; this page only reads the runs (through dashboard.runs' caches) and lays it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dash import dcc, html

from dashboard.colors import colors_for
from dashboard.csvcache import warnings_of
from dashboard.runs import RunInfo, detections_warnings, get_run, parsed_csvs, read_phases, run_files
from sizing import Report, ReportSettings, RunData, Table, UsageError, build_report
from sizing.model import DEFAULT_UTILISATION, Prices
from sizing.output.figures import report_figures
from sizing.output.render import render_html, render_markdown
from sizing.settings import settings_from_values

GRAPH_CONFIG = {"displaylogo": False, "responsive": True}

# (input id suffix, label, default, step, minimum); step None: a text field
FIELDS: tuple[tuple[str, str, float | None, float | None, float | None], ...] = (
    ("tariff", "Tariff (USD per kWh)", 0.15, 0.01, 0),
    ("gpu-price", "GPU price (USD, each GPU)", None, 1, 0),
    ("cpu-price", "Host price without GPUs (USD, each host)", None, 1, 0),
    ("amortise-years", "Hardware life (years)", 3, 0.5, 0),
    ("value-per-hour", "Value of an hour saved (USD)", None, 1, 0),
    ("cpu-tdp-w", "CPU TDP for an estimate (W)", None, 1, 0),
    ("temp-threshold", "Temperature threshold (°C)", 80, 1, None),
    ("target-steps", "Target steps", 1000, 100, 0),
    ("target-loss", "Target loss (empty: reached by all)", None, 0.01, 0),
    ("utilisation", f"Utilisation over the life (0–1, default {DEFAULT_UTILISATION:g})", DEFAULT_UTILISATION,
     0.05, 0),
    ("idle-fraction", "Idle floor of the CPU estimate (0–1)", Prices.idle_fraction, 0.05, 0),
    ("gpu-prices-by-model", "GPU prices per model (MODEL=USD, …)", None, None, None),
    ("host-prices", "Host prices (HOST=USD, …)", None, None, None),
)  # fmt: skip


def settings_of(values: Sequence[float | None]) -> ReportSettings:
    """The form's values (in FIELDS order) as report settings; UsageError when one is invalid."""
    named = {name.replace("-", "_"): value for (name, *_), value in zip(FIELDS, values, strict=True)}
    return settings_from_values(**named)


def run_data(info: RunInfo) -> RunData:
    """One run's files, parsed through dashboard.runs' caches, as the sizing package takes them: the CSVs
    unchecked, for build_report's checks (sizing.analysis.validate) to apply once."""
    telemetry, training, parse_warnings = parsed_csvs(info)
    said = [*info.warnings, *parse_warnings, *warnings_of(read_phases(info)), *detections_warnings(info)]
    inference = run_files(info.path).inference
    return RunData(
        info.run_id,
        info.meta,
        info.training,
        info.evaluation,
        telemetry,
        training,
        read_phases(info),
        tuple(dict.fromkeys(f"{info.run_id}: {w}" for w in said)),
        inference.raw if inference is not None else None,
    )


def load_selected(data_dir: Path, run_ids: Sequence[str] | None) -> tuple[list[RunData], list[str]]:
    """The picker's runs (any run with telemetry or training files); unknown or unsafe ids become notes."""
    runs, notes = [], []
    for run_id in run_ids or []:
        info = get_run(data_dir, run_id) if isinstance(run_id, str) else None
        if info is None:
            notes.append(f"{run_id!r}: no such run")
            continue
        data = run_data(info)
        if data.telemetry.empty and data.training.empty and not data.training_info:
            notes.append(f"run {run_id!r} has neither telemetry nor training files: nothing to size")
            continue
        runs.append(data)
    return runs, notes


def build(
    data_dir: Path, run_ids: Sequence[str] | None, values: Sequence[float | None]
) -> tuple[Report | None, list[str]]:
    """The report for the selection, and notes (skipped runs, invalid settings)."""
    try:
        settings = settings_of(values)
    except UsageError as exc:
        return None, [str(exc)]
    runs, notes = load_selected(data_dir, run_ids)
    if not runs:
        return None, [*notes, "Select runs in the picker above."]
    try:
        return build_report(runs, settings), notes
    except UsageError as exc:  # e.g. no selected run can be sized
        return None, [*notes, str(exc)]


def decision_block(built: Report) -> list[Any]:
    """The report's Decision block: the baseline, one line per GPU option, the weightiest caveats."""
    d = built.decision
    lines = [*(o.line for o in d.options), *d.lines_without_option]
    block: list[Any] = [html.H4("Decision")]
    if d.baseline:
        block.append(html.P(d.baseline))
    block.append(html.Ul([html.Li(html.B(line)) for line in lines], className="sizing-decision"))
    if d.caveats:
        block.append(html.Ol([html.Li(text) for text in d.caveats], className="sizing-caveats"))
    if d.caveats_not_shown:
        block.append(html.P(f"{d.caveats_not_shown} more in the summary and tables below.", className="hint"))
    return block


def sizing_content(
    data_dir: Path, run_ids: Sequence[str] | None, values: Sequence[float | None]
) -> list[Any]:
    """The Sizing page's result area for the selection and the form's values."""
    built, notes = build(data_dir, run_ids, values)
    parts: list[Any] = [html.P(note, className="hint") for note in notes]
    if built is None:
        return parts
    parts += decision_block(built)
    parts.append(html.H4("Summary"))
    parts.append(html.Ul([html.Li(line) for line in built.headline], className="sizing-summary"))
    parts += [_table(t) for section in built.sections for t in section.tables]
    parts += [
        dcc.Graph(figure=fig, id=f"sizing-graph-{i}", config=GRAPH_CONFIG, className="graph")
        for i, fig in enumerate(report_figures(built, colors_for((r.run_id, r.kind) for r in built.analyses)))
    ]
    parts.append(
        html.Details(
            [
                html.Summary("Definitions"),
                html.Ul([html.Li([html.B(term), f": {text}"]) for term, text in built.definitions]),
            ]
        )
    )
    if built.warnings:
        parts.append(
            html.Details(
                [
                    html.Summary(f"Warnings ({len(built.warnings)})"),
                    html.Ul([html.Li(w) for w in built.warnings]),
                ]
            )
        )
    return parts


def download_payload(
    data_dir: Path, run_ids: Sequence[str] | None, values: Sequence[float | None], kind: str
) -> dict[str, Any] | None:
    """dcc.Download data for the report in `kind` ('html' or 'markdown'); None when there is no report."""
    built, _ = build(data_dir, run_ids, values)
    if built is None:
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    if kind == "markdown":
        return dcc.send_string(render_markdown(built), f"sizing-{stamp}.md")
    return dcc.send_string(render_html(built), f"sizing-{stamp}.html")


def _table(table: Table) -> Any:
    parts: list[Any] = [html.H3(table.title)]
    if table.rows:
        parts.append(
            html.Table(
                [
                    html.Thead(html.Tr([html.Th(h) for h in table.headers])),
                    html.Tbody([html.Tr([html.Td(c) for c in row]) for row in table.rows]),
                ],
                className="grid",
            )
        )
    if table.note:
        parts.append(html.P(table.note, className="hint"))
    return html.Div(parts, className="sizing-table")
