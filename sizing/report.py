"""The sizing report: the headline decision, the sections (SECTIONS, in order), warnings, JSON."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from sizing import compare as cmp
from sizing import money_text as mt
from sizing.analysis import RunAnalysis, analyse_run
from sizing.context import ReportContext, ReportSettings
from sizing.definitions import definitions
from sizing.json_out import report_json
from sizing.model import RunData, Section, UsageError
from sizing.sections_health import accuracy_section, bottleneck_section, thermal_section, throttle_section
from sizing.sections_serving import serving_report_section
from sizing.sections_speed import (
    comparison_section,
    energy_section,
    runs_section,
    settings_section,
    time_to_section,
)
from sizing.text import fmt
from sizing.throughput import NO_WORK_COUNTER, common_target_loss

SectionFunction = Callable[[ReportContext], Section]
SECTIONS: list[SectionFunction] = [
    settings_section,
    runs_section,
    comparison_section,
    time_to_section,
    energy_section,
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
        generated_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        headline=tuple(headline(ctx)),
        sections=tuple(section(ctx) for section in SECTIONS),
        definitions=definitions(settings.thresholds),
        warnings=tuple(dict.fromkeys(warnings)),
        context=ctx,
    )


def headline(ctx: ReportContext) -> list[str]:
    """The decision in sentences: each configuration against the baseline."""
    base = ctx.baseline
    if base is None:
        return ["No runs: nothing to compare."]
    lines = [
        f"Baseline: {base.name} ({fmt(base.examples_per_s.mean, 3, unknown=NO_WORK_COUNTER)} examples/s; "
        f"{mt.money_phrase(base, ctx.settings.prices)})"
        + mt.attribution_note(base)
        + mt.energy_checks_note(base)
        + "."
    ]
    for c in ctx.comparisons:
        if c.is_baseline:
            continue
        g = c.group
        ci = f" (95 % CI {c.speedup_ci95[0]:.2f}–{c.speedup_ci95[1]:.2f}×)" if c.speedup_ci95 else ""
        speed = fmt(c.speedup, 2, "×", unknown="speedup n/a")
        line = f"{g.name}: {speed}{ci} the baseline's examples/s; {mt.money_phrase(g, ctx.settings.prices)}"
        if g.kind == "gpu":
            line += "; " + mt.break_even_text(c, ctx)
        line += mt.attribution_note(g) + mt.energy_checks_note(g)
        if not c.like_for_like:
            line += f" — NOT like-for-like ({'; '.join(c.differences)})"
        lines.append(line + ".")
    if len(lines) == 1:
        lines.append(
            "Only one configuration: add a GPU run (or a CPU baseline) of the same workload to compare."
        )
    return lines


def to_json(report: Report) -> dict:
    """The JSON output (docs/sizing.md; docs/sizing.schema.json)."""
    return report_json(report.context, report.generated_utc, list(report.headline),
                       {s.key: s.data for s in report.sections}, dict(report.definitions),
                       list(report.warnings))  # fmt: skip
