"""Energy charged to a run, what it covers, and cost and break-even from it.

Only the GPUs the training used are charged (training.json's `gpu_uuids`); the others' draw is listed
apart. Each figure says what it covers: GPU board (NVML), CPU package (RAPL) or an ESTIMATE from a TDP.
None of these is wall power (fans, memory, disks, PSU losses are outside).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sizing.model import HOURS_PER_YEAR, JOULES_PER_KWH, Prices, times_of, values_of

GPU_COUNTER = "GPU board (NVML energy counter)"
GPU_POWER = "GPU board (integrated NVML average power)"
GPU_INSTANT_POWER = "GPU board (integrated NVML instant power)"
ESTIMATE_SPACING_S = 1.0
CPU_RAPL = "CPU package (RAPL)"


@dataclass(frozen=True)
class Energy:
    """Energy in one window, what each part covers, and GPUs present but not charged."""

    window_s: float
    gpu_j: float | None
    gpu_covers: str | None
    cpu_j: float | None
    cpu_covers: str | None
    cpu_is_estimate: bool = False
    idle_gpus_w: tuple[tuple[int, float | None], ...] = ()

    @property
    def total_j(self) -> float | None:
        parts = [j for j in (self.gpu_j, self.cpu_j) if j is not None]
        return sum(parts) if parts else None

    @property
    def covers(self) -> str:
        parts = [c for c in (self.gpu_covers, self.cpu_covers) if c]
        return " + ".join(parts) if parts else "not measured"


def counter_energy_j(times: np.ndarray, counter: np.ndarray, start: float, end: float) -> float | None:
    """Joules a cumulative counter advanced over [start, end], interpolating linearly between samples."""
    valid = np.isfinite(times) & np.isfinite(counter)
    times, counter = times[valid], counter[valid]
    if times.size < 2 or end <= start:
        return None
    start, end = max(start, times[0]), min(end, times[-1])
    if end <= start:
        return None
    return float(np.interp(end, times, counter) - np.interp(start, times, counter))


def integrated_energy_j(times: np.ndarray, power_w: np.ndarray, start: float, end: float) -> float | None:
    """Trapezoidal integral of power over [start, end] (interpolated at both ends)."""
    valid = np.isfinite(times) & np.isfinite(power_w)
    times, power_w = times[valid], power_w[valid]
    if times.size < 2:
        return None
    cumulative = np.concatenate([[0.0], np.cumsum(np.diff(times) * (power_w[1:] + power_w[:-1]) / 2)])
    return counter_energy_j(times, cumulative, start, end)


def one_gpu_energy_j(
    telemetry: pd.DataFrame, index: int, start: float, end: float
) -> tuple[float | None, str]:
    """The board's total-energy counter, else integrated instant power, else integrated average power;
    integrated readings ≥ ESTIMATE_SPACING_S apart are marked ESTIMATE (NVML samples power only part of
    the time, and a 1 s average lags and smooths the load)."""
    times = times_of(telemetry)
    counter = values_of(telemetry, f"gpu{index}_energy_j")
    if counter is not None and (joules := counter_energy_j(times, counter, start, end)) is not None:
        return joules, GPU_COUNTER
    for suffix, label in (("power_instant_w", GPU_INSTANT_POWER), ("power_w", GPU_POWER)):
        power = values_of(telemetry, f"gpu{index}_{suffix}")
        if power is None or (joules := integrated_energy_j(times, power, start, end)) is None:
            continue
        spacing = reading_spacing_s(times[np.isfinite(power)], start, end)
        if spacing is not None and spacing >= ESTIMATE_SPACING_S:
            return joules, f"ESTIMATE: {label}, readings {spacing:.3g} s apart"
        return joules, label
    return None, ""


def reading_spacing_s(times: np.ndarray, start: float, end: float) -> float | None:
    """Median time between the readings inside [start, end]; None with fewer than two."""
    inside = np.sort(times[(times >= start) & (times <= end)])
    return float(np.median(np.diff(inside))) if inside.size >= 2 else None


def cpu_energy_j(
    telemetry: pd.DataFrame, start: float, end: float, tdp_w: float | None, idle_fraction: float
) -> tuple[float | None, str | None, bool]:
    """RAPL package energy, else an ESTIMATE: TDP × (idle floor + (1 − idle floor) × CPU util)."""
    times = times_of(telemetry)
    counter = values_of(telemetry, "cpu_energy_j")
    if counter is not None and (joules := counter_energy_j(times, counter, start, end)) is not None:
        return joules, CPU_RAPL, False
    util = values_of(telemetry, "cpu_util_pct")
    if tdp_w is None or util is None:
        return None, None, False
    power = tdp_w * (idle_fraction + (1.0 - idle_fraction) * util / 100.0)
    joules = integrated_energy_j(times, power, start, end)
    if joules is None:
        return None, None, False
    label = f"ESTIMATE: CPU package from {tdp_w:g} W TDP, {idle_fraction:.0%} idle floor, × CPU util"
    return joules, label, True


def energy_in(
    telemetry: pd.DataFrame,
    window: tuple[float, float] | None,
    charged_gpus: list[int],
    cpu_tdp_w: float | None,
    idle_fraction: float,
) -> Energy | None:
    """Energy over the window: the charged GPUs (none for a CPU run) and the CPU; others listed apart."""
    if window is None or telemetry.empty or times_of(telemetry).size < 2:
        return None
    start, end = window
    gpu_total, covers, idle = 0.0, set(), []
    for index in charged_gpus:
        joules, how = one_gpu_energy_j(telemetry, index, start, end)
        if joules is None:
            gpu_total = None
            break
        gpu_total += joules
        covers.add(how)
    if not charged_gpus:
        gpu_total = None
    present = {
        int(c.split("_")[0][3:]) for c in telemetry.columns if c.startswith("gpu") and c[3:4].isdigit()
    }
    for index in sorted(present - set(charged_gpus)):
        joules, _ = one_gpu_energy_j(telemetry, index, start, end)
        idle.append((index, joules / (end - start) if joules is not None else None))
    cpu_j, cpu_covers, estimate = cpu_energy_j(telemetry, start, end, cpu_tdp_w, idle_fraction)
    return Energy(
        end - start,
        gpu_total,
        " + ".join(sorted(covers)) if gpu_total is not None else None,
        cpu_j,
        cpu_covers,
        estimate,
        tuple(idle),
    )


def joules_per_1000(joules: float | None, window_s: float, per_s: float | None) -> float | None:
    """Mean power over the window × the time 1,000 units (examples or steps) take at the steady rate."""
    if joules is None or not per_s or window_s <= 0:
        return None
    return joules / window_s * 1000.0 / per_s


def energy_usd(j_per_1000: float | None, prices: Prices) -> float | None:
    if j_per_1000 is None or prices.tariff_per_kwh is None:
        return None
    return j_per_1000 / JOULES_PER_KWH * prices.tariff_per_kwh


def hardware_price(kind: str, prices: Prices) -> float | None:
    """The prices given that apply: the host's (CPU price), plus the GPU's for a GPU run; None if none."""
    given = [p for p in (prices.cpu_price, prices.gpu_price if kind == "gpu" else None) if p is not None]
    return sum(given) if given else None


def hardware_usd_per_1000(price: float | None, per_s: float | None, prices: Prices) -> float | None:
    """The price amortised over its years of round-the-clock use, for the time 1,000 units take."""
    if price is None or not per_s:
        return None
    return price / (prices.amortise_years * HOURS_PER_YEAR) * (1000.0 / per_s / 3600.0)


def energy_saving_per_gpu_hour(
    gpu_examples_per_s: float | None, gpu_usd_per_1k: float | None, base_usd_per_1k: float | None
) -> float | None:
    """Energy cost the baseline would pay for one GPU hour's examples, minus what the GPU run pays."""
    if not gpu_examples_per_s or gpu_usd_per_1k is None or base_usd_per_1k is None:
        return None
    return gpu_examples_per_s * 3600.0 / 1000.0 * (base_usd_per_1k - gpu_usd_per_1k)


def break_even_hours(
    speedup: float | None, gpu_price: float | None, value_per_hour: float | None, energy_saving: float | None
) -> float | None:
    """GPU training hours until the time (and energy) saved has paid the GPU's price; inf = never."""
    if speedup is None or gpu_price is None:
        return None
    if value_per_hour is None and energy_saving is None:
        return None
    saving = (speedup - 1.0) * (value_per_hour or 0.0) + (energy_saving or 0.0)
    return float("inf") if saving <= 0 else gpu_price / saving
