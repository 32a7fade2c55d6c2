"""How the sampling ticks went, for run.json: a bounded sample of every tick's lateness, and the CPU the
sampling thread spent."""

from __future__ import annotations

import math
import random
import time
from array import array

COST_CHECK_AFTER_S = 5.0  # the first seconds' CPU share decides the one warning
COST_WARN_SHARE = 0.10  # of one core


class LatenessSample:
    """Lateness of every tick while that fits in memory, then a uniform reservoir of them (Algorithm R),
    so a day at 100 Hz keeps 200,000 values, not 8.6 million."""

    def __init__(self, capacity: int = 200_000) -> None:
        self.capacity = capacity
        self.values = array("d")
        self.seen = 0
        self.maximum: float | None = None
        self._random = random.Random(0)

    def add(self, value: float) -> None:
        self.seen += 1
        if self.maximum is None or value > self.maximum:
            self.maximum = value
        if self.seen <= self.capacity:
            self.values.append(value)
            return
        slot = self._random.randrange(self.seen)
        if slot < self.capacity:
            self.values[slot] = value

    def percentile(self, fraction: float) -> float | None:
        if not self.values:
            return None
        ordered = sorted(self.values)
        return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 3)


class TickStats:
    """How the ticks went: rows written, ticks that started late, deadlines skipped, lateness, and the
    sampling thread's CPU (its own clock, read at the loop's start and end, and once for the warning)."""

    def __init__(self, interval_s: float) -> None:
        self.samples = 0
        self.late_ticks = 0
        self.skipped_ticks = 0
        self.late_ms = LatenessSample()
        self.late_threshold_s = max(0.001, 0.1 * interval_s)
        self.interval_s = interval_s
        self.cost_check_at = math.inf  # when the sampling loop should call cost_warning, once
        self._clock_started: tuple[float, float] | None = None  # (thread CPU s, monotonic s)
        self.cpu_s: float | None = None
        self.cpu_share: float | None = None

    def start_clock(self, now: float) -> None:
        """From the sampling thread, as its loop starts: what its CPU clock counts from here is sampling."""
        self._clock_started = (time.thread_time(), now)
        self.cost_check_at = now + max(COST_CHECK_AFTER_S, 20 * self.interval_s)

    def _cpu_since_start(self, now: float) -> tuple[float, float] | None:
        if self._clock_started is None or now <= self._clock_started[1]:
            return None
        cpu = time.thread_time() - self._clock_started[0]
        return cpu, cpu / (now - self._clock_started[1])

    def cost_warning(self, now: float) -> str | None:
        """Once, from the sampling thread: a line when sampling took more than a tenth of a core so far."""
        self.cost_check_at = math.inf
        spent = self._cpu_since_start(now)
        if spent is None or spent[1] < COST_WARN_SHARE or not self.late_ms.seen:
            return None
        per_row_ms = spent[0] / self.late_ms.seen * 1000.0
        return (
            f"sampling takes {100 * spent[1]:.0f} % of a core at this interval ({per_row_ms:.2f} ms of CPU "
            "per row); a longer --interval costs less (on some GPU hosts NVML's reads cost milliseconds)"
        )

    def stop_clock(self, now: float) -> None:
        """From the sampling thread, as its loop ends: the run's sampling CPU, for run.json."""
        spent = self._cpu_since_start(now)
        if spent is not None:
            self.cpu_s, self.cpu_share = spent

    def add(self, late_s: float, skipped: int) -> None:
        self.skipped_ticks += skipped
        self.late_ms.add(late_s * 1000.0)
        if late_s > self.late_threshold_s:
            self.late_ticks += 1

    def sampler_record(self) -> dict[str, float | None]:
        """run.json's sampler figures on lateness."""
        maximum = self.late_ms.maximum
        return {
            "late_threshold_ms": round(self.late_threshold_s * 1000.0, 3),
            "late_ms_p50": self.late_ms.percentile(0.5),
            "late_ms_p99": self.late_ms.percentile(0.99),
            "late_ms_max": None if maximum is None else round(maximum, 3),
            "cpu_s": None if self.cpu_s is None else round(self.cpu_s, 3),
            "cpu_pct_of_core": None if self.cpu_share is None else round(100 * self.cpu_share, 2),
        }
