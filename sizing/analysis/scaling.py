"""The scaling verdict: how throughput, energy and cost move with the number of devices of one workload.

Runs line up in a scaling series when everything but the device count matches: the workload signature
with the per-device batch instead of the global one, the device kind, the host (CPU model, logical CPUs,
memory) and the GPU model. The count is training.json `world_size` (1 when absent). Per count, over its
repeats: mean examples/s; scaling efficiency = examples/s(N) / (N × examples/s(1)); J and $ per 1,000
examples; the marginal $ per 1,000 extra examples the step from the previous count buys; and that
step's payback (its extra hardware price / what an hour of it saves: the time it saves at
--value-per-hour plus the energy it saves; without a value per hour a bound, or cannot tell:
analysis.money.payback). Incomplete runs are left out unless included, then marked, and a count only they
measured is not judged. Pure functions of the analyses and the runs' files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sizing.analysis import money
from sizing.analysis.run import RunAnalysis
from sizing.analysis.stats import spread
from sizing.analysis.validity import INCLUDE_FLAG
from sizing.model import Prices, RunData, number
from sizing.text import NO_PRICE, fmt_usd

UNIT_FIELDS = ("framework", "preset", "backbone", "image_size", "precision", "dataset")


@dataclass(frozen=True)
class ScalingPoint:
    count: int
    run_ids: tuple[str, ...]
    examples_per_s: float | None
    efficiency: float | None  # None without a complete 1-device run in the series
    j_per_1k_examples: float | None
    energy_usd_per_1k: float | None
    hardware_usd_per_1k: float | None  # host + the GPUs used (analysis.money), over the life's working hours
    total_usd_per_1k: float | None
    marginal_usd_per_1k: float | None  # of the examples this count adds over the previous one; inf: none
    payback_hours: float | None  # of the step from the previous count; 0: costs nothing extra; inf: never
    pays_back: bool | None  # within the hardware's working hours (life × utilisation); None: cannot tell
    incomplete: tuple[str, ...] = ()  # "run: why" of the incomplete runs averaged in (--include-incomplete)
    judged: bool = True  # False when every run of the count is incomplete: no step is judged by it
    payback_verdict: str | None = None  # sizing.analysis.money's PAYS_BACK, BEYOND_LIFE, NEVER, CANNOT_TELL
    payback_bound: str = ""  # "at most" / "at least": the time saved not valued, the hours are a bound
    payback_note: str = ""  # why there is no payback figure, or what a "never" rests on
    step_from: int | None = None  # the count the step is judged against (the previous judged count)


@dataclass(frozen=True)
class ScalingSeries:
    name: str
    kind: str
    devices: str  # "GPUs" or "processes"
    per_device_batch: int | None
    sweep_ids: tuple[str, ...]
    points: tuple[ScalingPoint, ...]
    largest_paying_count: int | None  # None: cannot tell (a price or the value of time missing)
    stopped_at: int | None = None  # the count whose step does not pay back or cannot be told
    left_out: tuple[str, ...] = ()  # "4 GPUs: run (why)": incomplete runs of this series left out


def count_text(count: int, devices: str) -> str:
    """'1 GPU', '2 GPUs', '1 process', '4 processes'."""
    if count != 1:
        return f"{count} {devices}"
    return f"1 {devices.removesuffix('es') if devices.endswith('sses') else devices.removesuffix('s')}"


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
    nodes = len(hw.get("node_hardware") or [None])  # a multi-node job (sizing.analysis.jobs) scales apart
    settings = hw.get("gpu_settings")  # a power cap, held clocks, MIG, sharing (sizing.analysis.gpu_state)
    return (*unit, per_device_batch(run, analysis), analysis.kind, *host, gpu_models, settings, nodes)


def _complete(
    runs: Sequence[RunData], analyses: Sequence[RunAnalysis], include_incomplete: bool
) -> list[tuple[RunData, RunAnalysis]]:
    return [(r, a) for r, a in zip(runs, analyses, strict=True) if include_incomplete or not a.incomplete]


def scaling_series(
    runs: Sequence[RunData],
    analyses: Sequence[RunAnalysis],
    prices: Prices,
    include_incomplete: bool = False,
) -> list[ScalingSeries]:
    """Every series with at least two device counts, in first-seen order. Incomplete runs (failed,
    interrupted) are left out, and named on their series, unless `include_incomplete`: then they are
    averaged in as repeats, marked, and a count measured by them alone is not judged."""
    grouped: dict[tuple, list[tuple[RunData, RunAnalysis]]] = {}
    for run, analysis in _complete(runs, analyses, include_incomplete):
        grouped.setdefault(series_key(run, analysis), []).append((run, analysis))
    left_out: dict[tuple, list[str]] = {}
    for run, analysis in zip(runs, analyses, strict=True):
        if analysis.incomplete and not include_incomplete:
            what = (
                f"{count_text(device_count(run), _devices(analysis))}: {run.run_id} ({analysis.incomplete})"
            )
            left_out.setdefault(series_key(run, analysis), []).append(what)
    found = []
    for key, members in grouped.items():
        counts = sorted({device_count(run) for run, _ in members})
        if len(counts) >= 2:
            found.append(replace(_series(members, counts, prices), left_out=tuple(left_out.get(key, []))))
    return found


def left_out_runs(runs: Sequence[RunData], analyses: Sequence[RunAnalysis]) -> list[str]:
    """Incomplete runs of several devices, or of a count some complete run scales against, that a
    series leaves out (one line each)."""
    keys: dict[tuple, set[int]] = {}
    for run, analysis in _complete(runs, analyses, False):
        keys.setdefault(series_key(run, analysis), set()).add(device_count(run))
    lines = []
    for run, analysis in zip(runs, analyses, strict=True):
        partners = keys.get(series_key(run, analysis), set()) - {device_count(run)}
        if analysis.incomplete and (device_count(run) > 1 or partners):
            lines.append(
                f"{run.run_id} ({count_text(device_count(run), _devices(analysis))}): left out of the "
                f"scaling series, {analysis.incomplete} ({INCLUDE_FLAG} includes it, marked)"
            )
    return lines


def unmatched_counts(
    runs: Sequence[RunData], analyses: Sequence[RunAnalysis], include_incomplete: bool = False
) -> list[str]:
    """Runs of several devices that no series took: what differs keeps them apart (one line each)."""
    members = _complete(runs, analyses, include_incomplete)
    keys: dict[tuple, set[int]] = {}
    for run, analysis in members:
        keys.setdefault(series_key(run, analysis), set()).add(device_count(run))
    lines = []
    for run, analysis in members:
        if device_count(run) > 1 and len(keys[series_key(run, analysis)]) < 2:
            lines.append(
                f"{run.run_id} ({device_count(run)} devices, per-device batch "
                f"{per_device_batch(run, analysis)}): no run of another count with the same per-device "
                "batch, workload and host to scale against"
            )
    return lines


def _devices(analysis: RunAnalysis) -> str:
    return "GPUs" if analysis.kind == "gpu" else "processes"


def _series(members: list[tuple[RunData, RunAnalysis]], counts: list[int], prices: Prices) -> ScalingSeries:
    first_run, first = members[0]
    kind = first.kind
    by_count = {count: [a for r, a in members if device_count(r) == count] for count in counts}
    ones = by_count.get(1, [])
    base = _mean(a.throughput.examples_per_s for a in ones) if any(not a.incomplete for a in ones) else None
    points: list[ScalingPoint] = []
    for count in counts:
        group = by_count[count]
        rate = _mean(a.throughput.examples_per_s for a in group)
        energy_usd = _mean(a.energy_usd_per_1k_examples for a in group)
        hardware_usd = _mean(a.hardware_usd_per_1k_examples for a in group)
        total = None if energy_usd is None or hardware_usd is None else energy_usd + hardware_usd
        previous = next((p for p in reversed(points) if p.judged), None)
        judged = any(not a.incomplete for a in group)
        point = ScalingPoint(
            count=count,
            run_ids=tuple(a.run_id for a in group),
            examples_per_s=rate,
            efficiency=rate / (count * base) if rate is not None and base else None,
            j_per_1k_examples=_mean(a.j_per_1k_examples for a in group),
            energy_usd_per_1k=energy_usd,
            hardware_usd_per_1k=hardware_usd,
            total_usd_per_1k=total,
            marginal_usd_per_1k=None,
            payback_hours=None,
            pays_back=None,
            incomplete=tuple(f"{a.run_id}: {a.incomplete}" for a in group if a.incomplete),
            judged=judged,
            step_from=previous.count if previous is not None else None,
        )
        if previous is not None and judged:
            extra = _extra_price(_devices_price(by_count[previous.count]), _devices_price(group))
            point = _with_step(point, previous, extra, prices, kind)
        elif points and judged:
            point = replace(point, payback_note="no smaller count measured by a complete run to step from")
        points.append(point)
    sweeps = {str((r.meta.get("sweep") or {}).get("id")) for r, _ in members if r.meta.get("sweep")}
    largest, stopped = _largest_paying(points)
    return ScalingSeries(
        name=_series_name(first, per_device_batch(first_run, first)),
        kind=kind,
        devices=_devices(first),
        per_device_batch=per_device_batch(first_run, first),
        sweep_ids=tuple(sorted(sweeps)),
        points=tuple(points),
        largest_paying_count=largest,
        stopped_at=stopped,
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
    """What a count's devices cost (each GPU used at its model's price, analysis.money; 0 for processes on
    one host, whose price is the same at every count); None unless every GPU is priced."""
    found = {a.hardware_price.gpu_usd for a in group}
    return found.pop() if len(found) == 1 else None


def _extra_price(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else max(after - before, 0.0)


def _hourly_usd(rate: float | None, total_per_1k: float | None) -> float | None:
    return None if rate is None or total_per_1k is None else total_per_1k * rate * 3.6


def _marginal(previous: ScalingPoint, rate: float | None, total: float | None) -> float | None:
    """$ per 1,000 of the examples the step from the previous count adds (hourly cost over hourly gain)."""
    before, after = _hourly_usd(previous.examples_per_s, previous.total_usd_per_1k), _hourly_usd(rate, total)
    if before is None or after is None or rate is None or previous.examples_per_s is None:
        return None
    gained = (rate - previous.examples_per_s) * 3.6  # thousands of examples per hour
    return float("inf") if gained <= 0 else (after - before) / gained


def _with_step(
    point: ScalingPoint, previous: ScalingPoint, extra_price: float | None, prices: Prices, kind: str
) -> ScalingPoint:
    """The point with its step from `previous` judged: marginal cost and payback (analysis.money.payback:
    the added devices' price against the time saved at --value-per-hour plus the energy saved)."""
    marginal = _marginal(previous, point.examples_per_s, point.total_usd_per_1k)
    point = replace(point, marginal_usd_per_1k=marginal)
    rate, before = point.examples_per_s, previous.examples_per_s
    if rate is None or before is None:
        return replace(point, payback_note="throughput unknown")
    if extra_price is None:
        return replace(point, payback_note=f"a GPU not priced: {NO_PRICE} (--gpu-price)")
    speedup = rate / before
    energy_saving = None
    if point.energy_usd_per_1k is not None and previous.energy_usd_per_1k is not None:
        energy_saving = rate * 3.6 * (previous.energy_usd_per_1k - point.energy_usd_per_1k)
    if extra_price <= 0 and speedup > 1 and energy_saving is None:
        found = money.Payback(0.0, money.PAYS_BACK)  # faster at no extra price (energy not measured)
    else:
        found = money.payback(
            extra_price, speedup, energy_saving, prices.value_per_hour, money.life_hours(prices)
        )
    added = count_text(point.count - previous.count, "GPUs" if kind == "gpu" else "processes")
    what = f"{added} added for {fmt_usd(extra_price)}"
    note = ""
    if found.verdict == money.CANNOT_TELL:
        note = money.unvalued_reason(found, money.life_hours(prices), energy_saving is not None)
    elif found.verdict in (money.NEVER, money.BEYOND_LIFE):
        note = money.assumptions_text(prices, what, with_life=found.verdict == money.NEVER)
    hours = float("inf") if found.verdict == money.NEVER else found.hours
    return replace(
        point,
        payback_hours=hours if found.verdict != money.CANNOT_TELL else None,
        pays_back={money.PAYS_BACK: True, money.BEYOND_LIFE: False, money.NEVER: False}.get(found.verdict),
        payback_verdict=found.verdict,
        payback_bound=found.bound,
        payback_note=note,
    )


def _largest_paying(points: list[ScalingPoint]) -> tuple[int | None, int | None]:
    """The largest count reached by steps that each pay back within the hardware's life (counts
    measured only by incomplete runs are passed over, never reached), and the count whose step stopped
    the walk (None: it reached the last judged count)."""
    judged = [p for p in points if p.judged]
    if len(judged) < 2:
        return None, None
    largest = judged[0].count
    for point in judged[1:]:
        if point.pays_back is None:
            return None, point.count
        if not point.pays_back:
            return largest, point.count
        largest = point.count
    return largest, None
