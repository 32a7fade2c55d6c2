"""`python -m dashboard report`: the sizing decision report, as markdown (tickets) or self-contained HTML.

    python -m dashboard report RUN [RUN...] --out report.html|report.md [--data-dir data] [--tariff 0.15]
        [--gpu-price USD] [--cpu-price USD] [--amortise-years 3] [--value-per-hour USD] [--cpu-tdp-w W]
        [--temp-threshold 80] [--target-steps 1000] [--target-loss X] [--baseline RUN]

RUN is a run id under DATA_DIR/runs or DATA_DIR/examples, or the path of a run directory. The figures come
from dashboard.analysis (definitions in analysis.DEFINITIONS, printed at the end of every report); this
module only loads runs, lays the figures out in tables and renders them. The Sizing page uses the same
`build_report`.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import math
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from dashboard import analysis
from dashboard.analysis import Prices, RunAnalysis, RunData, Thresholds
from dashboard.runs import (
    RunInfo,
    get_run,
    open_run_dir,
    read_phases,
    read_telemetry,
    read_training,
    run_warnings,
)
from runformat import TRAINING_CSV, format_duration, is_valid_run_id

PROG = "python -m dashboard report"
DEFAULT_TARGET_STEPS = 1000


class UsageError(Exception):
    """A problem with what the user asked for: one line on stderr, exit code 2."""


@dataclass(frozen=True)
class ReportSettings:
    prices: Prices = field(default_factory=Prices)
    thresholds: Thresholds = field(default_factory=Thresholds)
    target_steps: int = DEFAULT_TARGET_STEPS
    target_loss: float | None = None
    baseline: str | None = None


@dataclass(frozen=True)
class Table:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


@dataclass(frozen=True)
class Report:
    title: str
    generated_utc: str
    summary: tuple[str, ...]
    tables: tuple[Table, ...]
    definitions: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    runs: tuple[RunData, ...]
    analyses: tuple[RunAnalysis, ...]
    target_loss: float | None


# --- loading -----------------------------------------------------------------------------------------


def resolve_run(data_dir: Path, spec: str) -> RunInfo:
    """A run id under data_dir, else a run directory path; UsageError when it is neither."""
    if is_valid_run_id(spec):
        found = get_run(data_dir, spec)
        if found is not None:
            return found
    path = Path(spec)
    if path.is_dir():
        return open_run_dir(path)
    raise UsageError(
        f"unknown run {spec!r}: not a run id under {data_dir}/runs or {data_dir}/examples, "
        "nor a run directory"
    )


def load_run(info: RunInfo) -> RunData:
    """Every file the analysis needs, parsed (through dashboard.runs' caches)."""
    training = read_training(info)
    if training.empty or "step" not in training:
        raise UsageError(f"run {info.run_id!r} has no {TRAINING_CSV} with steps: nothing to size")
    warnings = tuple(f"{info.run_id}: {w}" for w in run_warnings(info))
    return RunData(
        info.run_id,
        info.meta,
        info.training,
        info.evaluation,
        read_telemetry(info),
        training,
        read_phases(info),
        warnings,
    )


def load_runs(data_dir: Path, specs: Sequence[str]) -> list[RunData]:
    if not specs:
        raise UsageError("no runs given")
    runs = [load_run(resolve_run(data_dir, spec)) for spec in specs]
    ids = [r.run_id for r in runs]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise UsageError(f"run given twice: {', '.join(duplicates)}")
    return runs


def load_selected(data_dir: Path, run_ids: Sequence[str] | None) -> tuple[list[RunData], list[str]]:
    """The Sizing page's runs: unknown or unsafe ids and runs without training steps become notes."""
    runs, notes = [], []
    for run_id in run_ids or []:
        info = get_run(data_dir, run_id) if isinstance(run_id, str) else None
        if info is None:
            notes.append(f"{run_id!r}: no such run")
            continue
        try:
            runs.append(load_run(info))
        except UsageError as exc:
            notes.append(str(exc))
    return runs, notes


def settings_from_values(
    *,
    tariff: float | None,
    gpu_price: float | None = None,
    cpu_price: float | None = None,
    amortise_years: float | None = None,
    value_per_hour: float | None = None,
    cpu_tdp_w: float | None = None,
    temp_threshold: float | None = None,
    target_steps: float | None = None,
    target_loss: float | None = None,
) -> ReportSettings:
    """Settings from form values (None = not given, defaults where there is one); UsageError if invalid."""
    tariff_value = _optional_float("tariff", tariff)
    years = _optional_float("amortisation years", amortise_years)
    prices = Prices(
        tariff_per_kwh=Prices.tariff_per_kwh if tariff_value is None else tariff_value,
        gpu_price=_optional_float("GPU price", gpu_price),
        cpu_price=_optional_float("CPU price", cpu_price),
        amortise_years=Prices.amortise_years if years is None else years,
        value_per_hour=_optional_float("value per hour", value_per_hour),
        cpu_tdp_w=_optional_float("CPU TDP", cpu_tdp_w),
    )
    problems = prices.problems()
    if problems:
        raise UsageError(problems[0])
    temp = _optional_float("temperature threshold", temp_threshold)
    temp = Thresholds.temp_threshold_c if temp is None else temp
    if not math.isfinite(temp):
        raise UsageError(f"temperature threshold must be a finite number, got {temp_threshold!r}")
    steps = _optional_float("target steps", target_steps)
    steps = DEFAULT_TARGET_STEPS if steps is None else steps
    if not math.isfinite(steps) or steps < 1 or steps != int(steps):
        raise UsageError(f"target steps must be a whole number ≥ 1, got {target_steps!r}")
    loss = _optional_float("target loss", target_loss)
    if loss is not None and not (math.isfinite(loss) and loss > 0):
        raise UsageError(f"target loss must be a number > 0, got {target_loss!r}")
    return ReportSettings(prices, Thresholds(temp_threshold_c=temp), int(steps), loss, None)


def _optional_float(name: str, value: object) -> float | None:
    """None for an empty form field, else the number; UsageError for anything else."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise UsageError(f"{name} must be a number, got {value!r}")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a number, got {value!r}") from None


# --- formatting --------------------------------------------------------------------------------------


def fmt(value: float | None, digits: int = 2, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if math.isinf(value):
        return "never"
    return f"{value:,.{digits}f}{unit}"


def fmt_usd(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:,.4f}" if abs(value) < 1 else f"${value:,.2f}"


def fmt_seconds(seconds: float | None) -> str:
    """`42.0 s`, or `42.0 s (12m0s)`-style with the human form once it is over two minutes."""
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds:,.0f} s ({format_duration(seconds)})"


def fmt_spread(spread: analysis.Spread, digits: int = 2) -> str:
    if spread.mean is None:
        return "—"
    if spread.count < 2:
        return fmt(spread.mean, digits)
    return (
        f"{fmt(spread.mean, digits)} ± {fmt(spread.std, digits)} "
        f"({fmt(spread.minimum, digits)}–{fmt(spread.maximum, digits)}, n={spread.count})"
    )


# --- the report --------------------------------------------------------------------------------------


def build_report(runs: Sequence[RunData], settings: ReportSettings) -> Report:
    """All tables of the decision report, from parsed runs."""
    problems = settings.prices.problems()
    if problems:
        raise UsageError(problems[0])
    if settings.baseline is not None and settings.baseline not in {r.run_id for r in runs}:
        raise UsageError(f"baseline {settings.baseline!r} is not one of the runs in the report")
    analyses = [analysis.analyse_run(run, settings.prices, settings.thresholds) for run in runs]
    groups = analysis.compare(analyses, settings.prices, settings.baseline)
    target_loss = settings.target_loss
    if target_loss is None:
        target_loss = analysis.common_target_loss(a.min_smoothed_loss for a in analyses)
    tables = (
        settings_table(settings, target_loss),
        runs_table(analyses),
        comparison_table(groups, settings.prices),
        time_to_table(runs, analyses, settings.target_steps, target_loss),
        energy_table(analyses),
        thermal_table(analyses, settings.thresholds),
        throttle_table(analyses),
        verdict_table(analyses),
        accuracy_table(analyses),
    )
    warnings = tuple(dict.fromkeys(w for a in analyses for w in a.warnings))
    return Report(
        title="Is the GPU worth it? Sizing report",
        generated_utc=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        summary=tuple(summary_lines(groups, settings.prices)),
        tables=tables,
        definitions=analysis.DEFINITIONS,
        warnings=warnings,
        runs=tuple(runs),
        analyses=tuple(analyses),
        target_loss=target_loss,
    )


def summary_lines(groups: Sequence[analysis.GroupSummary], prices: Prices) -> list[str]:
    """The decision in sentences: each configuration against the baseline."""
    base = next((g for g in groups if g.is_baseline), None)
    if base is None:
        return ["No baseline run: nothing to compare."]
    lines = [
        f"Baseline: {base.name} ({fmt(base.examples_per_s.mean)} examples/s, "
        f"{fmt_usd(base.total_usd_per_1000.mean)} per 1,000 steps)."
    ]
    for group in groups:
        if group.is_baseline:
            continue
        line = (
            f"{group.name}: {fmt(group.speedup)}× the baseline's examples/s, "
            f"{fmt_usd(group.total_usd_per_1000.mean)} per 1,000 steps"
        )
        if group.kind == "gpu":
            line += "; " + break_even_text(group, prices)
        lines.append(line + ".")
    if len(lines) == 1:
        lines.append("Only one configuration: add a GPU run (or a CPU baseline) to compare.")
    return lines


def break_even_text(group: analysis.GroupSummary, prices: Prices) -> str:
    hours = group.break_even_gpu_hours
    if hours is None:
        if prices.gpu_price is None:
            return "break-even needs the GPU price (--gpu-price)"
        return (
            "break-even needs the value of an hour saved (--value-per-hour) or energy readings on both sides"
        )
    if math.isinf(hours):
        return "the GPU never pays back at these prices (it saves nothing)"
    baseline_hours = hours * group.speedup if group.speedup else None
    return (
        f"the GPU pays back its {fmt_usd(prices.gpu_price)} after {fmt(hours, 1)} GPU training hours "
        f"(≈ {fmt(baseline_hours, 1)} hours of baseline training)"
    )


def settings_table(settings: ReportSettings, target_loss: float | None) -> Table:
    p, t = settings.prices, settings.thresholds
    rows = (
        ("Tariff", f"${p.tariff_per_kwh:g} per kWh"),
        ("GPU price", fmt_usd(p.gpu_price) if p.gpu_price is not None else "not given (0)"),
        ("CPU / host price", fmt_usd(p.cpu_price) if p.cpu_price is not None else "not given (0)"),
        ("Amortisation", f"{p.amortise_years:g} years of round-the-clock use"),
        (
            "Value of an hour saved",
            fmt_usd(p.value_per_hour) if p.value_per_hour is not None else "not given",
        ),
        ("CPU TDP for the estimate", f"{p.cpu_tdp_w:g} W" if p.cpu_tdp_w is not None else "not given"),
        ("Temperature threshold", f"{t.temp_threshold_c:g} °C"),
        ("Target steps", f"{settings.target_steps:,}"),
        (
            "Target loss",
            fmt(target_loss, 4) + ("" if settings.target_loss is not None else " (reached by all)"),
        ),
    )
    return Table("Settings", ("Setting", "Value"), rows)


def runs_table(analyses: Sequence[RunAnalysis]) -> Table:
    rows = []
    for a in analyses:
        t = a.throughput
        budget = f"{t.steps_in_budget:,} in {fmt_seconds(t.budget_s)}" if t.budget_s else "no budget"
        rows.append(
            (
                a.run_id,
                a.label,
                a.kind.upper(),
                a.hardware,
                a.config,
                f"{t.steps_total:,}",
                budget,
                str(t.warmup_steps),
                fmt_seconds(t.first_step_s),
                fmt(t.steps_per_s, 3),
                fmt(t.examples_per_s, 3),
            )
        )
    headers = (
        "Run",
        "Label",
        "Device",
        "Hardware",
        "Config",
        "Steps",
        "Steps within budget",
        "Warm-up steps",
        "First step",
        "Steady steps/s",
        "Steady examples/s",
    )
    return Table("Runs", headers, tuple(rows))


def comparison_table(groups: Sequence[analysis.GroupSummary], prices: Prices) -> Table:
    rows = []
    for g in groups:
        even = "baseline" if g.is_baseline else ("—" if g.kind != "gpu" else fmt(g.break_even_gpu_hours, 1))
        rows.append(
            (
                g.name + (" (baseline)" if g.is_baseline else ""),
                str(len(g.run_ids)),
                fmt_spread(g.steps_per_s, 3),
                fmt_spread(g.examples_per_s, 3),
                fmt(g.speedup, 2, "×"),
                fmt_spread(g.j_per_1000_steps, 0),
                fmt_usd(g.energy_usd_per_1000.mean),
                fmt_usd(g.hardware_usd_per_1000.mean),
                fmt_usd(g.total_usd_per_1000.mean),
                even,
            )
        )
    headers = (
        "Configuration",
        "Runs",
        "Steps/s",
        "Examples/s",
        "Speedup",
        "J per 1,000 steps",
        "Energy $ per 1,000 steps",
        "Hardware $ per 1,000 steps",
        "Total $ per 1,000 steps",
        "Break-even (GPU hours)",
    )
    note = "Mean ± sample standard deviation (min–max, n) over repeats of one configuration."
    if prices.gpu_price is None:
        note += " Break-even needs the GPU price (--gpu-price)."
    return Table("Comparison", headers, tuple(rows), note)


def time_to_table(
    runs: Sequence[RunData], analyses: Sequence[RunAnalysis], target_steps: int, target_loss: float | None
) -> Table:
    rows = []
    for run, a in zip(runs, analyses, strict=True):
        to_steps = analysis.time_to_steps(
            run.training, run.training_info, target_steps, a.throughput.steps_per_s
        )
        steps_text = fmt_seconds(to_steps.seconds) + (" (projected)" if to_steps.projected else "")
        loss_text = "—"
        if target_loss is not None:
            to_loss = analysis.time_to_loss(run.training, run.training_info, target_loss)
            loss_text = (
                "not reached"
                if to_loss.seconds is None
                else f"{fmt_seconds(to_loss.seconds)} (step {to_loss.step:,.0f})"
            )
        rows.append((a.run_id, steps_text, loss_text, fmt(a.min_smoothed_loss, 4)))
    headers = (
        "Run",
        f"Time to {target_steps:,} steps",
        f"Time to loss ≤ {fmt(target_loss, 4)}",
        "Lowest smoothed loss",
    )
    return Table("Time to target", headers, tuple(rows), "Elapsed training time, from training.json's start.")


def energy_table(analyses: Sequence[RunAnalysis]) -> Table:
    rows = []
    for a in analyses:
        steady, whole = a.steady_energy, a.training_energy
        gpu_method = steady.gpu_method if steady and steady.gpu_method else "—"
        cpu_method = steady.cpu_method if steady and steady.cpu_method else "not measured"
        mean_power = steady.total_j / steady.window_s if steady and steady.total_j is not None else None
        total_kwh = whole.total_j / analysis.JOULES_PER_KWH if whole and whole.total_j is not None else None
        rows.append(
            (
                a.run_id,
                fmt(a.gpu_j_per_1000_steps, 0),
                gpu_method,
                fmt(a.cpu_j_per_1000_steps, 0),
                cpu_method,
                fmt(a.j_per_1000_steps, 0),
                fmt(mean_power, 1),
                fmt(total_kwh, 4),
                fmt_usd(a.cost_per_1000_steps.energy_usd),
                fmt_usd(a.cost_per_1000_steps.hardware_usd),
                fmt_usd(a.cost_per_1000_steps.total_usd),
            )
        )
    headers = (
        "Run",
        "GPU J per 1,000 steps",
        "GPU source",
        "CPU J per 1,000 steps",
        "CPU source",
        "Total J per 1,000 steps",
        "Mean power (W)",
        "Training energy (kWh)",
        "Energy $ per 1,000",
        "Hardware $ per 1,000",
        "Total $ per 1,000",
    )
    return Table(
        "Energy and cost",
        headers,
        tuple(rows),
        "Per-step figures over the measurement window; training energy over the training window.",
    )


def thermal_table(analyses: Sequence[RunAnalysis], thresholds: Thresholds) -> Table:
    rows = [
        (a.run_id, t.sensor, fmt(t.peak_c, 1), fmt_seconds(t.time_above_s))
        for a in analyses
        for t in a.thermal
    ]
    note = "" if rows else "No temperature sensor in any run."
    return Table(
        "Thermal",
        ("Run", "Sensor", "Peak °C", f"Time ≥ {thresholds.temp_threshold_c:g} °C"),
        tuple(rows),
        note,
    )


def throttle_table(analyses: Sequence[RunAnalysis]) -> Table:
    rows = [
        (
            a.run_id,
            t.source,
            f"{t.throttled_samples}/{t.samples}",
            f"{t.fraction:.1%}",
            str(t.events),
            fmt_seconds(t.throttled_s),
        )
        for a in analyses
        for t in a.throttling
        if t.samples
    ]
    note = "" if rows else "No throttle reasons or CPU frequency readings in any run."
    return Table(
        "Throttling (training window)",
        ("Run", "Source", "Throttled samples", "Fraction", "Events", "Time throttled"),
        tuple(rows),
        note,
    )


def verdict_table(analyses: Sequence[RunAnalysis]) -> Table:
    rows = []
    for a in analyses:
        v = a.verdict
        means = ", ".join(
            f"{k.removesuffix('_pct').replace('_', ' ')} {fmt(n, 1)} %"
            for k, n in v.numbers.items()
            if k.endswith("_pct") and n is not None
        )
        rows.append((a.run_id, " + ".join(v.labels), "; ".join(v.evidence), means))
    return Table("Bottleneck verdict", ("Run", "Verdict", "Why", "Means (measurement window)"), tuple(rows))


def accuracy_table(analyses: Sequence[RunAnalysis]) -> Table:
    rows = []
    for a in analyses:
        e = a.evaluation
        rows.append(
            (
                a.run_id,
                f"{a.throughput.steps_total:,}",
                fmt(_number(e.get("map_50")), 3),
                fmt(_number(e.get("recall_50")), 3),
                fmt(_number(e.get("precision_50")), 3),
                fmt(_number(e.get("global_step")), 0),
                fmt(_number(e.get("num_images")), 0),
            )
        )
    note = "" if any(a.evaluation for a in analyses) else "No eval.json in any run."
    return Table(
        "Accuracy bought",
        ("Run", "Steps trained", "mAP@0.5", "Recall@0.5", "Precision@0.5", "Evaluated at step", "Images"),
        tuple(rows),
        note,
    )


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


# --- markdown ----------------------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(table: Table) -> str:
    lines = [f"## {table.title}", ""]
    if table.rows:
        lines.append("| " + " | ".join(_md_cell(h) for h in table.headers) + " |")
        lines.append("|" + "---|" * len(table.headers))
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
        lines.append("")
    if table.note:
        lines += [table.note, ""]
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    parts = [f"# {report.title}", "", f"Generated {report.generated_utc} from {len(report.runs)} run(s).", ""]
    parts += [f"- {line}" for line in report.summary] + [""]
    parts += [markdown_table(t) for t in report.tables]
    parts += ["## Definitions", ""] + [f"- **{term}**: {text}" for term, text in report.definitions] + [""]
    if report.warnings:
        parts += ["## Warnings", ""] + [f"- {_md_cell(w)}" for w in report.warnings] + [""]
    return "\n".join(parts)


# --- HTML --------------------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
.note { color: #555; font-size: 0.9em; }
"""


def html_table(table: Table) -> str:
    parts = [f"<h2>{html.escape(table.title)}</h2>"]
    if table.rows:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table.rows
        )
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    if table.note:
        parts.append(f'<p class="note">{html.escape(table.note)}</p>')
    return "\n".join(parts)


def render_html(report: Report) -> str:
    figures = report_figures(report)
    figure_html = [
        fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False})
        for i, fig in enumerate(figures)
    ]
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in report.summary)
    definitions = "".join(
        f"<li><b>{html.escape(term)}</b>: {html.escape(text)}</li>" for term, text in report.definitions
    )
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in report.warnings)
    body = [
        f"<h1>{html.escape(report.title)}</h1>",
        f'<p class="note">Generated {html.escape(report.generated_utc)} from {len(report.runs)} run(s).</p>',
        f"<ul>{summary}</ul>",
        *(html_table(t) for t in report.tables),
        *figure_html,
        f"<h2>Definitions</h2><ul>{definitions}</ul>",
        f"<h2>Warnings</h2><ul>{warnings}</ul>" if warnings else "",
    ]
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(report.title)}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


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
            y=[a.throughput.examples_per_s or 0.0 for a in report.analyses],
            text=[a.kind.upper() for a in report.analyses],
            marker_color=["#d62728" if a.kind == "gpu" else "#1f77b4" for a in report.analyses],
        )
    )
    bars.update_layout(title="Steady-state examples/s", yaxis_title="examples/s", height=360)
    figures.append(bars)
    loss = go.Figure()
    for run in report.runs:
        rows = analysis.clean_training(run.training)
        smooth = analysis.smoothed_loss(rows)
        if smooth.dropna().empty:
            continue
        elapsed = analysis._training_elapsed(rows, run.training_info)
        frame = _thin(pd.DataFrame({"elapsed": elapsed, "loss": smooth.to_numpy(dtype=float)}))
        loss.add_trace(go.Scatter(x=frame["elapsed"], y=frame["loss"], mode="lines", name=run.run_id))
    if loss.data:
        loss.update_layout(
            title=f"Smoothed total loss ({analysis.LOSS_WINDOW_STEPS}-step trailing mean)",
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


# --- CLI ---------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def _non_negative(text: str) -> float:
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number ≥ 0, got {text!r}")
    return value


def _positive(text: str) -> float:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    value = _positive(text)
    if value != int(value):
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}")
    return int(value)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Write the sizing decision report (is the GPU worth it?).")
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run id under DATA_DIR, or a run directory")
    parser.add_argument("--out", required=True, type=Path, help="report.md (markdown) or report.html")
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="default: data")
    parser.add_argument(
        "--tariff", type=_non_negative, default=0.15, help="electricity, USD per kWh (default 0.15)"
    )
    parser.add_argument(
        "--gpu-price",
        type=_non_negative,
        help="price of the GPU(s), USD (default: not given = already owned)",
    )
    parser.add_argument(
        "--cpu-price",
        type=_non_negative,
        help="price of the host without GPU, USD (default: not given = already owned)",
    )
    parser.add_argument(
        "--amortise-years", type=_positive, default=3.0, help="hardware lifetime, round the clock (default 3)"
    )
    parser.add_argument(
        "--value-per-hour", type=_non_negative, help="what an hour of training time saved is worth, USD"
    )
    parser.add_argument(
        "--cpu-tdp-w", type=_positive, help="CPU TDP for an energy ESTIMATE when RAPL is absent"
    )
    parser.add_argument("--temp-threshold", type=_finite, default=80.0, help="°C (default 80)")
    parser.add_argument(
        "--target-steps",
        type=_positive_int,
        default=DEFAULT_TARGET_STEPS,
        help="for time to N steps (default 1000)",
    )
    parser.add_argument("--target-loss", type=_positive, help="default: the lowest loss every run reached")
    parser.add_argument("--baseline", help="run to compare against (default: the first CPU run)")
    return parser


def settings_from(args: argparse.Namespace) -> ReportSettings:
    prices = Prices(
        tariff_per_kwh=args.tariff,
        gpu_price=args.gpu_price,
        cpu_price=args.cpu_price,
        amortise_years=args.amortise_years,
        value_per_hour=args.value_per_hour,
        cpu_tdp_w=args.cpu_tdp_w,
    )
    thresholds = Thresholds(temp_threshold_c=args.temp_threshold)
    return ReportSettings(prices, thresholds, args.target_steps, args.target_loss, args.baseline)


def output_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".html", ".htm"):
        return "html"
    if suffix in (".md", ".markdown"):
        return "markdown"
    raise UsageError(f"--out must end in .html or .md, got {str(path)!r}")


def write_text_atomic(path: Path, text: str) -> None:
    if not path.parent.is_dir():
        raise UsageError(f"--out: directory {str(path.parent)!r} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def resolve_baseline(data_dir: Path, spec: str | None, runs: Sequence[RunData]) -> str | None:
    """--baseline as a run id of the report: given as an id or as one of the RUN paths."""
    if spec is None:
        return None
    ids = {r.run_id for r in runs}
    if spec in ids:
        return spec
    name = Path(spec).name
    if name in ids:
        return name
    raise UsageError(f"--baseline {spec!r} is not one of the runs in the report")


def main(argv: list[str]) -> int:
    """`python -m dashboard report ...`; 0 on success, 2 on bad input (one line on stderr)."""
    try:
        args = build_parser().parse_args(argv)
        kind = output_format(args.out)
        settings = settings_from(args)
        runs = load_runs(args.data_dir, args.runs)
        baseline = resolve_baseline(args.data_dir, args.baseline, runs)
        report = build_report(
            runs,
            ReportSettings(
                settings.prices, settings.thresholds, settings.target_steps, settings.target_loss, baseline
            ),
        )
        text = render_html(report) if kind == "html" else render_markdown(report)
        write_text_atomic(args.out, text)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({len(report.runs)} run(s), {kind})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
