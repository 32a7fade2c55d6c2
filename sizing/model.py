"""The sizing report's inputs (one run's parsed files, prices, thresholds) and small column helpers.

Pure data and pure functions over pandas frames: no file access (sizing.analysis.load reads run directories).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from runformat import columns

HOURS_PER_YEAR = 8760.0
DEFAULT_UTILISATION = 1.0
JOULES_PER_KWH = 3.6e6
MAX_TARIFF_USD_PER_KWH = 5.0  # no grid charges more: a tariff above it was given in cents
MAX_AMORTISE_YEARS = 20.0  # no accelerator is kept longer: a life above it was given in months
MAX_CPU_TDP_W = 5000.0  # eight 500 W sockets: a host's CPU TDP above it was given in milliwatts
MAX_TEMP_THRESHOLD_C = 125.0  # no chip runs hotter: a threshold above it was given in °F


class UsageError(Exception):
    """A problem with what the user asked for: one line on stderr, exit code 2."""


@dataclass(frozen=True)
class Thresholds:
    """The verdict rules' numbers (docs/sizing.md, sizing.sections.definitions)."""

    gpu_bound_util_pct: float = 80.0
    gpu_underused_util_pct: float = 50.0
    cpu_saturated_pct: float = 85.0
    core_saturated_pct: float = 90.0
    core_idle_pct: float = 50.0
    disk_saturated_pct: float = 80.0
    iowait_pct: float = 20.0
    throttled_sample_fraction: float = 0.05
    cpu_freq_drop_fraction: float = 0.15
    cpu_busy_pct: float = 50.0
    cpu_freq_baseline_quantile: float = 0.90
    temp_threshold_c: float = 80.0
    weak_baseline_cpu_fraction: float = 0.5
    steal_pct: float = 5.0
    small_host_logical_cpus: int = 4


@dataclass(frozen=True)
class Prices:
    """What the user tells us about money and power; None = not given (never read as 0)."""

    tariff_per_kwh: float | None = 0.15
    gpu_price: float | None = None
    cpu_price: float | None = None
    amortise_years: float = 3.0
    value_per_hour: float | None = None
    cpu_tdp_w: float | None = None
    cpu_tdp_by_host: tuple[tuple[str, float], ...] = ()
    idle_fraction: float = 0.3
    gpu_price_by_model: tuple[tuple[str, float], ...] = ()  # per GPU of that model
    host_price_by_host: tuple[tuple[str, float], ...] = ()  # host name or CPU model
    utilisation: float = DEFAULT_UTILISATION  # the fraction of its life the box will be busy

    def tdp_for(self, host: str, cpu_model: str) -> float | None:
        """The TDP given for this host (by host name or CPU model), else the one for every host."""
        for key, watts in self.cpu_tdp_by_host:
            if key in (host, cpu_model):
                return watts
        return self.cpu_tdp_w

    def problems(self) -> list[str]:
        """One line per invalid setting (empty when all are usable)."""
        checks = [
            ("tariff", self.tariff_per_kwh, True),
            ("GPU price", self.gpu_price, True),
            ("CPU price", self.cpu_price, True),
            ("amortisation years", self.amortise_years, False),
            ("value per hour", self.value_per_hour, True),
            ("CPU TDP", self.cpu_tdp_w, False),
            *((f"CPU TDP of {key}", watts, False) for key, watts in self.cpu_tdp_by_host),
            *((f"GPU price of {key}", usd, True) for key, usd in self.gpu_price_by_model),
            *((f"host price of {key}", usd, True) for key, usd in self.host_price_by_host),
        ]
        found = []
        for name, value, zero_ok in checks:
            if value is None:
                continue
            if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
                bound = "≥ 0" if zero_ok else "> 0"
                found.append(f"{name} must be a number {bound}, got {value!r}")
        tariff = self.tariff_per_kwh
        if tariff is not None and math.isfinite(tariff) and tariff > MAX_TARIFF_USD_PER_KWH:
            found.append(
                f"tariff {tariff:g} USD per kWh is above any grid's price (at most "
                f"{MAX_TARIFF_USD_PER_KWH:g}): cents given? ({tariff / 100:g} USD)"
            )
        years = self.amortise_years
        if math.isfinite(years) and years > MAX_AMORTISE_YEARS:
            found.append(
                f"amortisation years {years:g} is longer than any hardware's life (at most "
                f"{MAX_AMORTISE_YEARS:g}): months given? ({years / 12:g} years)"
            )
        tdps = [("CPU TDP", self.cpu_tdp_w), *((f"CPU TDP of {key}", w) for key, w in self.cpu_tdp_by_host)]
        found += [
            f"{name} {watts:g} W is above any host's CPUs (at most {MAX_CPU_TDP_W:g} W): milliwatts given? "
            f"({watts / 1000:g} W)"
            for name, watts in tdps
            if watts is not None and math.isfinite(watts) and watts > MAX_CPU_TDP_W
        ]
        if not (math.isfinite(self.idle_fraction) and 0 <= self.idle_fraction < 1):
            found.append(f"idle fraction must be ≥ 0 and < 1, got {self.idle_fraction!r}")
        if not (math.isfinite(self.utilisation) and 0 < self.utilisation <= 1):
            found.append(f"utilisation must be > 0 and ≤ 1, got {self.utilisation!r}")
        return found


@dataclass(frozen=True)
class RunData:
    """One run directory's parsed files; absent files are empty dicts / DataFrames (inference.json: None)."""

    run_id: str
    meta: dict
    training_info: dict
    evaluation: dict
    telemetry: pd.DataFrame
    training: pd.DataFrame
    phases: pd.DataFrame
    warnings: tuple[str, ...] = ()
    inference: dict | None = None  # inference.json


@dataclass(frozen=True)
class Table:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


@dataclass(frozen=True)
class Section:
    """One part of the report: `data` goes into the JSON output, `tables` into Markdown and HTML."""

    key: str
    title: str
    data: dict | list
    tables: tuple[Table, ...] = ()
    lines: tuple[str, ...] = field(default_factory=tuple)


def number(value: object) -> float | None:
    """A finite number from JSON, else None (bools are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def times_of(telemetry: pd.DataFrame) -> np.ndarray:
    """time_unix as floats, one per row (NaN where unknown, all NaN without the column): a mask made from
    it always fits the frame."""
    if "time_unix" not in telemetry:
        return np.full(len(telemetry), np.nan)
    return pd.to_numeric(telemetry["time_unix"], errors="coerce").to_numpy(dtype=float)


def values_of(telemetry: pd.DataFrame, name: str) -> np.ndarray | None:
    """A column as floats (empty cells NaN); None when absent or without a single reading."""
    if name not in telemetry:
        return None
    values = pd.to_numeric(telemetry[name], errors="coerce").to_numpy(dtype=float)
    return values if np.isfinite(values).any() else None


def gpu_indices(telemetry: pd.DataFrame) -> list[int]:
    return columns.gpu_indices(telemetry.columns)


def core_indices(telemetry: pd.DataFrame) -> list[int]:
    return columns.core_indices(telemetry.columns)


def mean_of(telemetry: pd.DataFrame, name: str) -> float | None:
    values = values_of(telemetry, name)
    return float(np.nanmean(values)) if values is not None else None


def samples_in(telemetry: pd.DataFrame, window: tuple[float, float] | None) -> pd.DataFrame:
    if window is None or telemetry.empty or "time_unix" not in telemetry:
        return telemetry.iloc[0:0]
    times = pd.to_numeric(telemetry["time_unix"], errors="coerce")
    return telemetry[(times >= window[0]) & (times <= window[1])]


def sample_intervals(times: np.ndarray, nominal_interval_s: float | None) -> np.ndarray:
    """How long each sample stands for: the time since the previous one (the first: the nominal tick)."""
    if times.size == 0:
        return times
    gaps = np.diff(times)
    first = nominal_interval_s if nominal_interval_s else (float(np.median(gaps)) if gaps.size else 0.0)
    return np.concatenate([[first], gaps])


def count_events(mask: np.ndarray) -> int:
    """Maximal runs of consecutive True values."""
    if mask.size == 0:
        return 0
    as_int = mask.astype(np.int8)
    return int(as_int[0] + np.count_nonzero(np.diff(as_int) == 1))


def train_windows(phases: pd.DataFrame, telemetry: pd.DataFrame) -> list[tuple[float, float]]:
    """The `train` phases' [start, end] spans, else the whole telemetry's span (empty without either)."""
    if not phases.empty and {"phase", "start_unix", "end_unix"} <= set(phases.columns):
        train = phases[phases["phase"].astype(str) == "train"]
        starts = pd.to_numeric(train["start_unix"], errors="coerce")
        ends = pd.to_numeric(train["end_unix"], errors="coerce")
        spans = [
            (float(s), float(e))
            for s, e in zip(starts, ends, strict=True)
            if math.isfinite(s) and math.isfinite(e) and e > s
        ]
        if spans:
            return spans
    times = times_of(telemetry)
    times = times[np.isfinite(times)]
    if times.size >= 2 and times[-1] > times[0]:
        return [(float(times[0]), float(times[-1]))]
    return []


def clip_window(
    window: tuple[float, float], spans: Sequence[tuple[float, float]], telemetry: pd.DataFrame | None
) -> tuple[float, float] | None:
    """`window` ∩ the training spans' hull ∩ the telemetry's span (None: not clipped to it); None when
    empty."""
    start, end = window
    if spans:
        start, end = max(start, min(s for s, _ in spans)), min(end, max(e for _, e in spans))
    times = times_of(telemetry) if telemetry is not None else np.array([])
    times = times[np.isfinite(times)]
    if times.size:
        start, end = max(start, times[0]), min(end, times[-1])
    return (float(start), float(end)) if end > start else None
