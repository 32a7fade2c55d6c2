"""Serving: what the trained model costs to run, from each run's inference.json and telemetry.csv.

Pure functions over run directories (they only read). Per runtime × batch size: images/s, p99 ms per
image, J per 1,000 images (NVML / RAPL counters over the cell's own window, else an estimate marked
ESTIMATE, else "not measured"), $ per million images when prices are given, and how many CPU cores one
GPU replaces for this model. Definitions: docs/sizing.md, "Serving".
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

INFERENCE_JSON = "inference.json"
TELEMETRY_CSV = "telemetry.csv"
RUN_JSON = "run.json"
JOULES_PER_KWH = 3.6e6
SECONDS_PER_YEAR = 365.25 * 24 * 3600
NO_PRICE = "no price given"
_GPU_ENERGY = re.compile(r"^gpu(\d+)_energy_j$")
_GPU_POWER = re.compile(r"^gpu(\d+)_power_w$")
_GPU_INSTANT_POWER = re.compile(r"^gpu(\d+)_power_instant_w$")


@dataclass(frozen=True)
class ServingPrices:
    tariff_per_kwh: float | None = None
    gpu_price: float | None = None  # USD, the GPU(s)
    cpu_price: float | None = None  # USD, the host (counted for GPU runs too: the GPU needs one)
    amortise_years: float = 3.0
    cpu_tdp_w: float | None = None  # for an estimate of CPU energy where RAPL is unreadable


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
    energy_method: str  # "NVML + RAPL", "ESTIMATE: ...", or "not measured: ..."
    usd_per_million_images: float | None
    cost_note: str
    cpu_cores_used: float | None  # mean of the process tree's CPU use over the cell, in cores


@dataclass
class ServingSection:
    rows: list[ServingRow] = field(default_factory=list)
    unavailable: list[tuple[str, str, str]] = field(default_factory=list)  # (run id, runtime, reason)
    cpu_cores_replaced: float | None = None
    cpu_cores_note: str = "not measured: needs a CPU run and a GPU run with inference.json"
    warnings: list[str] = field(default_factory=list)


def serving_section(run_dirs: list[Path], prices: ServingPrices | None = None) -> ServingSection:
    """Every measured runtime × batch size of every run, and the CPU cores one GPU replaces."""
    prices = prices or ServingPrices()
    section = ServingSection()
    for run_dir in run_dirs:
        run_dir = Path(run_dir)
        summary = read_json_or_none(run_dir / INFERENCE_JSON)
        if summary is None:
            section.warnings.append(f"{run_dir.name}: no inference.json (the run skipped or lost it)")
            continue
        rows, unavailable = run_rows(run_dir, summary, prices)
        section.rows += rows
        section.unavailable += unavailable
    section.cpu_cores_replaced, section.cpu_cores_note = cpu_cores_replaced(section.rows)
    return section


def run_rows(
    run_dir: Path, summary: dict, prices: ServingPrices
) -> tuple[list[ServingRow], list[tuple[str, str, str]]]:
    device = str(summary.get("device") or "cpu")
    telemetry = read_telemetry(run_dir / TELEMETRY_CSV)
    rows, unavailable = [], []
    for entry in summary.get("runtimes", []):
        if not entry.get("available"):
            unavailable.append(
                (run_dir.name, entry.get("runtime", "?"), entry.get("reason", "no reason given"))
            )
            continue
        for cell in entry.get("cells", []):
            if not _number(cell.get("images_per_s")):
                reason = cell.get("error", "no measured call")
                unavailable.append(
                    (run_dir.name, f"{entry['runtime']} batch {cell.get('batch_size')}", reason)
                )
                continue
            rows.append(_row(run_dir.name, device, entry["runtime"], cell, telemetry, prices))
    return rows, unavailable


def _row(
    run_id: str, device: str, runtime: str, cell: dict, telemetry: dict, prices: ServingPrices
) -> ServingRow:
    start, end = float(cell["start_unix"]), float(cell["end_unix"])
    joules, method = cell_energy_j(telemetry, start, end, device, prices.cpu_tdp_w)
    j_per_1000 = joules / cell["images"] * 1000.0 if joules is not None and cell.get("images") else None
    cost, note = usd_per_million_images(j_per_1000, cell["images_per_s"], device, prices)
    return ServingRow(
        run_id=run_id,
        device=device,
        runtime=runtime,
        batch_size=int(cell["batch_size"]),
        images_per_s=float(cell["images_per_s"]),
        latency_ms_p99=float(cell["latency_ms_p99"]),
        ms_per_image_p99=float(cell["ms_per_image_p99"]),
        joules_per_1000_images=j_per_1000,
        energy_method=method,
        usd_per_million_images=cost,
        cost_note=note,
        cpu_cores_used=mean_in_window(telemetry, "proc_cpu_pct", start, end, scale=0.01),
    )


def cell_energy_j(
    telemetry: dict, start: float, end: float, device: str, cpu_tdp_w: float | None
) -> tuple[float | None, str]:
    """GPU energy (GPU runs: NVML counter, else integrated power) plus CPU energy (RAPL, else TDP × util)."""
    parts: list[tuple[float, str]] = []
    if device == "gpu":
        gpu = _gpu_energy_j(telemetry, start, end)
        if gpu is None:
            return None, "not measured: no GPU energy or power in telemetry.csv over the cell"
        parts.append(gpu)
    rapl = counter_advance(telemetry.get("time_unix"), telemetry.get("cpu_energy_j"), start, end)
    if rapl is not None:
        parts.append((rapl, "RAPL"))
    elif cpu_tdp_w is not None and telemetry.get("cpu_util_pct") is not None:
        power = [cpu_tdp_w * u / 100.0 for u in telemetry["cpu_util_pct"]]
        joules = integrated(telemetry["time_unix"], power, start, end)
        if joules is None:
            return None, "not measured: too few telemetry rows over the cell"
        parts.append((joules, f"ESTIMATE: {cpu_tdp_w:g} W CPU TDP × CPU util"))
    else:
        what = "GPU only; " if parts else ""
        return None, f"not measured: {what}no RAPL in telemetry.csv (give a CPU TDP for an estimate)"
    return sum(j for j, _ in parts), " + ".join(m for _, m in parts)


def _gpu_energy_j(telemetry: dict, start: float, end: float) -> tuple[float, str] | None:
    times = telemetry.get("time_unix")
    counters = [c for name, c in telemetry.items() if _GPU_ENERGY.match(name)]
    joules = [counter_advance(times, c, start, end) for c in counters]
    if counters and all(j is not None for j in joules):
        return sum(joules), "NVML energy"
    instant = [p for name, p in telemetry.items() if _GPU_INSTANT_POWER.match(name)]
    average = [p for name, p in telemetry.items() if _GPU_POWER.match(name)]
    for powers, what in ((instant, "NVML instant power integrated"), (average, "NVML power integrated")):
        joules = [integrated(times, p, start, end) for p in powers]
        if powers and all(j is not None for j in joules):
            inside = sorted(t for t in times if start <= t <= end)
            gaps = sorted(b - a for a, b in itertools.pairwise(inside))
            spacing = gaps[len(gaps) // 2] if gaps else None
            if spacing is not None and spacing >= 1.0:  # NVML samples power only part of the time
                what = f"ESTIMATE: {what} from readings {spacing:.3g} s apart"
            return sum(joules), what
    return None


def usd_per_million_images(
    j_per_1000: float | None, images_per_s: float, device: str, prices: ServingPrices
) -> tuple[float | None, str]:
    """Energy at the tariff plus the hardware amortised over its years of round-the-clock use."""
    hardware_price = (prices.cpu_price or 0.0) + ((prices.gpu_price or 0.0) if device == "gpu" else 0.0)
    parts, notes = [], []
    if prices.tariff_per_kwh is not None:
        if j_per_1000 is not None:
            parts.append(j_per_1000 * 1000.0 / JOULES_PER_KWH * prices.tariff_per_kwh)
            notes.append(f"energy at ${prices.tariff_per_kwh:g}/kWh")
        else:
            notes.append("energy not measured")
    if hardware_price > 0 and images_per_s > 0 and prices.amortise_years > 0:
        seconds = 1e6 / images_per_s
        parts.append(hardware_price / (prices.amortise_years * SECONDS_PER_YEAR) * seconds)
        notes.append(f"${hardware_price:,.0f} hardware over {prices.amortise_years:g} years")
    if not parts:
        return None, NO_PRICE if not notes else "; ".join(notes)
    return sum(parts), " + ".join(notes)


def cpu_cores_replaced(rows: list[ServingRow]) -> tuple[float | None, str]:
    """Best GPU images/s ÷ best CPU images/s per core used (cores from the process's CPU use)."""
    gpu = [r for r in rows if r.device == "gpu"]
    cpu = [r for r in rows if r.device == "cpu"]
    if not gpu or not cpu:
        return None, "not measured: needs a CPU run and a GPU run with inference.json"
    best_gpu = max(gpu, key=lambda r: r.images_per_s)
    per_core = [
        (r.images_per_s / r.cpu_cores_used, r) for r in cpu if r.cpu_cores_used and r.cpu_cores_used > 0
    ]
    if not per_core:
        return None, "not measured: the CPU run's telemetry has no proc_cpu_pct over its inference"
    rate, best_cpu = max(per_core, key=lambda pair: pair[0])
    cores = best_gpu.images_per_s / rate
    return cores, (
        f"{best_gpu.runtime} batch {best_gpu.batch_size} on the GPU ({best_gpu.images_per_s:.1f} images/s) ÷ "
        f"{best_cpu.runtime} batch {best_cpu.batch_size} on the CPU ({rate:.2f} images/s per core used)"
    )


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
        cost = f"${r.usd_per_million_images:,.2f}" if r.usd_per_million_images is not None else r.cost_note
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


# --- reading ---------------------------------------------------------------------------------------


def read_json_or_none(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_telemetry(path: Path) -> dict[str, list[float]]:
    """Columns of telemetry.csv as floats (nan for an empty or unparseable cell); {} if absent."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except OSError:
        return {}
    if not rows:
        return {}
    return {name: [_float(row.get(name)) for row in rows] for name in rows[0] if name}


def counter_advance(
    times: list[float] | None, counter: list[float] | None, start: float, end: float
) -> float | None:
    """How far a cumulative counter advanced over [start, end], interpolated linearly between rows."""
    if times is None or counter is None:
        return None
    points = [(t, c) for t, c in zip(times, counter, strict=False) if math.isfinite(t) and math.isfinite(c)]
    if len(points) < 2:
        return None
    start, end = max(start, points[0][0]), min(end, points[-1][0])
    if end <= start:
        return None
    return _interp(points, end) - _interp(points, start)


def integrated(
    times: list[float] | None, power_w: list[float] | None, start: float, end: float
) -> float | None:
    """Trapezoidal integral of a power column over [start, end]."""
    if times is None or power_w is None:
        return None
    points = [(t, p) for t, p in zip(times, power_w, strict=False) if math.isfinite(t) and math.isfinite(p)]
    if len(points) < 2:
        return None
    cumulative, total = [points[0][0]], [0.0]
    for (t0, p0), (t1, p1) in itertools.pairwise(points):
        cumulative.append(t1)
        total.append(total[-1] + (t1 - t0) * (p0 + p1) / 2)
    return counter_advance(cumulative, total, start, end)


def mean_in_window(
    telemetry: dict, column: str, start: float, end: float, scale: float = 1.0
) -> float | None:
    """Mean of a column over the rows in [start, end], widened to the nearest row either side."""
    times, values = telemetry.get("time_unix"), telemetry.get(column)
    if times is None or values is None:
        return None
    picked = [v for t, v in zip(times, values, strict=False) if start <= t <= end and math.isfinite(v)]
    if not picked:  # a cell shorter than the sampling interval: the first row after it covers it
        after = [v for t, v in zip(times, values, strict=False) if t > end and math.isfinite(v)]
        picked = after[:1]
    return sum(picked) / len(picked) * scale if picked else None


def _interp(points: list[tuple[float, float]], at: float) -> float:
    for (t0, c0), (t1, c1) in itertools.pairwise(points):
        if t0 <= at <= t1:
            return c0 if t1 == t0 else c0 + (c1 - c0) * (at - t0) / (t1 - t0)
    return points[-1][1]


def _float(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0
