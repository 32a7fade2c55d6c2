"""A step log cut into its training sessions, and what the steady rows say about their own stability.

A run resumed in the same directory appends a second session to training.csv: its `elapsed_s` starts again,
its `step` goes back (resumed from an earlier checkpoint) or jumps, and there is a time gap while the new
process starts. The steady rate counts whole sessions only (each after its own warm-up), never the gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from sizing.analysis.stats import t95

GAP_MIN_S = 30.0  # a pause shorter than this is part of training (a checkpoint save, an evaluation)
GAP_FACTOR = 20.0  # … and so is one shorter than this many typical row intervals
STEP_JUMP_FACTOR = 10.0
BATCHES = 10
MIN_ROWS_PER_BATCH = 5
DRIFT_WARN_FRACTION = 0.05
PAUSE_FACTOR = 10.0  # a stride of steps this many times slower than the median stride holds a pause
PAUSE_SHARE = (
    0.1  # pauses are said when the time they held past the median pace is this share of the steady time
)


@dataclass(frozen=True)
class Steady:
    """The steady rows of every session as (duration, steps) increments; gaps between sessions excluded."""

    durations_s: np.ndarray
    steps: np.ndarray
    sessions: int
    gaps_s: float
    longest: tuple[float, float] | None  # the longest session's steady span (unix s)
    warmup: int

    @property
    def steps_per_s(self) -> float | None:
        total = float(self.durations_s.sum())
        done = float(self.steps.sum())
        return done / total if total > 0 and done > 0 else None

    @property
    def steady_steps(self) -> int:
        return int(self.steps.sum())


def set_back(times: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Per pair of consecutive rows: the time went back while the step went on (the clock was set back)."""
    return (np.diff(times) < 0) & (np.diff(steps) > 0)


def session_starts(rows: pd.DataFrame) -> list[int]:
    """Row indices where a session starts (0 first): elapsed_s or step going back, step jumping far beyond
    its usual stride, or a time gap far beyond the usual row interval."""
    times = rows["time_unix"].to_numpy(dtype=float)
    steps = rows["step"].to_numpy(dtype=float)
    if times.size < 2:
        return [0]
    dt, dstep = np.diff(times), np.diff(steps)
    typical_dt = float(np.median(dt[dt > 0])) if (dt > 0).any() else 0.0
    typical_step = float(np.median(dstep[dstep > 0])) if (dstep > 0).any() else 1.0
    cut = (dstep < 0) | (dstep > max(1.0, STEP_JUMP_FACTOR * typical_step))
    cut |= dt > max(GAP_MIN_S, GAP_FACTOR * typical_dt)
    if "elapsed_s" in rows:
        elapsed = rows["elapsed_s"].to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            cut |= np.diff(elapsed) < 0
    return [0, *(int(i) + 1 for i in np.flatnonzero(cut))]


def steady_sessions(rows: pd.DataFrame, warmup_of) -> Steady:  # warmup_of: rows in session → warm-up
    """Each session's rows after its own warm-up, as increments; the gaps between sessions left out."""
    starts = session_starts(rows)
    bounds = list(zip(starts, [*starts[1:], len(rows)], strict=True))
    times = rows["time_unix"].to_numpy(dtype=float)
    steps = rows["step"].to_numpy(dtype=float)
    durations, done, longest, first_warmup = [], [], None, None
    for start, end in bounds:
        count = end - start
        if count < 2:
            continue
        warmup = warmup_of(count)
        first_warmup = warmup if first_warmup is None else first_warmup
        span_t, span_s = times[start + warmup - 1 : end], steps[start + warmup - 1 : end]
        durations.append(np.diff(span_t))
        done.append(np.diff(span_s))
        if longest is None or span_t[-1] - span_t[0] > longest[1] - longest[0]:
            longest = (float(span_t[0]), float(span_t[-1]))
    gaps = sum(float(times[s] - times[s - 1]) for s in starts[1:])
    return Steady(
        np.concatenate(durations) if durations else np.array([]),
        np.concatenate(done) if done else np.array([]),
        len(bounds),
        gaps,
        longest,
        first_warmup or 0,
    )


def batch_rates(steady: Steady, stride: int = 1) -> tuple[float, ...]:
    """steps/s of up to BATCHES contiguous batches of the steady increments, each ≥ MIN_ROWS_PER_BATCH
    strides long and cut only at multiples of `stride` (a GPU run's rows between two loss reads carry
    queueing time only; the read's row carries the wait)."""
    stride = max(1, stride)
    groups = steady.durations_s.size // stride
    count = min(BATCHES, groups // MIN_ROWS_PER_BATCH)
    if count < 2:
        return ()
    cuts = [round(i * groups / count) * stride for i in range(count + 1)]
    cuts[-1] = steady.durations_s.size
    rates = []
    for start, end in pairwise(cuts):
        spent = float(steady.durations_s[start:end].sum())
        if spent <= 0:
            return ()
        rates.append(float(steady.steps[start:end].sum()) / spent)
    return tuple(rates)


def batch_means_ci95(rate: float | None, rates: tuple[float, ...]) -> tuple[float, float] | None:
    """rate ± t(k − 1) × sd(batch rates) / √k: how well this run pins its own steady rate."""
    if rate is None or len(rates) < 2:
        return None
    values = np.asarray(rates)
    half = t95(len(values) - 1) * float(values.std(ddof=1)) / math.sqrt(len(values))
    return rate - half, rate + half


@dataclass(frozen=True)
class Pauses:
    """Strides of the steady steps PAUSE_FACTOR × slower than the median stride or more: each a pause (a
    stopped or starved process, a checkpoint, an evaluation or a recompile in the step), counted in the steady
    rate."""

    count: int
    longest_s: float  # the slowest such stride's duration
    lost_share: float  # the time they took past the median pace, as a share of the steady time
    steps_per_s_without: float  # the steady rate with that time left out

    def said(self) -> bool:
        return self.lost_share >= PAUSE_SHARE

    def describe(self) -> str:
        """`1 pause (21.2 s, ≥ 10× the median step) that took 20% of the steady time: 0.903 steps/s
        without it (…)`."""
        one = self.count == 1
        what = "1 pause" if one else f"{self.count} pauses (the longest"
        return (
            f"{what} {'(' if one else ''}{self.longest_s:,.1f} s, ≥ {PAUSE_FACTOR:g}× the median step) that "
            f"took {self.lost_share:.0%} of the steady time: {self.steps_per_s_without:.3g} steps/s without "
            f"{'it' if one else 'them'} (a stopped or starved process: repeat the run; a checkpoint, an "
            "evaluation or a recompile in the step: part of the rate)"
        )


def pauses(steady: Steady, stride: int = 1) -> Pauses | None:
    """The steady steps' pauses, judged a stride at a time (a GPU run's loss read holds its stride's wait);
    None with none, or with fewer than MIN_ROWS_PER_BATCH strides to take a median of."""
    stride = max(1, stride)
    whole = steady.durations_s.size // stride * stride
    if whole < stride * MIN_ROWS_PER_BATCH:
        return None
    durations = steady.durations_s[:whole].reshape(-1, stride).sum(axis=1)
    steps = steady.steps[:whole].reshape(-1, stride).sum(axis=1)
    timed = (steps > 0) & (durations > 0)
    durations, steps = durations[timed], steps[timed]
    if durations.size < MIN_ROWS_PER_BATCH:
        return None
    median_pace = float(np.median(durations / steps))
    slow = durations >= PAUSE_FACTOR * median_pace * steps
    total = float(steady.durations_s.sum())
    lost = float((durations[slow] - median_pace * steps[slow]).sum())
    if not slow.any() or total <= lost:
        return None
    return Pauses(
        int(slow.sum()),
        float(durations[slow].max()),
        lost / total,
        float(steady.steps.sum()) / (total - lost),
    )


def thirds(steady: Steady) -> tuple[float | None, float | None]:
    """steps/s over the first and the last third of the steady time."""
    elapsed = np.cumsum(steady.durations_s)
    total = float(elapsed[-1]) if elapsed.size else 0.0
    if total <= 0 or elapsed.size < 6:
        return None, None
    first, last = elapsed <= total / 3, elapsed > 2 * total / 3
    rates = []
    for mask in (first, last):
        spent = float(steady.durations_s[mask].sum())
        rates.append(float(steady.steps[mask].sum()) / spent if spent > 0 else None)
    return rates[0], rates[1]
