"""The sizing report: the headline decision, the sections (SECTIONS, in order), warnings, JSON."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from sizing.analysis import compare as cmp
from sizing.analysis import concurrency, money, validity
from sizing.analysis import tuning as tn
from sizing.analysis.copies import fold_copies
from sizing.analysis.headroom import group_phrase
from sizing.analysis.jobs import Job, analyse_job, gather_jobs
from sizing.analysis.run import RunAnalysis, analyse_run
from sizing.analysis.signature import listed_gpus
from sizing.analysis.throughput import common_target_loss
from sizing.analysis.validate import nothing_to_size, validated_run
from sizing.context import ReportContext, ReportSettings
from sizing.model import RunData, Section, UsageError
from sizing.output.json_out import report_json
from sizing.sections import money_text as mt
from sizing.sections.decision import Decision, decision, decision_json
from sizing.sections.definitions import definitions
from sizing.sections.health import accuracy_section, bottleneck_section, thermal_section, throttle_section
from sizing.sections.scaling import scaling_section
from sizing.sections.serving import serving_report_section
from sizing.sections.speed import (
    comparison_section,
    energy_section,
    runs_section,
    settings_section,
    time_to_section,
)
from sizing.sections.tuning import tuning_section
from sizing.sections.validity import validity_section
from sizing.text import fmt, steps_only_rate

SectionFunction = Callable[[ReportContext], Section]
RATE_UNIT = {False: "examples/s", True: "steps/s (examples per step not known on either side)"}
SECTIONS: list[SectionFunction] = [
    settings_section,
    runs_section,
    validity_section,
    comparison_section,
    time_to_section,
    tuning_section,
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
    decision: Decision
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
    prices, price_notes = money.named_prices(settings.prices, gpu_models(runs), hosts(runs))
    settings = replace(settings, prices=prices)
    runs, copied = fold_copies(runs, settings.baseline)
    folded = tn.fold_trials(runs, settings.include_incomplete)
    if settings.baseline in folded.trial_of:
        raise UsageError(
            f"baseline {settings.baseline!r} is a --tune trial: name its sweep's final run, "
            f"{folded.trial_of[settings.baseline]!r}"
        )
    runs, analyses, unsized, job_notes = sizable_runs(folded.runs, settings)
    left_out = () if settings.include_incomplete else tuple(a for a in analyses if a.incomplete)
    groups = tuple(cmp.group_runs([a for a in analyses if a not in left_out]))
    named = settings.baseline if settings.baseline not in {a.run_id for a in left_out} else None
    baseline = cmp.pick_baseline(groups, named)
    comparisons = tuple(cmp.compare(groups, baseline, settings.prices))
    target_loss = settings.target_loss
    if target_loss is None:
        target_loss = common_target_loss(a.min_smoothed_loss for a in analyses)
    tuned = tn.tuned_pairs(comparisons, baseline, runs, target_loss)
    own = cmp.own_baselines(groups, baseline, comparisons, settings.prices)
    ctx = ReportContext(
        settings,
        tuple(runs),
        analyses,
        groups,
        baseline,
        comparisons,
        target_loss,
        left_out,
        tuned,
        unsized,
        own,
    )
    unsized_notes = [f"{why}: left out of the report" for why in unsized]
    warnings = [*price_notes, *copied, *folded.notes, *unsized_notes, *job_notes,
                *(w for a in analyses for w in a.warnings), *validity_warnings(ctx)]  # fmt: skip
    return Report(
        title="Is the GPU worth it? Sizing report",
        generated_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        decision=decision(ctx),
        headline=tuple(headline(ctx)),
        sections=tuple(section(ctx) for section in SECTIONS),
        definitions=definitions(settings.thresholds),
        warnings=tuple(dict.fromkeys(warnings)),
        context=ctx,
    )


def gpu_models(runs: Sequence[RunData]) -> list[str]:
    """The GPU models the runs name (run.json system.gpus, else training.json gpu_names)."""
    found = []
    for run in runs:
        found += [str(g.get("name")) for g in listed_gpus(run.meta) if g.get("name")]
        names = run.training_info.get("gpu_names") if isinstance(run.training_info, dict) else None
        found += [str(n) for n in names if isinstance(n, str)] if isinstance(names, list) else []
    return found


def hosts(runs: Sequence[RunData]) -> list[str]:
    """The runs' host names and CPU models (run.json), as --host-price and --cpu-tdp name them."""
    found = []
    for run in runs:
        system = run.meta.get("system") if isinstance(run.meta.get("system"), dict) else {}
        found += [str(v) for v in (run.meta.get("host"), system.get("cpu_model")) if isinstance(v, str)]
    return found


def sizable_runs(
    runs: Sequence[RunData], settings: ReportSettings
) -> tuple[tuple[RunData, ...], tuple[RunAnalysis, ...], tuple[str, ...], list[str]]:
    """The runs that can be sized, validated and analysed (a multi-node job's nodes as one, under node
    0's run: sizing.analysis.jobs), why each run left out could not be sized, and a line per job not read
    as one; UsageError when none can be."""
    kept, analyses, unsized = [], [], []
    gathered, notes = gather_jobs([validated_run(run) for run in runs])
    for item in gathered:
        run = item.nodes[0] if isinstance(item, Job) else item
        why = nothing_to_size(run)
        if why is None:
            try:
                if isinstance(item, Job):
                    analyses.append(analyse_job(item, settings.prices, settings.thresholds))
                else:
                    analyses.append(analyse_run(run, settings.prices, settings.thresholds))
                kept.append(run)
                continue
            except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError) as exc:
                why = f"run {run.run_id!r} could not be sized ({type(exc).__name__}: {exc})".splitlines()[0]
        unsized.append(why)
    if not analyses:
        raise UsageError("nothing to size: " + "; ".join(unsized))
    return tuple(kept), tuple(analyses), tuple(unsized), notes


def validity_warnings(ctx: ReportContext) -> list[str]:
    found = [
        f"{a.run_id}: left out of the averages, {a.incomplete} ({validity.INCLUDE_FLAG} includes it)"
        + ("; the baseline is picked without it" if a.run_id == ctx.settings.baseline else "")
        for a in ctx.left_out
    ]
    found += [
        f"{a.run_id}: {a.incomplete}; averaged in as a repeat ({validity.INCLUDE_FLAG})"
        for a in ctx.analyses
        if a.incomplete and a not in ctx.left_out
    ]
    for c in ctx.comparisons:
        if not c.is_baseline and not c.like_for_like and ctx.baseline is not None:
            found.append(f"{c.group.name} vs the baseline is {validity.like_for_like_text(c)}")
    found += [overlap.text() for overlap in concurrency.overlaps(ctx.analyses)]
    weak = validity.group_weak_reasons(ctx.baseline, ctx.settings.thresholds) if ctx.baseline else []
    if ctx.baseline is not None and weak:
        found.append(f"the baseline {ctx.baseline.name} is weak: {'; '.join(weak)}")
    return found


def headline(ctx: ReportContext) -> list[str]:
    """The decision in sentences: each configuration against the baseline."""
    base = ctx.baseline
    if base is None:
        return ["No complete run: nothing to compare.", *validity.left_out_lines(ctx)]
    rate = steps_only_rate(base.examples_per_s.mean, base.steps_per_s.mean) or (
        f"{fmt(base.examples_per_s.mean, 3, unknown=base.examples_unknown)} examples/s"
    )
    lines = [
        f"Baseline: {base.name} ({rate}; "
        f"{mt.money_phrase(base, ctx.settings.prices)})"
        + mt.attribution_note(base)
        + mt.energy_checks_note(base)
        + validity.baseline_suffix(ctx)
        + "."
    ]
    for c in ctx.comparisons:
        if c.is_baseline:
            continue
        g = c.group
        ci = f" ({c.interval.text})" if c.interval else ""
        speed = fmt(c.speedup, 2, "×", unknown="speedup n/a")
        room = group_phrase([a.headroom for a in g.analyses]) if g.kind == "gpu" else ""
        line = (
            f"{g.name}: {speed} the baseline's {RATE_UNIT[c.in_steps]}{ci}; "
            + _own_workload_text(ctx.own_baselines.get(g.run_ids))
            + (f"{room}; " if room else "")
            + mt.money_phrase(g, ctx.settings.prices)
        )
        if g.kind == "gpu":
            line += "; " + mt.break_even_text(c, ctx)
        line += mt.attribution_note(g) + mt.energy_checks_note(g)
        lines.append(line + validity.comparison_suffix(c, ctx) + ".")
    if len(lines) == 1:
        lines.append(
            "Only one configuration: add a GPU run (or a CPU baseline) of the same workload to compare."
        )
    return lines + validity.left_out_lines(ctx)


def _own_workload_text(own: cmp.Comparison | None) -> str:
    """'like for like, 66.24× the examples/s of cpu-std, its workload's CPU run (range …); ', or ''."""
    if own is None or own.speedup is None or own.baseline is None:
        return ""
    ci = f" ({own.interval.text})" if own.interval else ""
    return (f"like for like, {own.speedup:.2f}× the {RATE_UNIT[own.in_steps]} of "
            f"{', '.join(own.baseline.run_ids)}, its workload's CPU run{ci}; ")  # fmt: skip


def to_json(report: Report) -> dict:
    """The JSON output (docs/sizing.md; docs/sizing.schema.json)."""
    found = report_json(report.context, report.generated_utc, list(report.headline),
                        {s.key: s.data for s in report.sections}, dict(report.definitions),
                        list(report.warnings))  # fmt: skip
    return {**found, "decision": decision_json(report.decision)}
