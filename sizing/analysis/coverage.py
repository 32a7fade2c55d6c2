"""One energy source over one window: the joules over the span it covers, its coverage and its resets.

A source is a cumulative counter (NVML `gpu<i>_energy_j`, RAPL `cpu_energy_j`) or a power column
(`gpu<i>_power_w`, or a TDP model). Two consecutive valid readings cover the time between them when they
are at most MAX_GAP_INTERVALS of the source's own sampling intervals apart (each source its own: a merged
log keeps its interval; a log whose interval changed, each part its own: gap_limits); a counter that goes
down between them (driver reload, GPU reset, wrap) covers nothing there and counts one reset. Energy is
integrated over covered time only, so a gap never reads as zero joules and a reset never as a negative one.
A counter measures across a gap too: its rise between the reads either side of a gap inside the window
counts (a bridged gap) when its mean power there lies within BRIDGE_POWER_RANGE of its own other spans' (a
reset in the gap, or a misread, would not).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

COMPLETE_COVERAGE = 0.95
MAX_GAP_INTERVALS = 3.0
LOCAL_SPACINGS = 21  # an interval is judged against the median of this many spacings around it
BRIDGE_POWER_RANGE = (0.5, 1.5)  # × the 5th and 95th percentiles of a counter's mean power between reads


@dataclass(frozen=True)
class SourceEnergy:
    """What one source measured over a window: joules over covered_s of window_s."""

    source: str  # "gpu0", "cpu", ...
    method: str  # what it covers and how (sizing.analysis.energy's labels)
    joules: float  # over the covered span only
    covered_s: float
    window_s: float
    resets: int = 0
    is_estimate: bool = False
    bridged: int = 0  # gaps a counter measured across

    @property
    def coverage(self) -> float:
        return min(1.0, self.covered_s / self.window_s) if self.window_s > 0 else 0.0

    @property
    def complete(self) -> bool:
        return self.coverage >= COMPLETE_COVERAGE

    @property
    def mean_w(self) -> float | None:
        return self.joules / self.covered_s if self.covered_s > 0 else None

    @property
    def window_j(self) -> float | None:
        """The window's energy (mean power over the covered span × the window) when complete, else None."""
        mean = self.mean_w
        return mean * self.window_s if self.complete and mean is not None else None

    def as_json(self) -> dict:
        return {
            "source": self.source,
            "method": self.method,
            "coverage": self.coverage,
            "complete": self.complete,
            "resets": self.resets,
            "bridged_gaps": self.bridged,
            "covered_s": self.covered_s,
            "energy_j_covered": self.joules,
            "mean_power_w": self.mean_w,
            "is_estimate": self.is_estimate,
        }


def max_gap_s(times: np.ndarray, nominal_interval_s: float | None) -> float:
    """The longest gap between two of one source's readings (`times`: that source's own) that still
    counts as covered: MAX_GAP_INTERVALS × the source's own interval, the median spacing of its readings
    (a 5 s nvidia-smi log merged into a 1 s run keeps its 5 s), else the nominal interval, else 1 s."""
    finite = np.sort(times[np.isfinite(times)])
    gaps = np.diff(finite)
    gaps = gaps[gaps > 0]
    typical = float(np.median(gaps)) if gaps.size else (nominal_interval_s or 1.0)
    return MAX_GAP_INTERVALS * typical


def gap_limits(t: np.ndarray, floor_s: float) -> np.ndarray:
    """For each interval between ascending times t, the longest it may be and still count as covered:
    MAX_GAP_INTERVALS × the median of the LOCAL_SPACINGS spacings around it, never below floor_s (max_gap_s).
    A log sampled every 0.1 s and then every 1 s (a collector restarted with another interval, two logs
    merged) is covered in both parts; a lone gap among short spacings still stands out."""
    steps = np.diff(t)
    limits = np.full(steps.shape, floor_s)
    longer = np.flatnonzero(steps > floor_s)  # the others are covered whatever their limit
    if longer.size:
        half = LOCAL_SPACINGS // 2
        around = sliding_window_view(np.pad(steps, half, constant_values=np.nan), LOCAL_SPACINGS)[longer]
        limits[longer] = np.maximum(floor_s, MAX_GAP_INTERVALS * np.nanmedian(around, axis=1))
    return limits


def source_max_gap_s(times: np.ndarray, values: np.ndarray, nominal_interval_s: float | None) -> float:
    """max_gap_s over the rows where this source has a reading."""
    return max_gap_s(times[np.isfinite(values)], nominal_interval_s)


def _pairs(times: np.ndarray, values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = valid & np.isfinite(times)
    t, v = times[keep], values[keep]
    order = np.argsort(t, kind="stable")
    return t[order], v[order]


def _overlap(t0: np.ndarray, t1: np.ndarray, start: float, end: float) -> np.ndarray:
    return np.clip(np.minimum(t1, end) - np.maximum(t0, start), 0.0, None)


def spread_between_reads(t: np.ndarray, c: np.ndarray, limits: float | np.ndarray) -> np.ndarray:
    """The counter at each row (times t, ascending): a row that repeats the previous value is filled in
    linearly between the reads either side of it, or NaN (unknown) where no later read bounds it.

    A collector may read a costly counter less often than it writes rows and repeat its last value in
    between (NVML's energy counter: collect/sources/nvml.py); an importer repeats a scraped value until the
    next scrape or its lookback ends; a counter moves in steps coarser than a fast tick. The energy accrued
    over the repeated rows, not at the row that shows the next value: left as steps, a window shorter than a
    step (an inference cell of 2 s) would be charged the whole step or none of it. Repeats followed by a
    gap, a reset or nothing (after the last read) say nothing about the energy then: unknown, not zero. A
    counter that never moves is left as it is (its mean power says it is stuck). `limits`: the longest each
    interval may be and still be no gap (gap_limits), or one for all."""
    spread = c.astype(float)
    reads = np.concatenate(([0], np.flatnonzero(np.diff(c) != 0) + 1))
    if reads.size < 2:
        return spread
    segment = np.searchsorted(reads, np.arange(c.size), side="right") - 1  # each row's last read
    steps = np.diff(t)
    gaps = (steps <= 0) | (steps > limits)
    broken = np.bincount(segment[:-1], weights=gaps, minlength=reads.size) > 0
    first = reads[segment]
    last = reads[np.minimum(segment + 1, reads.size - 1)]  # the next read (the row's own after the last)
    bounded = (segment < reads.size - 1) & ~broken[segment] & (c[last] >= c[first])
    rows = np.flatnonzero(bounded)
    share = (t[rows] - t[first[rows]]) / (t[last[rows]] - t[first[rows]])
    spread[rows] = c[first[rows]] + (c[last[rows]] - c[first[rows]]) * share
    unknown = ~bounded
    unknown[reads] = False
    spread[unknown] = np.nan
    return spread


def counter_source(
    source: str, method: str, times: np.ndarray, counter: np.ndarray, window: tuple[float, float],
    max_gap: float,
) -> SourceEnergy | None:  # fmt: skip
    """A cumulative counter over the window, piecewise across resets, spread between its reads, across the
    gaps it bridges (bridged_gaps); None without two readings."""
    t, read = _pairs(times, counter, np.isfinite(counter) & (counter >= 0))
    if t.size < 2:
        return None
    start, end = window
    limits = gap_limits(t, max_gap)
    dt, dc = np.diff(t), np.diff(spread_between_reads(t, read, limits))
    in_reach = (dt > 0) & (dt <= limits)
    resets = in_reach & (np.diff(read) < 0)
    usable = in_reach & ~resets & np.isfinite(dc)
    overlap = _overlap(t[:-1], t[1:], start, end)
    fraction = np.divide(overlap, dt, out=np.zeros_like(dt), where=dt > 0)
    joules = float(np.sum(np.where(usable, dc * fraction, 0.0)))
    covered = float(np.sum(np.where(usable, overlap, 0.0)))
    in_window = overlap > 0
    bridged_j, bridged_s, bridged = bridged_gaps(t, read, dt > limits, window)
    return SourceEnergy(
        source,
        method,
        joules + bridged_j,
        covered + bridged_s,
        end - start,
        int(np.sum(resets & in_window)),
        bridged=bridged,
    )


def bridged_gaps(
    t: np.ndarray, read: np.ndarray, beyond: np.ndarray, window: tuple[float, float]
) -> tuple[float, float, int]:
    """The joules and seconds a counter (times t ascending; `beyond`: which intervals are gaps) measured
    across its gaps inside the window, and how many: from the read before a gap to the read after it (the
    rows between repeat the read before), where it rose at a mean power within BRIDGE_POWER_RANGE of the 5th
    and 95th percentiles of its spans between reads without a gap. counter_source counts none of that time
    otherwise."""
    reads = np.flatnonzero(np.concatenate(([True], np.diff(read) != 0)))
    if reads.size < 3:
        return 0.0, 0.0, 0
    steps = np.diff(t)[: reads[-1]]
    over = np.add.reduceat(beyond[: reads[-1]].astype(int), reads[:-1]) > 0
    shortest = np.minimum.reduceat(steps, reads[:-1])
    first, last = t[reads[:-1]], t[reads[1:]]
    rise, span = np.diff(read[reads]), last - first
    power = np.divide(rise, span, out=np.zeros_like(span), where=span > 0)
    rising = (shortest > 0) & (rise > 0)
    regular = rising & ~over
    if not regular.any():
        return 0.0, 0.0, 0
    low, high = np.percentile(power[regular], [5, 95])
    bridge = rising & over & (first >= window[0]) & (last <= window[1])
    bridge &= (power >= BRIDGE_POWER_RANGE[0] * low) & (power <= BRIDGE_POWER_RANGE[1] * high)
    return float(rise[bridge].sum()), float(span[bridge].sum()), int(bridge.sum())


def power_source(
    source: str, method: str, times: np.ndarray, power_w: np.ndarray, window: tuple[float, float],
    max_gap: float, is_estimate: bool = False,
) -> SourceEnergy | None:  # fmt: skip
    """A power column integrated by trapezoids over covered time; an interval the window cuts counts
    in proportion to the part inside (as a counter interpolated linearly would)."""
    t, p = _pairs(times, power_w, np.isfinite(power_w) & (power_w >= 0))
    if t.size < 2:
        return None
    start, end = window
    dt = np.diff(t)
    usable = (dt > 0) & (dt <= gap_limits(t, max_gap))
    overlap = _overlap(t[:-1], t[1:], start, end)
    fraction = np.divide(overlap, dt, out=np.zeros_like(dt), where=dt > 0)
    joules = float(np.sum(np.where(usable, dt * (p[1:] + p[:-1]) / 2 * fraction, 0.0)))
    covered = float(np.sum(np.where(usable, overlap, 0.0)))
    return SourceEnergy(source, method, joules, covered, end - start, 0, is_estimate)


def relative_difference(a: float, b: float) -> float | None:
    """|a − b| / the larger, None when both are zero."""
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale > 0 else None
