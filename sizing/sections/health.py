"""Report sections about how the hardware fared: thermal, throttling, bottleneck verdict, accuracy.

These render for any run with telemetry, whatever wrote it, with or without a step log.
"""

from __future__ import annotations

from sizing.analysis.headroom import headroom_json, limit_text, mfu_text
from sizing.context import ReportContext
from sizing.model import Section, Table, number
from sizing.text import fmt, fmt_seconds


def thermal_section(ctx: ReportContext) -> Section:
    threshold = ctx.settings.thresholds.temp_threshold_c
    rows = [
        (a.run_id, t.sensor, fmt(t.peak_c, 1), fmt_seconds(t.time_above_s))
        for a in ctx.analyses
        for t in a.thermal
    ]
    data = [
        {"run_id": a.run_id, "sensor": t.sensor, "peak_c": t.peak_c, "time_above_s": t.time_above_s}
        for a in ctx.analyses
        for t in a.thermal
    ]
    note = "" if rows else "No temperature sensor in any run."
    table = Table("Thermal", ("Run", "Sensor", "Peak °C", f"Time ≥ {threshold:g} °C"), tuple(rows), note)
    return Section("thermal", "Thermal", data, (table,))


def throttle_section(ctx: ReportContext) -> Section:
    rows, data = [], []
    for a in ctx.analyses:
        for t in a.throttling:
            fraction = t.fraction
            if t.status != "measured":
                shown = (t.status, "n/a", "n/a", "n/a")
            else:
                percent = fraction * 100 if fraction is not None else None
                shown = (f"{t.flagged_samples}/{t.samples}", fmt(percent, 1, " %"),
                         str(t.events), fmt_seconds(t.flagged_s))  # fmt: skip
            kind = "fault" if t.is_fault else "state"
            why = "; ".join(x for x in (t.basis, t.cause and f"thermal evidence: {t.cause}") if x)
            category = f"{t.category} ({why})" if why else t.category
            rows.append((a.run_id, t.source, category, kind, *shown))
            data.append({"run_id": a.run_id, "source": t.source, "category": t.category,
                         "is_fault": t.is_fault,
                         "status": t.status, "basis": t.basis, "thermal_evidence": t.cause or None,
                         "samples": t.samples,
                         "flagged_samples": t.flagged_samples,
                         "events": t.events, "flagged_s": t.flagged_s})  # fmt: skip
    headers = ("Run", "Source", "Category", "Fault or state", "Samples", "Fraction", "Events", "Time")
    note = "" if rows else "No throttle reasons or CPU frequency readings in any run."
    return Section(
        "throttling", "Throttling", data, (Table("Throttling (training window)", headers, tuple(rows), note),)
    )


def bottleneck_section(ctx: ReportContext) -> Section:
    rows, data = [], []
    for a in ctx.analyses:
        v = a.verdict
        means = ", ".join(
            f"{k.removesuffix('_pct').replace('_', ' ')} {fmt(n, 1)}{' %' if k.endswith('_pct') else ''}"
            for k, n in v.numbers.items()
            if n is not None and " " not in k
        )
        room = a.headroom
        limit = f"{limit_text(room)} ({room.limit_evidence})" if room and room.limit else "n/a (CPU run)"
        rows.append((a.run_id, " + ".join(v.labels), "; ".join(v.evidence), means,
                     mfu_text(room) if room else "n/a", limit))  # fmt: skip
        data.append({"run_id": a.run_id, "verdict": v.primary, "labels": list(v.labels),
                     "evidence": list(v.evidence), "numbers": v.numbers,
                     "headroom": headroom_json(room)})  # fmt: skip
    headers = ("Run", "Verdict", "Why", "Means (measurement window)", "MFU", "Why not at the GPU's limit")
    table = Table("Bottleneck verdict", headers, tuple(rows))
    return Section("bottleneck", "Bottleneck verdict", data, (table,))


def accuracy_section(ctx: ReportContext) -> Section:
    rows = []
    for a in ctx.analyses:
        e = a.evaluation
        rows.append((
            a.run_id, fmt(a.throughput.steps_total, 0), fmt(number(e.get("map_50")), 3),
            fmt(number(e.get("recall_50")), 3), fmt(number(e.get("precision_50")), 3),
            fmt(number(e.get("global_step")), 0), fmt(number(e.get("num_images")), 0),
        ))  # fmt: skip
    note = "" if any(a.evaluation for a in ctx.analyses) else "No eval.json in any run."
    headers = (
        "Run",
        "Steps trained",
        "mAP@0.5",
        "Recall@0.5",
        "Precision@0.5",
        "Evaluated at step",
        "Images",
    )
    data = [{"run_id": a.run_id, **a.evaluation} for a in ctx.analyses if a.evaluation]
    return Section(
        "accuracy", "Accuracy bought", data, (Table("Accuracy bought", headers, tuple(rows), note),)
    )
