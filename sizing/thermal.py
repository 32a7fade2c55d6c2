"""Temperatures, GPU clocks-event reasons decoded into named categories, and CPU frequency drops judged
on busy cores only."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sizing.model import (
    Thresholds,
    core_indices,
    count_events,
    gpu_indices,
    sample_intervals,
    times_of,
    values_of,
)

# NVML clocks-event reasons: bit → (category, is a fault). 0x2 and 0x100 are clock settings, not events.
GPU_REASONS: tuple[tuple[int, str, bool], ...] = (
    (0x1, "idle", False),
    (0x4, "at power limit (SW power cap)", False),
    (0x8, "HW slowdown", True),
    (0x10, "sync boost", False),
    (0x20, "thermal (SW)", True),
    (0x40, "thermal (HW)", True),
    (0x80, "HW power brake", True),
)
THERMAL_BITS = 0x20 | 0x40
CONSTANT_FREQUENCY = "cannot tell (constant frequency: VM or no cpufreq)"
NO_FREQUENCY = "cannot tell (no CPU frequency recorded)"


@dataclass(frozen=True)
class ThermalSummary:
    sensor: str
    peak_c: float
    time_above_s: float
    threshold_c: float


@dataclass(frozen=True)
class ThrottleSummary:
    """One source (gpu<i> or cpu) and one category: how many samples had it, in how many events."""

    source: str
    category: str
    is_fault: bool
    samples: int
    flagged_samples: int
    events: int
    flagged_s: float
    status: str = "measured"  # or CONSTANT_FREQUENCY / NO_FREQUENCY for the CPU
    basis: str = ""  # what the CPU judgement rests on (per-core frequencies, or the all-core mean)

    @property
    def fraction(self) -> float | None:
        return self.flagged_samples / self.samples if self.samples and self.status == "measured" else None

    @property
    def is_thermal(self) -> bool:
        return self.category.startswith("thermal") or self.category == "CPU frequency drop"


def temperature_summaries(
    telemetry: pd.DataFrame, threshold_c: float, nominal_interval_s: float | None
) -> list[ThermalSummary]:
    """Peak and time at or above threshold_c for the CPU sensor and every GPU."""
    times = times_of(telemetry)
    if times.size == 0:
        return []
    intervals = sample_intervals(times, nominal_interval_s)
    found = []
    for name in ["cpu_temp_c"] + [f"gpu{i}_temp_c" for i in gpu_indices(telemetry)]:
        temps = values_of(telemetry, name)
        if temps is None:
            continue
        above = np.isfinite(temps) & (temps >= threshold_c)
        found.append(
            ThermalSummary(
                name.removesuffix("_temp_c"),
                float(np.nanmax(temps)),
                float(intervals[above].sum()),
                threshold_c,
            )
        )
    return found


def gpu_throttling(
    telemetry: pd.DataFrame, nominal_interval_s: float | None, gpus: list[int] | None = None
) -> list[ThrottleSummary]:
    """Per GPU and per reason category present at least once: samples, events and time."""
    times = times_of(telemetry)
    if times.size == 0:
        return []
    intervals = sample_intervals(times, nominal_interval_s)
    found = []
    for index in gpu_indices(telemetry) if gpus is None else gpus:
        reasons = values_of(telemetry, f"gpu{index}_throttle_reasons")
        if reasons is None:
            continue
        valid = np.isfinite(reasons)
        bits = np.where(valid, reasons, 0).astype(np.int64)
        for bit, category, fault in GPU_REASONS:
            flagged = valid & ((bits & bit) != 0)
            if not flagged.any():
                continue
            found.append(
                ThrottleSummary(
                    f"gpu{index}",
                    category,
                    fault,
                    int(valid.sum()),
                    int(flagged.sum()),
                    count_events(flagged[valid]),
                    float(intervals[flagged].sum()),
                )
            )
        if not any(s.source == f"gpu{index}" for s in found):
            found.append(ThrottleSummary(f"gpu{index}", "none", False, int(valid.sum()), 0, 0, 0.0))
    return found


def busy_core_frequency(telemetry: pd.DataFrame, thresholds: Thresholds) -> tuple[np.ndarray, str] | None:
    """Per sample, the mean frequency of the busy cores (per-core columns), else the all-core mean where
    nearly every core is busy (older recordings); NaN where no core is busy. None without frequencies."""
    cores = [i for i in core_indices(telemetry) if f"cpu{i}_freq_mhz" in telemetry]
    if cores:
        util = np.column_stack([values_of(telemetry, f"cpu{i}_util_pct") for i in cores]).astype(float)
        freq = np.column_stack([pd.to_numeric(telemetry[f"cpu{i}_freq_mhz"], errors="coerce") for i in cores])
        busy = np.isfinite(util) & (util >= thresholds.cpu_busy_pct) & np.isfinite(freq)
        with np.errstate(invalid="ignore"):
            mean = np.where(
                busy.any(axis=1), np.nansum(np.where(busy, freq, 0), axis=1) / busy.sum(axis=1), np.nan
            )
        return mean, "busy cores' cpu<N>_freq_mhz"
    freq, util = values_of(telemetry, "cpu_freq_mhz"), values_of(telemetry, "cpu_util_pct")
    if freq is None or util is None:
        return None
    nearly_all_busy = np.isfinite(util) & (util >= thresholds.core_saturated_pct)
    source = f"cpu_freq_mhz while ≥ {thresholds.core_saturated_pct:g} % busy"
    return np.where(nearly_all_busy, freq, np.nan), source


def cpu_frequency_drops(
    telemetry: pd.DataFrame,
    thresholds: Thresholds,
    nominal_interval_s: float | None,
    baseline_mhz: float | None = None,
) -> ThrottleSummary:
    """Busy samples whose busy-core frequency is ≥ the drop fraction below the baseline (90th percentile
    of busy-core frequency); "cannot tell" when the frequency never changes (a VM, no cpufreq)."""
    found = busy_core_frequency(telemetry, thresholds)
    all_freq = values_of(telemetry, "cpu_freq_mhz")
    if found is None:
        return ThrottleSummary("cpu", "CPU frequency drop", True, 0, 0, 0, 0.0, NO_FREQUENCY)
    freq, basis = found
    readings = [all_freq] + [values_of(telemetry, f"cpu{i}_freq_mhz") for i in core_indices(telemetry)]
    every = np.concatenate([r[np.isfinite(r)] for r in readings if r is not None] or [np.array([])])
    if every.size and np.ptp(every) < 1.0:
        return ThrottleSummary("cpu", "CPU frequency drop", True, 0, 0, 0, 0.0, CONSTANT_FREQUENCY, basis)
    busy = np.isfinite(freq)
    if not busy.any():
        return ThrottleSummary("cpu", "CPU frequency drop", True, 0, 0, 0, 0.0, basis=basis)
    if baseline_mhz is None:
        baseline_mhz = float(np.quantile(freq[busy], thresholds.cpu_freq_baseline_quantile))
    dropped = busy & (
        np.where(busy, freq, np.inf) <= baseline_mhz * (1.0 - thresholds.cpu_freq_drop_fraction)
    )
    intervals = sample_intervals(times_of(telemetry), nominal_interval_s)
    return ThrottleSummary(
        "cpu",
        "CPU frequency drop",
        True,
        int(busy.sum()),
        int(dropped.sum()),
        count_events(dropped[busy]),
        float(intervals[dropped].sum()),
        basis=basis,
    )


def cpu_frequency_baseline(telemetry: pd.DataFrame, thresholds: Thresholds) -> float | None:
    found = busy_core_frequency(telemetry, thresholds)
    if found is None or not np.isfinite(found[0]).any():
        return None
    freq = found[0]
    return float(np.quantile(freq[np.isfinite(freq)], thresholds.cpu_freq_baseline_quantile))
