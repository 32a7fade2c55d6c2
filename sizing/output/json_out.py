"""The report as JSON for tools (docs/sizing.md, docs/sizing.schema.json): numbers are numbers with units
in the key names, unknown is null beside a reason, timestamps ISO 8601, never a negative J, W or $."""

from __future__ import annotations

import math

from sizing.analysis import validity
from sizing.analysis.compare import Comparison
from sizing.analysis.gpu_state import state_json
from sizing.analysis.headroom import headroom_json
from sizing.analysis.run import RunAnalysis
from sizing.analysis.stats import Spread
from sizing.context import ReportContext

SCHEMA_VERSION = 2


def spread_json(s: Spread) -> dict:
    return {"mean": s.mean, "std": s.std, "min": s.minimum, "max": s.maximum, "n": s.count}


def _number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def run_json(a: RunAnalysis) -> dict:
    steady = a.steady_energy
    covering = steady or a.training_energy
    chosen = [s for _, s in steady.gpus if s is not None] + ([steady.cpu] if steady and steady.cpu else []) \
        if steady else []  # fmt: skip
    price = a.hardware_price
    return {
        "run_id": a.run_id,
        "label": a.label,
        "device": a.kind,
        "workload": a.workload,
        "hardware": a.hardware,
        "throughput_source": a.throughput.source,
        "examples_per_s": a.throughput.examples_per_s,
        "steps_per_s": a.throughput.steps_per_s,
        "energy_j_per_1k_examples": a.j_per_1k_examples,
        "energy_j_per_1k_steps": a.j_per_1k_steps,
        "energy_is_estimate": a.energy_is_estimate,
        "energy_covers": covering.covers if covering else "not measured (no telemetry in the window)",
        "energy_complete": bool(steady and steady.total_j is not None and not steady.is_partial),
        "energy_not_measured_reason": (steady.missing or None) if steady else "no telemetry",
        "energy_coverage": min((s.coverage for s in chosen), default=None),
        "energy_resets": sum(s.resets for s in chosen),
        "charged_gpus": list(a.charged_gpus),
        "gpu_attribution": a.gpu_attribution,
        "gpu_attribution_known": a.gpu_attribution_known,
        "energy_usd_per_1k_examples": a.energy_usd_per_1k_examples,
        "hardware_price_usd": price.usd,
        "hardware_not_priced": list(price.unpriced),
        "hardware_usd_per_1k_examples": a.hardware_usd_per_1k_examples,
        "total_usd_per_1k_examples": a.total_usd_per_1k_examples,
        "verdict": a.verdict.primary,
        "verdict_labels": list(a.verdict.labels),
        "gpu_state": state_json(a.gpu_state),
        "headroom": headroom_json(a.headroom),
    }


def comparison_json(c: Comparison, run_id: str, baseline_ids: list[str] | None) -> dict:
    even = c.break_even
    return {
        "run_id": run_id,
        "group": list(c.group.run_ids),
        "baseline": baseline_ids,
        "like_for_like": c.like_for_like,
        "differences": list(c.differences),
        "speedup": c.speedup,
        "speedup_ci95": list(c.speedup_ci95) if c.speedup_ci95 else None,
        **break_even_json(c),
        "break_even_investment_usd": max(even.investment_usd, 0.0)
        if even and even.investment_usd is not None
        else None,
    }


def break_even_json(c: Comparison) -> dict:
    even = c.break_even
    if even is None:
        reason = "baseline" if c.is_baseline else f"not computed for a {c.group.kind.upper()} configuration"
        return {"break_even_hours": None, "break_even_reason": reason, "break_even_hours_beyond_life": None,
                "break_even_is_estimate": False}  # fmt: skip
    return {
        "break_even_hours": _number(even.hours),
        "break_even_reason": even.reason,
        "break_even_hours_beyond_life": _number(even.hours_beyond_life),
        "break_even_is_estimate": even.is_estimate,
    }


def report_json(
    ctx: ReportContext, generated_utc: str, headline: list[str], sections: dict, definitions: dict,
    warnings: list[str],
) -> dict:  # fmt: skip
    base = ctx.baseline
    baseline_ids = list(base.run_ids) if base else None
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_utc": generated_utc,
        "headline": headline,
        "baseline": {"run_ids": list(base.run_ids), "name": base.name} if base else None,
        "runs": [{**run_json(a), **validity.run_json_fields(a, ctx)} for a in ctx.analyses],
        "comparisons": [
            {**comparison_json(c, run_id, baseline_ids), **validity.comparison_json_fields(c, ctx)}
            for c in ctx.comparisons
            if not c.is_baseline
            for run_id in c.group.run_ids
        ],
        "sections": sections,
        "definitions": definitions,
        "warnings": warnings,
    }
