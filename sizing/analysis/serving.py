"""Serving: what the trained model costs to run, from each run's inference.json (RunData.inference, checked
with the run's other files) and its loaded telemetry.

Pure functions over RunData (sizing.analysis.load), under the same model as training: the same GPU
attribution (sizing.analysis.run.charged_gpu_columns, charged_that_worked), the same energy sources with
coverage and the TDP estimate with its idle floor (analysis.energy), the same prices, life and utilisation
(analysis.money). Per runtime × batch size: images/s, p99 ms per image, J per 1,000 images over the cell's
own window, $ per million images, and how many CPU cores one GPU replaces for this model, from like-for-like
runs only unless none is.
Definitions: docs/sizing.md, "Serving".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from runformat import INFERENCE_JSON
from runformat.records import CellRecord, InferenceRecord, as_record
from sizing.analysis import money, signature
from sizing.analysis.energy import energy_in, energy_usd
from sizing.analysis.gpu_state import gpu_state_of
from sizing.analysis.run import charged_gpu_columns, charged_that_worked
from sizing.model import Prices, RunData, number, samples_in
from sizing.text import NO_PRICE, NOT_MEASURED, fmt_usd


@dataclass(frozen=True)
class ServingRow:
    run_id: str
    device: str
    runtime: str
    batch_size: int
    images_per_s: float
    latency_ms_p99: float
    ms_per_image_p99: float
    joules_per_1000_images: float | None
    energy_method: str  # what the energy covers, "… (ESTIMATE …)", or "not measured (why)"
    energy_is_estimate: bool
    usd_per_million_images: float | None
    cost_note: str
    cpu_cores_used: float | None  # mean of the process tree's CPU use over the cell, in cores


@dataclass
class ServingSection:
    rows: list[ServingRow] = field(default_factory=list)
    unavailable: list[tuple[str, str, str]] = field(default_factory=list)  # (run id, runtime, reason)
    cpu_cores_replaced: float | None = None
    cpu_cores_note: str = (
        "not measured: needs an inference cell measured on a CPU and one on a GPU (inference.json)"
    )
    warnings: list[str] = field(default_factory=list)
    workloads: dict[str, dict] = field(default_factory=dict)  # run id → training workload signature


def serving_section(runs: Sequence[RunData], prices: Prices | None = None) -> ServingSection:
    """Every measured runtime × batch size of every run, and the CPU cores one GPU replaces."""
    prices = prices or Prices()
    section = ServingSection()
    for run in runs:
        if run.inference is None:
            section.warnings.append(f"{run.run_id}: no {INFERENCE_JSON} (the run skipped or lost it)")
            continue
        rows, unavailable = run_rows(run, as_record(InferenceRecord, run.inference), prices)
        section.rows += rows
        section.unavailable += unavailable
        section.workloads[run.run_id] = signature.workload(run.training_info)
    section.cpu_cores_replaced, section.cpu_cores_note = cpu_cores_replaced(section.rows, section.workloads)
    return section


def run_rows(
    run: RunData, summary: InferenceRecord, prices: Prices
) -> tuple[list[ServingRow], list[tuple[str, str, str]]]:
    device = "gpu" if (summary.device or "cpu").lower().startswith(("gpu", "cuda")) else "cpu"
    rows, unavailable = [], []
    for entry in summary.runtimes or ():
        name = entry.runtime or "?"
        if not entry.available:
            unavailable.append((run.run_id, name, entry.reason or "no reason given"))
            continue
        for cell in entry.cells or ():
            if not _positive(cell.images_per_s) or cell.start_unix is None or cell.end_unix is None:
                reason = cell.error or "no measured call"
                unavailable.append((run.run_id, f"{name} batch {cell.batch_size}", reason))
                continue
            rows.append(_row(run, device, name, cell, prices))
    return rows, unavailable


def _row(run: RunData, device: str, runtime: str, cell: CellRecord, prices: Prices) -> ServingRow:
    """The row of a measured cell: run_rows has checked its images/s and window."""
    start, end = float(cell.start_unix), float(cell.end_unix)
    charged = charged_that_worked(charged_gpu_columns(run, device), samples_in(run.telemetry, (start, end)))
    gpus, attribution, attribution_known, _ = charged
    named = None if attribution_known else gpus
    hardware = signature.hardware(run.meta, run.training_info, device, charged=named)
    tdp = prices.tdp_for(str(hardware.get("host") or ""), str(hardware.get("cpu_model") or ""))
    energy = energy_in(run.telemetry, (start, end), gpus, tdp, prices.idle_fraction, device == "gpu",
                       number(run.meta.get("interval_s")))  # fmt: skip
    if energy is not None and (unattributed := gpu_state_of(run, device, gpus).not_attributable):
        energy = replace(energy, not_attributable=unattributed)  # a shared GPU or a MIG slice
    images = cell.images
    joules = energy.total_j if energy is not None else None
    j_per_1000 = joules / images * 1000.0 if joules is not None and images else None
    method = energy.covers if energy is not None else f"{NOT_MEASURED} (no telemetry over the cell)"
    if not attribution_known:
        method += f" — charged for {attribution.split(' (')[0]}: the run does not say which GPUs it used"
    images_per_s = float(cell.images_per_s)
    cost, note = usd_per_million_images(
        j_per_1000, images_per_s, money.hardware_price(device, hardware, prices), prices
    )
    window = samples_in(run.telemetry, (start, end))
    if window.empty:  # a cell shorter than the sampling interval: the first row after it covers it
        later = run.telemetry[run.telemetry["time_unix"] > end] if "time_unix" in run.telemetry else window
        window = later.head(1)
    cores = window["proc_cpu_pct"].mean() / 100.0 if "proc_cpu_pct" in window and not window.empty else None
    return ServingRow(
        run_id=run.run_id,
        device=device,
        runtime=runtime,
        batch_size=cell.batch_size or 0,
        images_per_s=images_per_s,
        latency_ms_p99=cell.latency_ms_p99 or math.nan,
        ms_per_image_p99=cell.ms_per_image_p99 or math.nan,
        joules_per_1000_images=j_per_1000,
        energy_method=method,
        energy_is_estimate=bool(energy and energy.is_estimate and joules is not None),
        usd_per_million_images=cost,
        cost_note=note,
        cpu_cores_used=float(cores) if cores is not None and math.isfinite(cores) else None,
    )


def usd_per_million_images(
    j_per_1000: float | None, images_per_s: float, price: money.HardwarePrice, prices: Prices
) -> tuple[float | None, str]:
    """Energy at the tariff plus the hardware over its working hours; a total only when both are known."""
    energy = energy_usd(j_per_1000, prices)
    energy = energy * 1000.0 if energy is not None else None
    hardware = money.hardware_usd_per_1000(price.usd, images_per_s, prices)
    hardware = hardware * 1000.0 if hardware is not None else None
    life = f"over a {prices.amortise_years:g}-year life at {prices.utilisation:.0%} use"
    if energy is not None and hardware is not None:
        return (
            energy + hardware,
            f"energy at ${prices.tariff_per_kwh:g}/kWh + ${price.usd:,.0f} hardware {life}",
        )
    if energy is not None:
        return energy, f"energy only ({price.missing or NO_PRICE})"
    if hardware is not None:
        return hardware, f"hardware only ({life}; energy {NOT_MEASURED})"
    return (
        None,
        NO_PRICE if prices.tariff_per_kwh is None else f"energy {NOT_MEASURED}, hardware: {price.missing}",
    )


def cost_cell(r: ServingRow) -> str:
    """'$0.05, energy only (hardware: no price given)': a partial figure says so in its own cell."""
    if r.usd_per_million_images is None:
        return r.cost_note or NO_PRICE
    cost = fmt_usd(r.usd_per_million_images)
    partial = r.cost_note and r.cost_note.startswith(("energy only", "hardware only"))
    return f"{cost}, {r.cost_note}" if partial else cost


def cpu_cores_replaced(rows: list[ServingRow], workloads: dict[str, dict]) -> tuple[float | None, str]:
    """Best GPU images/s ÷ best CPU images/s per core used (cores from the process's CPU use), over the
    like-for-like GPU/CPU pairs (same training workload); without one, over all, marked NOT like-for-like."""
    gpu = [r for r in rows if r.device == "gpu"]
    cpu = [r for r in rows if r.device == "cpu" and r.cpu_cores_used and r.cpu_cores_used > 0]
    if not gpu or not [r for r in rows if r.device == "cpu"]:
        return (
            None,
            "not measured: needs an inference cell measured on a CPU and one on a GPU (inference.json)",
        )
    if not cpu:
        return None, "not measured: the CPU run's telemetry has no proc_cpu_pct over its inference"
    pairs = [(g, c) for g in gpu for c in cpu]
    alike = [(g, c) for g, c in pairs if not _differences(workloads, g.run_id, c.run_id)]
    chosen = alike or pairs
    best_gpu = max((g for g, _ in chosen), key=lambda r: r.images_per_s)
    best_cpu = max((c for g, c in chosen if g.run_id == best_gpu.run_id), key=_per_core)
    rate = best_cpu.images_per_s / (best_cpu.cpu_cores_used or 1.0)
    note = (
        f"{best_gpu.runtime} batch {best_gpu.batch_size} on the GPU ({best_gpu.images_per_s:.1f} images/s) ÷ "
        f"{best_cpu.runtime} batch {best_cpu.batch_size} on the CPU ({rate:.2f} images/s per core used)"
    )
    if not alike:
        differ = "; ".join(_differences(workloads, best_gpu.run_id, best_cpu.run_id))
        note = f"NOT like-for-like ({differ}): {note}"
    return best_gpu.images_per_s / rate, note


def _per_core(row: ServingRow) -> float:
    return row.images_per_s / (row.cpu_cores_used or 1.0)


def _differences(workloads: dict[str, dict], a: str, b: str) -> list[str]:
    return signature.differences(workloads.get(a, {}), workloads.get(b, {}))


def markdown(section: ServingSection) -> str:
    """The section as Markdown: one table row per run × runtime × batch size, then the verdict."""
    lines = [
        "| run | device | runtime | batch | images/s | p99 ms/image | J per 1,000 images "
        "| $ per million images |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in section.rows:
        energy = (
            f"{r.joules_per_1000_images:,.0f} ({r.energy_method})"
            if r.joules_per_1000_images is not None
            else r.energy_method
        )
        cost = cost_cell(r)
        lines.append(
            f"| {r.run_id} | {r.device} | {r.runtime} | {r.batch_size} | {r.images_per_s:.2f} | "
            f"{r.ms_per_image_p99:.1f} | {energy} | {cost} |"
        )
    for run_id, runtime, reason in section.unavailable:
        lines.append(f"| {run_id} | | {runtime} | | n/a | n/a | cannot take this model: {reason} | |")
    cores = f"{section.cpu_cores_replaced:.1f}" if section.cpu_cores_replaced is not None else "n/a"
    lines += ["", f"CPU cores one GPU replaces for this model: {cores} ({section.cpu_cores_note})"]
    lines += [f"- {w}" for w in section.warnings]
    return "\n".join(lines)


def _positive(value: object) -> bool:
    return (found := number(value)) is not None and found > 0
