"""How late the sampling ticks started: a bounded sample of every tick's lateness, for run.json."""

from __future__ import annotations

import random
from array import array


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
    """How the ticks went: rows written, ticks that started late, deadlines skipped, lateness."""

    def __init__(self, interval_s: float) -> None:
        self.samples = 0
        self.late_ticks = 0
        self.skipped_ticks = 0
        self.late_ms = LatenessSample()
        self.late_threshold_s = max(0.001, 0.1 * interval_s)

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
        }
