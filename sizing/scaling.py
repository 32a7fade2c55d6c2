"""The scaling verdict: how throughput, energy and cost move with the number of devices of one workload.

Runs line up in a scaling series when everything but the device count matches: the workload signature
with the per-device batch instead of the global one, the device kind, the host (CPU model, logical CPUs,
memory) and the GPU model. The count is training.json `world_size` (1 when absent). Per count, over its
repeats: mean examples/s; scaling efficiency = examples/s(N) / (N × examples/s(1)); J and $ per 1,000
examples; the marginal $ per 1,000 extra examples the step from the previous count buys; and that
step's payback (its extra hardware price / what an hour of it saves: the time it saves at
--value-per-hour plus the energy it saves). Pure functions of the analyses and the runs' files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sizing import money
from sizing.analysis import RunAnalysis
from sizing.model import Prices, RunData, number
from sizing.stats import spread

UNIT_FIELDS = ("framework", "preset", "backbone", "image_size", "precision", "dataset")


@dataclass(frozen=True)
class ScalingPoint:
    count: int
    run_ids: tuple[str, ...]
    examples_per_s: float | None
    efficiency: float | None  # None without a 1-device run in the series
    j_per_1k_examples: float | None
    energy_usd_per_1k: float | None
    hardware_usd_per_1k: float | None  # host + the GPUs used (sizing.money), over the life's working hours
    total_usd_per_1k: float | None
    marginal_usd_per_1k: float | None  # of the examples this count adds over the previous one; inf: none
    payback_hours: float | None  # of the step from the previous count; 0: costs nothing extra; inf: never
    pays_back: bool | None  # within the hardware's working hours (life × utilisation); None: cannot tell


@dataclass(frozen=True)
class ScalingSeries:
    name: str
    kind: str
    devices: str  # "GPUs" or "processes"
    per_device_batch: int | None
    sweep_ids: tuple[str, ...]
    points: tuple[ScalingPoint, ...]
    largest_paying_count: int | None  # None: cannot tell (a price or value missing)


def device_count(run: RunData) -> int:
    size = number(run.training_info.get("world_size"))
    if size is None:
        size = number((run.meta.get("sweep") or {}).get("count"))
    return int(size) if size and size >= 1 else 1


def per_device_batch(run: RunData, analysis: RunAnalysis) -> int | None:
    batch = number(run.training_info.get("per_device_batch_size"))
    if batch is None:  # a run from before data parallelism: its batch was the one device's
        batch = analysis.workload.get("batch_size")
    return int(batch) if batch is not None else None


def series_key(run: RunData, analysis: RunAnalysis) -> tuple:
    hw = analysis.hardware
    gpu_models = tuple(sorted(set(hw.get("gpus") or [])))
    unit = tuple(analysis.workload.get(f) for f in UNIT_FIELDS)
    host = (hw.get("host"), hw.get("cpu_model"), hw.get("cpu_cores_logical"), hw.get("mem_gib"))
    nodes = len(hw.get("node_hardware") or [None])  # a multi-node job (sizing.jobs) scales apart
    settings = hw.get("gpu_settings")  # a power cap, held clocks, MIG, sharing (sizing.gpu_state)
    return (*unit, per_device_batch(run, analysis), analysis.kind, *host, gpu_models, settings, nodes)


def scaling_series(
    runs: Sequence[RunData], analyses: Sequence[RunAnalysis], prices: Prices
) -> list[ScalingSeries]:
    """Every series with at least two device counts, in first-seen order."""
    grouped: dict[tuple, list[tuple[RunData, RunAnalysis]]] = {}
    for run, analysis in zip(runs, analyses, strict=True):
        grouped.setdefault(series_key(run, analysis), []).append((run, analysis))
    found = []
    for members in grouped.values():
        counts = sorted({device_count(run) for run, _ in members})
        if len(counts) >= 2:
            found.append(_series(members, counts, prices))
    return found


def unmatched_counts(runs: Sequence[RunData], analyses: Sequence[RunAnalysis]) -> list[str]:
    """Runs of several devices that no series took: what differs keeps them apart (one line each)."""
    keys = {}
    for run, analysis in zip(runs, analyses, strict=True):
        keys.setdefault(series_key(run, analysis), set()).add(device_count(run))
    lines = []
    for run, analysis in zip(runs, analyses, strict=True):
        if device_count(run) > 1 and len(keys[series_key(run, analysis)]) < 2:
            lines.append(
                f"{run.run_id} ({device_count(run)} devices, per-device batch "
                f"{per_device_batch(run, analysis)}): no run of another count with the same per-device "
                "batch, workload and host to scale against"
            )
    return lines


def _series(members: list[tuple[RunData, RunAnalysis]], counts: list[int], prices: Prices) -> ScalingSeries:
    first_run, first = members[0]
    kind = first.kind
    by_count = {count: [(r, a) for r, a in members if device_count(r) == count] for count in counts}
    base = _mean(a.throughput.examples_per_s for _, a in by_count.get(1, []))
    points: list[ScalingPoint] = []
    price_usd: dict[int, float | None] = {}
    for count in counts:
        group = [a for _, a in by_count[count]]
        rate = _mean(a.throughput.examples_per_s for a in group)
        energy_usd = _mean(a.energy_usd_per_1k_examples for a in group)
        price_usd[count] = _devices_price(group)
        hardware_usd = _mean(a.hardware_usd_per_1k_examples for a in group)
        total = None if energy_usd is None or hardware_usd is None else energy_usd + hardware_usd
        previous = points[-1] if points else None
        extra_price = None
        if previous is not None and price_usd[count] is not None and price_usd[previous.count] is not None:
            extra_price = max(price_usd[count] - price_usd[previous.count], 0.0)
        payback = _payback_hours(previous, rate, energy_usd, extra_price, prices)
        points.append(
            ScalingPoint(
                count=count,
                run_ids=tuple(a.run_id for a in group),
                examples_per_s=rate,
                efficiency=rate / (count * base) if rate is not None and base else None,
                j_per_1k_examples=_mean(a.j_per_1k_examples for a in group),
                energy_usd_per_1k=energy_usd,
                hardware_usd_per_1k=hardware_usd,
                total_usd_per_1k=total,
                marginal_usd_per_1k=_marginal(previous, rate, total),
                payback_hours=payback,
                pays_back=None if payback is None else payback <= money.life_hours(prices),
            )
        )
    sweeps = {str((r.meta.get("sweep") or {}).get("id")) for r, _ in members if r.meta.get("sweep")}
    return ScalingSeries(
        name=_series_name(first, per_device_batch(first_run, first)),
        kind=kind,
        devices="GPUs" if kind == "gpu" else "processes",
        per_device_batch=per_device_batch(first_run, first),
        sweep_ids=tuple(sorted(sweeps)),
        points=tuple(points),
        largest_paying_count=_largest_paying(points),
    )


def _series_name(analysis: RunAnalysis, batch: int | None) -> str:
    wl = analysis.workload
    parts = [wl.get("framework"), wl.get("preset"), f"{wl.get('image_size')}px", wl.get("precision")]
    gpus = analysis.hardware.get("gpus") or ["GPU"]
    where = analysis.hardware_name if analysis.kind == "cpu" else gpus[0]
    return f"{where} · {'/'.join(str(p) for p in parts if p)} · {batch} per device"


def _mean(values) -> float | None:
    return spread(list(values)).mean


def _devices_price(group: list[RunAnalysis]) -> float | None:
    """What a count's devices cost (each GPU used at its model's price, sizing.money; 0 for processes on
    one host, whose price is the same at every count); None unless every GPU is priced."""
    found = {a.hardware_price.gpu_usd for a in group}
    return found.pop() if len(found) == 1 else None


def _hourly_usd(rate: float | None, total_per_1k: float | None) -> float | None:
    return None if rate is None or total_per_1k is None else total_per_1k * rate * 3.6


def _marginal(previous: ScalingPoint | None, rate: float | None, total: float | None) -> float | None:
    """$ per 1,000 of the examples the step from the previous count adds (hourly cost over hourly gain)."""
    if previous is None:
        return None
    before, after = _hourly_usd(previous.examples_per_s, previous.total_usd_per_1k), _hourly_usd(rate, total)
    if before is None or after is None or rate is None or previous.examples_per_s is None:
        return None
    gained = (rate - previous.examples_per_s) * 3.6  # thousands of examples per hour
    return float("inf") if gained <= 0 else (after - before) / gained


def _payback_hours(
    previous: ScalingPoint | None,
    rate: float | None,
    energy_usd: float | None,
    extra_price: float | None,
    prices: Prices,
) -> float | None:
    """Hours of training at this count until the step from the previous count has paid its extra
    hardware (the price difference, sizing.money's prices); None when a price or value is missing."""
    if previous is None or rate is None or previous.examples_per_s is None or extra_price is None:
        return None
    speedup = rate / previous.examples_per_s
    energy_saving = None
    if energy_usd is not None and previous.energy_usd_per_1k is not None:
        energy_saving = rate * 3.6 * (previous.energy_usd_per_1k - energy_usd)
    if prices.value_per_hour is None and energy_saving is None:
        return None if extra_price > 0 else (0.0 if speedup > 1 else float("inf"))
    saving = (speedup - 1.0) * (prices.value_per_hour or 0.0) + (energy_saving or 0.0)
    if saving <= 0:
        return float("inf")
    return extra_price / saving


def _largest_paying(points: list[ScalingPoint]) -> int | None:
    """The largest count reached by steps that each pay back within the hardware's life."""
    largest = points[0].count
    for point in points[1:]:
        if point.pays_back is None:
            return None
        if not point.pays_back:
            break
        largest = point.count
    return largest
