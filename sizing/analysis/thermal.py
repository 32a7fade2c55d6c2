"""Temperatures, GPU clocks-event reasons decoded into named categories, and CPU frequency drops judged
on busy cores only, each against the peak of samples with as many busy cores (turbo bins), and called
thermal only with thermal evidence: the kernel's thermal-throttle counters rising, or the CPU at the
temperature threshold while its frequency was down."""

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
CPU_FREQUENCY_DROP = "CPU frequency drop"
CPU_THERMAL = "CPU frequency drop: thermal"
CPU_BELOW_PEAK = "CPU frequency below its busiest-core peak (cause unknown: turbo bins, power limit)"
THROTTLE_COUNT_COLUMNS = ("cpu_core_throttle_count", "cpu_package_throttle_count")


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
    cause: str = ""  # the thermal evidence behind a CPU_THERMAL drop

    @property
    def fraction(self) -> float | None:
        return self.flagged_samples / self.samples if self.samples and self.status == "measured" else None

    @property
    def is_thermal(self) -> bool:
        return self.category.startswith("thermal") or self.category == CPU_THERMAL


def temperature_summaries(
    telemetry: pd.DataFrame, threshold_c: float, nominal_interval_s: float | None
) -> list[ThermalSummary]:
    """Peak and time at or above threshold_c for the CPU sensor and every GPU."""
    times = times_of(telemetry)
    if not np.isfinite(times).any():
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
    if not np.isfinite(times).any():
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


def busy_core_frequency(
    telemetry: pd.DataFrame, thresholds: Thresholds
) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Per sample, the mean frequency of the busy cores and how many were busy (per-core columns), else
    the all-core mean where nearly every core is busy (older recordings; count −1 = "nearly all"); NaN
    where no core is busy. None without frequencies."""
    cores = [i for i in core_indices(telemetry) if f"cpu{i}_freq_mhz" in telemetry]
    if cores:
        util = np.column_stack([values_of(telemetry, f"cpu{i}_util_pct") for i in cores]).astype(float)
        freq = np.column_stack([pd.to_numeric(telemetry[f"cpu{i}_freq_mhz"], errors="coerce") for i in cores])
        busy = np.isfinite(util) & (util >= thresholds.cpu_busy_pct) & np.isfinite(freq)
        with np.errstate(invalid="ignore"):
            mean = np.where(
                busy.any(axis=1), np.nansum(np.where(busy, freq, 0), axis=1) / busy.sum(axis=1), np.nan
            )
        return mean, busy.sum(axis=1), "busy cores' cpu<N>_freq_mhz"
    freq, util = values_of(telemetry, "cpu_freq_mhz"), values_of(telemetry, "cpu_util_pct")
    if freq is None or util is None:
        return None
    nearly_all_busy = np.isfinite(util) & (util >= thresholds.core_saturated_pct)
    source = f"cpu_freq_mhz while ≥ {thresholds.core_saturated_pct:g} % busy"
    return np.where(nearly_all_busy, freq, np.nan), np.full(freq.shape, -1), source


def cpu_frequency_drops(
    telemetry: pd.DataFrame,
    thresholds: Thresholds,
    nominal_interval_s: float | None,
    peaks_mhz: dict[int, float] | None = None,
) -> ThrottleSummary:
    """Busy samples whose busy-core frequency is ≥ the drop fraction below the peak (90th percentile) of
    samples with as many busy cores; thermal only with thermal evidence, else cause unknown. "cannot tell"
    when the frequency never changes (a VM, no cpufreq)."""
    found = busy_core_frequency(telemetry, thresholds)
    all_freq = values_of(telemetry, "cpu_freq_mhz")
    if found is None:
        return ThrottleSummary("cpu", CPU_FREQUENCY_DROP, True, 0, 0, 0, 0.0, NO_FREQUENCY)
    freq, counts, basis = found
    readings = [all_freq] + [values_of(telemetry, f"cpu{i}_freq_mhz") for i in core_indices(telemetry)]
    every = np.concatenate([r[np.isfinite(r)] for r in readings if r is not None] or [np.array([])])
    if every.size and np.ptp(every) < 1.0:
        return ThrottleSummary("cpu", CPU_FREQUENCY_DROP, True, 0, 0, 0, 0.0, CONSTANT_FREQUENCY, basis)
    busy = np.isfinite(freq)
    if not busy.any():
        return ThrottleSummary("cpu", CPU_FREQUENCY_DROP, True, 0, 0, 0, 0.0, basis=basis)
    peaks = {**frequency_peaks(freq, counts, thresholds), **(peaks_mhz or {})}
    peak = np.array([peaks.get(int(c), np.inf) for c in counts], dtype=float)
    dropped = busy & (np.where(busy, freq, np.inf) <= peak * (1.0 - thresholds.cpu_freq_drop_fraction))
    intervals = sample_intervals(times_of(telemetry), nominal_interval_s)
    cause = thermal_evidence(telemetry, dropped, thresholds) if dropped.any() else ""
    category = CPU_FREQUENCY_DROP if not dropped.any() else CPU_THERMAL if cause else CPU_BELOW_PEAK
    return ThrottleSummary(
        "cpu",
        category,
        category != CPU_BELOW_PEAK,
        int(busy.sum()),
        int(dropped.sum()),
        count_events(dropped[busy]),
        float(intervals[dropped].sum()),
        basis=basis + ("; peak per number of busy cores" if (counts >= 0).any() else ""),
        cause=cause,
    )


def thermal_evidence(telemetry: pd.DataFrame, dropped: np.ndarray, thresholds: Thresholds) -> str:
    """What shows that a drop was heat: the kernel's throttle counters rising over the window, or the CPU
    at the temperature threshold in a dropped sample; '' when nothing does."""
    found = []
    for name in THROTTLE_COUNT_COLUMNS:
        counts = values_of(telemetry, name)
        known = counts[np.isfinite(counts)] if counts is not None else np.array([])
        rises = np.diff(known)
        if rises.size and (rises > 0).any():
            found.append(f"{name} rose by {float(rises[rises > 0].sum()):.0f}")
    temps = values_of(telemetry, "cpu_temp_c")
    if temps is not None:
        hot = dropped & np.isfinite(temps) & (temps >= thresholds.temp_threshold_c)
        if hot.any():
            found.append(
                f"cpu_temp_c up to {float(np.nanmax(temps[hot])):.0f} °C ≥ {thresholds.temp_threshold_c:g} °C"
            )
    return "; ".join(found)


def frequency_peaks(freq: np.ndarray, counts: np.ndarray, thresholds: Thresholds) -> dict[int, float]:
    """The 90th percentile of busy-core frequency for each number of busy cores."""
    busy = np.isfinite(freq)
    return {
        int(c): float(np.quantile(freq[busy & (counts == c)], thresholds.cpu_freq_baseline_quantile))
        for c in np.unique(counts[busy])
    }


def cpu_frequency_baseline(telemetry: pd.DataFrame, thresholds: Thresholds) -> dict[int, float]:
    """The peaks of a whole window (the training), by number of busy cores, for a narrower window."""
    found = busy_core_frequency(telemetry, thresholds)
    if found is None:
        return {}
    return frequency_peaks(found[0], found[1], thresholds)
