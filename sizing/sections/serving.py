"""The serving section: the trained model's inference per run × runtime × batch size (analysis.serving)."""

from __future__ import annotations

from sizing.analysis.serving import ServingSection, cost_cell, serving_section
from sizing.context import ReportContext
from sizing.model import Section, Table

HEADERS = ("Run", "Device", "Runtime", "Batch", "Images/s", "p99 ms/image", "J per 1,000 images",
           "$ per million images")  # fmt: skip


def serving_report_section(ctx: ReportContext) -> Section:
    section = serving_section(ctx.runs, ctx.settings.prices)
    rows = [*(_row(r) for r in section.rows), *_unavailable_rows(section)]
    if not rows:
        note = "No run in the report has inference results (inference.json): serving not measured."
    else:
        cores = f"{section.cpu_cores_replaced:.1f}" if section.cpu_cores_replaced is not None else "n/a"
        note = f"CPU cores one GPU replaces for this model: {cores} ({section.cpu_cores_note})."
    data = {
        "rows": [dict(r.__dict__) for r in section.rows],
        "unavailable": [{"run_id": a, "runtime": b, "reason": c} for a, b, c in section.unavailable],
        "cpu_cores_replaced": section.cpu_cores_replaced,
        "cpu_cores_note": section.cpu_cores_note,
    }
    table = Table("Serving (inference of the trained model)", HEADERS, tuple(rows), note)
    return Section("serving", "Serving", data, (table,))


def _row(r) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    energy = (
        f"{r.joules_per_1000_images:,.0f} ({r.energy_method})"
        if r.joules_per_1000_images is not None
        else r.energy_method
    )
    cost = cost_cell(r)
    return (r.run_id, r.device, r.runtime, str(r.batch_size), f"{r.images_per_s:.2f}",
            f"{r.ms_per_image_p99:.1f}", energy, cost)  # fmt: skip


def _unavailable_rows(section: ServingSection) -> list[tuple[str, ...]]:
    return [
        (run_id, "", runtime, "", "n/a", "n/a", f"cannot take this model: {reason}", "n/a")
        for run_id, runtime, reason in section.unavailable
    ]
