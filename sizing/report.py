"""The sizing report: the headline decision, the sections (SECTIONS, in order), warnings, JSON."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from sizing import compare as cmp
from sizing.analysis import RunAnalysis, analyse_run
from sizing.context import ReportContext, ReportSettings
from sizing.definitions import definitions
from sizing.model import RunData, Section, UsageError
from sizing.sections_health import accuracy_section, bottleneck_section, thermal_section, throttle_section
from sizing.sections_scaling import scaling_section
from sizing.sections_serving import serving_report_section
from sizing.sections_speed import (
    comparison_section,
    energy_section,
    runs_section,
    settings_section,
    time_to_section,
)
from sizing.text import ESTIMATE, NO_PRICE, NOT_MEASURED, fmt, fmt_usd, marked
from sizing.throughput import NO_WORK_COUNTER, common_target_loss

SectionFunction = Callable[[ReportContext], Section]
SECTIONS: list[SectionFunction] = [
    settings_section,
    runs_section,
    comparison_section,
    time_to_section,
    energy_section,
    scaling_section,
    thermal_section,
    throttle_section,
    bottleneck_section,
    accuracy_section,
    serving_report_section,
]


@dataclass(frozen=True)
class Report:
    title: str
    generated_utc: str
    headline: tuple[str, ...]
    sections: tuple[Section, ...]
    definitions: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    context: ReportContext

    @property
    def runs(self) -> tuple[RunData, ...]:
        return self.context.runs

    @property
    def analyses(self) -> tuple[RunAnalysis, ...]:
        return self.context.analyses


def build_report(runs: Sequence[RunData], settings: ReportSettings) -> Report:
    problems = settings.prices.problems()
    if problems:
        raise UsageError(problems[0])
    if settings.baseline is not None and settings.baseline not in {r.run_id for r in runs}:
        raise UsageError(f"baseline {settings.baseline!r} is not one of the runs in the report")
    analyses = tuple(analyse_run(run, settings.prices, settings.thresholds) for run in runs)
    groups = tuple(cmp.group_runs(analyses))
    baseline = cmp.pick_baseline(groups, settings.baseline)
    comparisons = tuple(cmp.compare(groups, baseline, settings.prices))
    target_loss = settings.target_loss
    if target_loss is None:
        target_loss = common_target_loss(a.min_smoothed_loss for a in analyses)
    ctx = ReportContext(settings, tuple(runs), analyses, groups, baseline, comparisons, target_loss)
    warnings = [w for a in analyses for w in a.warnings]
    for c in comparisons:
        if not c.is_baseline and not c.like_for_like and baseline is not None:
            warnings.append(
                f"{c.group.name} vs the baseline is NOT like-for-like: {'; '.join(c.differences)}"
            )
    return Report(
        title="Is the GPU worth it? Sizing report",
        generated_utc=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        headline=tuple(headline(ctx)),
        sections=tuple(section(ctx) for section in SECTIONS),
        definitions=definitions(settings.thresholds),
        warnings=tuple(dict.fromkeys(warnings)),
        context=ctx,
    )


def _money(g: cmp.Group) -> str:
    energy = fmt(g.j_per_1k_examples.mean, 0, " J", unknown=f"energy {NOT_MEASURED}")
    if g.total_usd_per_1k.mean is not None:
        cost = fmt_usd(g.total_usd_per_1k.mean)
    elif g.energy_usd_per_1k.mean is not None:
        cost = f"{fmt_usd(g.energy_usd_per_1k.mean)} of energy (hardware: {NO_PRICE})"
    elif g.hardware_usd_per_1k.mean is None:
        cost = f"cost n/a ({NO_PRICE})"
    else:
        cost = f"cost n/a (energy {NOT_MEASURED})"
    text = f"{energy} and {cost} per 1,000 examples"
    return marked(text, g.energy_is_estimate and g.j_per_1k_examples.mean is not None)


def headline(ctx: ReportContext) -> list[str]:
    """The decision in sentences: each configuration against the baseline."""
    base = ctx.baseline
    if base is None:
        return ["No runs: nothing to compare."]
    lines = [
        f"Baseline: {base.name} ({fmt(base.examples_per_s.mean, 3, unknown=NO_WORK_COUNTER)} examples/s; "
        f"{_money(base)})."
    ]
    for c in ctx.comparisons:
        if c.is_baseline:
            continue
        g = c.group
        ci = f" (95 % CI {c.speedup_ci95[0]:.2f}–{c.speedup_ci95[1]:.2f}×)" if c.speedup_ci95 else ""
        speed = fmt(c.speedup, 2, "×", unknown="speedup n/a")
        line = f"{g.name}: {speed}{ci} the baseline's examples/s; {_money(g)}"
        if g.kind == "gpu":
            line += "; " + break_even_text(c, ctx)
        if not c.like_for_like:
            line += f" — NOT like-for-like ({'; '.join(c.differences)})"
        lines.append(line + ".")
    if len(lines) == 1:
        lines.append(
            "Only one configuration: add a GPU run (or a CPU baseline) of the same workload to compare."
        )
    return lines


def break_even_text(c: cmp.Comparison, ctx: ReportContext) -> str:
    prices, hours = ctx.settings.prices, c.break_even_hours
    if hours is None:
        if prices.gpu_price is None:
            return f"break-even: {NO_PRICE} for the GPU (--gpu-price)"
        return (
            "break-even needs the value of an hour saved (--value-per-hour) or energy readings on both sides"
        )
    if math.isinf(hours):
        return "the GPU never pays back at these prices (it saves nothing)"
    base_hours = hours * c.speedup if c.speedup else None
    text = (
        f"the GPU pays back its {fmt_usd(prices.gpu_price)} after {fmt(hours, 1)} GPU training hours "
        f"(≈ {fmt(base_hours, 1)} hours of baseline training)"
    )
    return f"{text} ({ESTIMATE})" if c.break_even_is_estimate else text


def _finite_or_text(value: float | None) -> float | str | None:
    if value is None:
        return None
    return "never" if math.isinf(value) else value


def to_json(report: Report) -> dict:
    """The JSON output (documented in docs/sizing.md)."""
    ctx = report.context
    base = ctx.baseline
    runs = [
        {
            "run_id": a.run_id,
            "label": a.label,
            "device": a.kind,
            "workload": a.workload,
            "hardware": a.hardware,
            "throughput_source": a.throughput.source,
            "examples_per_s": a.throughput.examples_per_s,
            "steps_per_s": a.throughput.steps_per_s,
            "energy_j_per_1k_examples": a.j_per_1k_examples,
            "energy_is_estimate": a.energy_is_estimate,
            "energy_covers": a.steady_energy.covers if a.steady_energy else NOT_MEASURED,
            "energy_usd_per_1k_examples": a.energy_usd_per_1k_examples,
            "hardware_usd_per_1k_examples": a.hardware_usd_per_1k_examples,
            "verdict": a.verdict.primary,
            "verdict_labels": list(a.verdict.labels),
        }
        for a in ctx.analyses
    ]
    comparisons = [
        {
            "run_id": run_id,
            "group": list(c.group.run_ids),
            "baseline": list(base.run_ids) if base else None,
            "like_for_like": c.like_for_like,
            "differences": list(c.differences),
            "speedup": c.speedup,
            "speedup_ci95": list(c.speedup_ci95) if c.speedup_ci95 else None,
            "break_even_hours": _finite_or_text(c.break_even_hours),
            "break_even_is_estimate": c.break_even_is_estimate,
        }
        for c in ctx.comparisons
        if not c.is_baseline
        for run_id in c.group.run_ids
    ]
    return {
        "format_version": 1,
        "generated_utc": report.generated_utc,
        "headline": list(report.headline),
        "baseline": {"run_ids": list(base.run_ids), "name": base.name} if base else None,
        "runs": runs,
        "comparisons": comparisons,
        "sections": {s.key: s.data for s in report.sections},
        "definitions": dict(report.definitions),
        "warnings": list(report.warnings),
    }
