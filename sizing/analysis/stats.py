"""Means and spread over repeats, and a 95 % interval for a speedup (Student's t, from a table)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# Two-sided 95 % critical values of Student's t by degrees of freedom (1..30, then 40, 60, 120, ∞).
T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
T95_BEYOND = ((40, 2.021), (60, 2.000), (120, 1.980))
Z95 = 1.960


@dataclass(frozen=True)
class Spread:
    mean: float | None
    std: float | None
    minimum: float | None
    maximum: float | None
    count: int


def spread(values: Iterable[float | None]) -> Spread:
    """Mean, sample standard deviation (n − 1; None for one value), min and max of the known values."""
    known = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not known:
        return Spread(None, None, None, None, 0)
    mean = sum(known) / len(known)
    std = math.sqrt(sum((v - mean) ** 2 for v in known) / (len(known) - 1)) if len(known) > 1 else None
    return Spread(mean, std, min(known), max(known), len(known))


def t95(degrees_of_freedom: float) -> float:
    """The critical value for the whole degrees of freedom at or below df (conservative between rows)."""
    df = max(1, math.floor(degrees_of_freedom))
    if df <= len(T95):
        return T95[df - 1]
    value = T95[-1]
    for limit, critical in T95_BEYOND:
        if df >= limit:
            value = critical
    return Z95 if df > 1000 else value


def ratio_ci95(run: Spread, base: Spread) -> tuple[float, float] | None:
    """95 % interval of mean(run)/mean(base) with ≥ 2 repeats each: log-ratio standard error by the delta
    method, Welch–Satterthwaite degrees of freedom, Student's t."""
    if (
        run.count < 2
        or base.count < 2
        or not run.mean
        or not base.mean
        or run.std is None
        or base.std is None
    ):
        return None
    ratio = run.mean / base.mean
    a = run.std**2 / (run.count * run.mean**2)
    b = base.std**2 / (base.count * base.mean**2)
    if a + b == 0:
        return ratio, ratio
    df = (a + b) ** 2 / (a**2 / (run.count - 1) + b**2 / (base.count - 1))
    half = t95(df) * math.sqrt(a + b)
    return ratio * math.exp(-half), ratio * math.exp(half)
