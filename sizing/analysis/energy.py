"""Energy charged to a run in one window: each source's coverage, what the total covers, what is missing.

Only the GPUs the training used are charged; the others' draw is listed apart. Each figure says what it
covers: GPU board (NVML), CPU package (RAPL) or an ESTIMATE from a TDP. None of these is wall power. A
source below COMPLETE_COVERAGE of the window gives no figure ("not measured (covers N % of the run)");
a GPU run whose charged GPUs are not all measured gets no energy at all (never the CPU package alone).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sizing.analysis.coverage import (
    SourceEnergy,
    counter_source,
    power_source,
    relative_difference,
    source_max_gap_s,
)
from sizing.model import JOULES_PER_KWH, Prices, gpu_indices, times_of, values_of

GPU_COUNTER = "GPU board (NVML energy counter)"
GPU_POWER = "GPU board (integrated NVML average power)"
GPU_INSTANT_POWER = "GPU board (integrated NVML instant power)"
ESTIMATE_SPACING_S = 1.0
CPU_RAPL = "CPU package (RAPL)"
GPU_NOT_REPORTED = "GPU board not reported"
CROSS_CHECK_TOLERANCE = 0.10
MIN_VALID_W = 1.0  # no GPU board or CPU package draws less while powered: a stuck counter or a 0 W gauge
MAX_BOARD_W = 2000.0  # no GPU board draws more (the largest, B300 and MI355X, are rated 1,400 W)
POWER_LIMIT_SLACK = 1.5  # a board's mean draw over the window stays within its power limit; this is slack


def gpu_name(index: int | str) -> str:
    """`gpu<index>` for a run's own GPU; a job's GPUs are named already ("node1 gpu0")."""
    return index if isinstance(index, str) else f"gpu{index}"


def _plausible(
    sources: list[SourceEnergy], checks: list[str], ceiling: tuple[float, str] | None = None
) -> list[SourceEnergy]:
    """The sources whose mean power a powered board or package can draw (at most `ceiling`'s watts, when
    given with what sets it); the others named in checks."""
    kept = []
    for s in sources:
        if s.mean_w is not None and s.mean_w < MIN_VALID_W and not s.is_estimate:
            checks.append(f"{s.source} {s.method} reads {s.mean_w:.1f} W (stuck or not supported): ignored")
        elif s.mean_w is not None and ceiling is not None and s.mean_w > ceiling[0]:
            checks.append(
                f"{s.source} {s.method} reads {s.mean_w:,.1f} W, more than {ceiling[1]}: ignored "
                "(a wrong unit?)"
            )
        else:
            kept.append(s)
    return kept


def board_ceiling(limits_w: np.ndarray | None) -> tuple[float, str]:
    """The most a board's mean power can be, and what sets it: POWER_LIMIT_SLACK × its power limit as
    recorded (the highest in the run), where that is one a board can have; else MAX_BOARD_W."""
    recorded = limits_w[np.isfinite(limits_w) & (limits_w > 0)] if limits_w is not None else np.array([])
    limit = float(recorded.max()) if recorded.size else None
    if limit is None or limit * POWER_LIMIT_SLACK >= MAX_BOARD_W:
        return MAX_BOARD_W, f"any GPU board draws ({MAX_BOARD_W:,.0f} W)"
    return limit * POWER_LIMIT_SLACK, f"{POWER_LIMIT_SLACK:g} × its {limit:,.0f} W power limit"


@dataclass(frozen=True)
class Energy:
    """Energy in one window: the charged GPUs' and the CPU's chosen sources, and what they lack."""

    window_s: float
    is_gpu_run: bool
    gpus: tuple[tuple[int | str, SourceEnergy | None], ...]  # str: a job's "node1 gpu0" (analysis.jobs)
    cpu: SourceEnergy | None
    cpu_missing_reason: str
    idle_gpus_w: tuple[tuple[int | str, float | None], ...] = ()
    checks: tuple[str, ...] = ()  # cross-check disagreements and resets, one phrase each
    considered: tuple[SourceEnergy, ...] = ()  # every source read, chosen or not (JSON)
    not_attributable: str = ""  # why the board's energy is not the run's (analysis.gpu_state): then unknown

    @property
    def gpu_j(self) -> float | None:
        if (
            self.not_attributable
            or not self.gpus
            or any(s is None or s.window_j is None for _, s in self.gpus)
        ):
            return None
        return sum(s.window_j for _, s in self.gpus if s is not None and s.window_j is not None)

    @property
    def gpu_covers(self) -> str | None:
        if self.gpu_j is None:
            return None
        return " + ".join(sorted({s.method for _, s in self.gpus if s is not None}))

    @property
    def gpu_missing(self) -> str | None:
        """Why the GPU board energy is not known ("GPU board not reported", "gpu1 covers 40 % ...")."""
        if not self.is_gpu_run or self.gpu_j is not None:
            return None
        if self.not_attributable:
            return self.not_attributable
        if not self.gpus or all(s is None for _, s in self.gpus):
            return GPU_NOT_REPORTED
        parts = [
            f"{gpu_name(i)} board not reported"
            if s is None
            else f"{gpu_name(i)} covers {s.coverage:.0%} of the run"
            for i, s in self.gpus
            if s is None or not s.complete
        ]
        return "; ".join(parts)

    @property
    def cpu_j(self) -> float | None:
        return self.cpu.window_j if self.cpu is not None else None

    @property
    def cpu_covers(self) -> str | None:
        return self.cpu.method if self.cpu_j is not None and self.cpu is not None else None

    @property
    def cpu_is_estimate(self) -> bool:
        return self.cpu_j is not None and self.cpu is not None and self.cpu.is_estimate

    @property
    def is_estimate(self) -> bool:
        """A TDP model or GPU power integrated from readings ≥ ESTIMATE_SPACING_S apart went into it."""
        chosen = [s for _, s in self.gpus if s is not None] if self.gpu_j is not None else []
        return self.cpu_is_estimate or any(s.is_estimate for s in chosen)

    @property
    def cpu_missing(self) -> str | None:
        if self.cpu_j is not None:
            return None
        if self.cpu is not None:
            return f"{self.cpu.method} covers {self.cpu.coverage:.0%} of the run"
        return self.cpu_missing_reason

    @property
    def total_j(self) -> float | None:
        """GPU run: the charged GPUs' board energy (+ the CPU's when known); CPU run: the CPU's."""
        if self.is_gpu_run:
            gpu = self.gpu_j
            return None if gpu is None else gpu + (self.cpu_j or 0.0)
        return self.cpu_j

    @property
    def is_partial(self) -> bool:
        """A GPU run's figure without the CPU package: the GPU board only."""
        return self.is_gpu_run and self.gpu_j is not None and self.cpu_j is None

    @property
    def covers(self) -> str:
        if self.total_j is None and self.is_gpu_run and self.not_attributable:
            return not_attributable_text(self.not_attributable)
        if self.total_j is None:
            return f"not measured ({self.missing})"
        parts = [c for c in (self.gpu_covers, self.cpu_covers) if c]
        text = " + ".join(parts)
        return f"{text} only; CPU not measured ({self.cpu_missing})" if self.is_partial else text

    @property
    def missing(self) -> str:
        """Why there is no total ('' when there is one)."""
        if self.total_j is not None:
            return ""
        return (self.gpu_missing if self.is_gpu_run else self.cpu_missing) or "no readings"

    def as_json(self) -> dict:
        return {
            "window_s": self.window_s,
            "energy_j": self.total_j,
            "complete": self.total_j is not None and not self.is_partial,
            "covers": self.covers,
            "gpu_energy_j": self.gpu_j,
            "cpu_energy_j": self.cpu_j,
            "not_measured_reason": self.missing or None,
            "sources": [s.as_json() for s in self.considered],
            "checks": list(self.checks),
        }


def not_attributable_text(reason: str) -> str:
    """'energy not attributable: the GPU was shared', 'board energy not attributable to the slice'."""
    return reason if reason.startswith("board energy") else f"energy {reason}"


def _bridged_text(name: str, gaps: int) -> str:
    return (f"{name} energy counter measured across {gaps} gap(s) in the telemetry (its readings either "
            "side)")  # fmt: skip


def reading_spacing_s(times: np.ndarray, values: np.ndarray, window: tuple[float, float]) -> float | None:
    """Median time between the valid readings inside the window; None with fewer than two."""
    inside = np.sort(times[np.isfinite(values) & (times >= window[0]) & (times <= window[1])])
    return float(np.median(np.diff(inside))) if inside.size >= 2 else None


def _gpu_power_source(
    name: str, label: str, times: np.ndarray, power: np.ndarray, window: tuple[float, float],
    nominal: float | None,
) -> SourceEnergy | None:  # fmt: skip
    """Integrated power; an ESTIMATE when its readings are ESTIMATE_SPACING_S or more apart (NVML samples
    power only part of the time, and a 1 s average lags and smooths a bursty load)."""
    spacing, gap = reading_spacing_s(times, power, window), source_max_gap_s(times, power, nominal)
    if spacing is not None and spacing >= ESTIMATE_SPACING_S:
        label = f"ESTIMATE: {label}, readings {spacing:.3g} s apart"
        return power_source(name, label, times, power, window, gap, is_estimate=True)
    return power_source(name, label, times, power, window, gap)


def _gpu_sources(
    telemetry: pd.DataFrame, index: int, window: tuple[float, float], nominal: float | None
) -> tuple[SourceEnergy | None, list[SourceEnergy], list[str]]:
    """The GPU's chosen source (the first complete of: the board's energy counter, integrated instant
    power, integrated average power; else the best covered), every source read, and what the
    counter's cross-check against integrated power found."""
    times, name = times_of(telemetry), f"gpu{index}"
    counter = values_of(telemetry, f"{name}_energy_j")
    from_counter = (
        counter_source(name, GPU_COUNTER, times, counter, window, source_max_gap_s(times, counter, nominal))
        if counter is not None
        else None
    )
    from_power = [
        _gpu_power_source(name, label, times, power, window, nominal)
        for column, label in (("power_instant_w", GPU_INSTANT_POWER), ("power_w", GPU_POWER))
        if (power := values_of(telemetry, f"{name}_{column}")) is not None
    ]
    read = [s for s in (from_counter, *from_power) if s is not None and (s.covered_s > 0 or s.resets)]
    checks = []
    if from_counter is not None and from_counter.resets:
        checks.append(f"{name} energy counter reset {from_counter.resets} time(s) (integrated piecewise)")
    if from_counter is not None and from_counter.bridged:
        checks.append(_bridged_text(name, from_counter.bridged))
    valid = _plausible(read, checks, board_ceiling(values_of(telemetry, f"{name}_power_limit_w")))
    counted = [s for s in valid if s is from_counter]
    integrated = [s for s in valid if s is not from_counter]
    if counted and integrated and (counter_w := counted[0].mean_w) is not None:
        power_w = integrated[0].mean_w
        differ = relative_difference(counter_w, power_w) if power_w else None
        if differ is not None and differ > CROSS_CHECK_TOLERANCE:
            checks.append(
                f"{name} energy counter ({counter_w:.1f} W) and integrated power ({power_w:.1f} W) "
                f"differ by {differ:.0%}"
            )
    complete = [s for s in valid if s.complete]
    chosen = complete[0] if complete else max(valid, key=lambda s: s.coverage, default=None)
    return chosen, read, checks


def one_gpu_energy_j(
    telemetry: pd.DataFrame, index: int, start: float, end: float, nominal_interval_s: float | None = None
) -> tuple[float | None, str]:
    """One GPU's energy over [start, end] and what it comes from ('' when not measured)."""
    chosen, _, _ = _gpu_sources(telemetry, index, (start, end), nominal_interval_s)
    if chosen is None or chosen.window_j is None:
        return None, ""
    return chosen.window_j, chosen.method


def _cpu_source(
    telemetry: pd.DataFrame, window: tuple[float, float], nominal: float | None, tdp_w: float | None,
    idle_fraction: float,
) -> tuple[SourceEnergy | None, list[SourceEnergy], str, list[str]]:  # fmt: skip
    """RAPL when complete, else the TDP ESTIMATE (TDP × (idle floor + (1 − idle floor) × CPU util))."""
    times = times_of(telemetry)
    read, checks = [], []
    counter = values_of(telemetry, "cpu_energy_j")
    rapl = (
        counter_source("cpu", CPU_RAPL, times, counter, window, source_max_gap_s(times, counter, nominal))
        if counter is not None
        else None
    )
    if rapl is not None and rapl.covered_s > 0:
        read.append(rapl)
        if rapl.resets:
            checks.append(f"RAPL counter reset {rapl.resets} time(s) (integrated piecewise)")
        if rapl.bridged:
            checks.append(_bridged_text("RAPL", rapl.bridged))
    util = values_of(telemetry, "cpu_util_pct")
    if tdp_w is not None and util is not None:
        power = tdp_w * (idle_fraction + (1.0 - idle_fraction) * np.clip(util, 0.0, 100.0) / 100.0)
        label = f"ESTIMATE: CPU package from {tdp_w:g} W TDP, {idle_fraction:.0%} idle floor, × CPU util"
        gap = source_max_gap_s(times, power, nominal)
        estimate = power_source("cpu", label, times, power, window, gap, is_estimate=True)
        if estimate is not None and estimate.covered_s > 0:
            read.append(estimate)
    valid = _plausible(read, checks)
    complete = [s for s in valid if s.complete]
    chosen = complete[0] if complete else max(valid, key=lambda s: s.coverage, default=None)
    reason = "no RAPL; give a CPU TDP for an estimate" if tdp_w is None else "no RAPL and no CPU util"
    return chosen, read, reason, checks


def energy_in(
    telemetry: pd.DataFrame,
    window: tuple[float, float] | None,
    charged_gpus: list[int],
    cpu_tdp_w: float | None,
    idle_fraction: float,
    is_gpu_run: bool | None = None,
    nominal_interval_s: float | None = None,
) -> Energy | None:
    """Energy over the window: the charged GPUs (none for a CPU run) and the CPU; others listed apart."""
    times = times_of(telemetry)
    if window is None or telemetry.empty or np.isfinite(times).sum() < 2 or window[1] <= window[0]:
        return None
    gpus, considered, checks = [], [], []
    for index in charged_gpus:
        chosen, read, found = _gpu_sources(telemetry, index, window, nominal_interval_s)
        gpus.append((index, chosen))
        considered += read
        checks += found
    idle = []
    for index in sorted(set(gpu_indices(telemetry)) - set(charged_gpus)):
        chosen, _, _ = _gpu_sources(telemetry, index, window, nominal_interval_s)
        idle.append((index, chosen.mean_w if chosen is not None else None))
    cpu, read, reason, found = _cpu_source(telemetry, window, nominal_interval_s, cpu_tdp_w, idle_fraction)
    return Energy(
        window_s=window[1] - window[0],
        is_gpu_run=bool(charged_gpus) if is_gpu_run is None else is_gpu_run,
        gpus=tuple(gpus),
        cpu=cpu,
        cpu_missing_reason=reason,
        idle_gpus_w=tuple(idle),
        checks=tuple(checks + found),
        considered=tuple(considered + read),
    )


def joules_per_1000(joules: float | None, window_s: float, per_s: float | None) -> float | None:
    """Mean power over the window × the time 1,000 units (examples or steps) take at the steady rate."""
    if joules is None or not per_s or per_s <= 0 or window_s <= 0:
        return None
    return joules / window_s * 1000.0 / per_s


def energy_usd(j_per_1000: float | None, prices: Prices) -> float | None:
    if j_per_1000 is None or prices.tariff_per_kwh is None:
        return None
    return j_per_1000 / JOULES_PER_KWH * prices.tariff_per_kwh
