"""How sure a speedup is: the interval it is given with, and whether repeats of one configuration agree.

- Repeats on both sides: Student's t interval of the ratio of means (sizing.analysis.stats.ratio_ci95).
- Repeats on one side only: the min–max of that side's runs over the other side's run, each end widened
  by the single run's own within-run 95 % interval; the run-to-run spread of the single side is not known.
- One run a side: the within-run interval from batch means, which says how well each run pins its own
  rate, not how much a repeat would differ: it always says "run-to-run spread not measured".

Repeats disagree when two runs' within-run 95 % intervals of examples/s (steps/s for a job that counts
steps only) do not overlap, or, without them, when the fastest is more than REPEATS_DISAGREE_FRACTION
above the slowest: the runs were not made under the same conditions, and their mean is not one
configuration's rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sizing.analysis.run import RunAnalysis
from sizing.analysis.runchecks import within_run_speedup_ci95
from sizing.analysis.stats import ratio_ci95, spread

REPEATS = "repeats"
ONE_SIDE = "repeats on one side"
WITHIN_RUN = "within-run"
SPREAD_NOT_MEASURED = "run-to-run spread not measured"
REPEATS_DISAGREE_FRACTION = 0.10  # without intervals: fastest more than this above the slowest


@dataclass(frozen=True)
class SpeedupInterval:
    low: float
    high: float
    basis: str  # REPEATS, ONE_SIDE or WITHIN_RUN
    text: str  # how it reads beside the speedup


def examples_ci95(a: RunAnalysis) -> tuple[float, float] | None:
    """The run's within-run 95 % interval of examples/s (its steps/s interval times examples per step)."""
    t = a.throughput
    if not (t.steps_per_s_ci95 and t.steps_per_s and t.examples_per_s):
        return None
    per_step = t.examples_per_s / t.steps_per_s
    return t.steps_per_s_ci95[0] * per_step, t.steps_per_s_ci95[1] * per_step


def rate_unit(*groups: Sequence[RunAnalysis]) -> str:
    """'steps' where no run knows its examples per step and some know steps/s (a job that counts steps
    only: its speedups compare steps/s), else 'examples'."""
    runs = [a for group in groups for a in group]
    if not any(a.throughput.examples_per_s for a in runs) and any(a.throughput.steps_per_s for a in runs):
        return "steps"
    return "examples"


def _rate(a: RunAnalysis, unit: str) -> float | None:
    return a.throughput.steps_per_s if unit == "steps" else a.throughput.examples_per_s


def _ci95(a: RunAnalysis, unit: str) -> tuple[float, float] | None:
    return a.throughput.steps_per_s_ci95 if unit == "steps" else examples_ci95(a)


def _rates(group: Sequence[RunAnalysis], unit: str) -> list[float]:
    return [r for a in group if (r := _rate(a, unit))]


def _one_side(
    many: Sequence[RunAnalysis], single: RunAnalysis, many_is_run: bool, unit: str
) -> SpeedupInterval | None:
    rates, rate = _rates(many, unit), _rate(single, unit)
    if len(rates) < 2 or not rate:
        return None
    low_single, high_single = _ci95(single, unit) or (rate, rate)
    if many_is_run:
        low, high = min(rates) / high_single, max(rates) / low_single
        side = f"the GPU side's {len(rates)} runs"
    else:
        low, high = low_single / max(rates), high_single / min(rates)
        side = f"the baseline's {len(rates)} runs"
    text = (f"range {low:.2f}–{high:.2f}× over {side} against one run (with its within-run interval); "
            f"{SPREAD_NOT_MEASURED} on the other side")  # fmt: skip
    return SpeedupInterval(low, high, ONE_SIDE, text)


def speedup_interval(run: Sequence[RunAnalysis], base: Sequence[RunAnalysis]) -> SpeedupInterval | None:
    """The speedup's interval and how it was formed, or None when nothing bounds it."""
    unit = rate_unit(run, base)
    run_rates, base_rates = _rates(run, unit), _rates(base, unit)
    if len(run_rates) >= 2 and len(base_rates) >= 2:
        found = ratio_ci95(spread(run_rates), spread(base_rates))
        if found is None:
            return None
        low, high = found
        return SpeedupInterval(low, high, REPEATS, f"95 % CI {low:.2f}–{high:.2f}× over repeats")
    if len(run_rates) >= 2 and len(base) == 1:
        return _one_side(run, base[0], True, unit)
    if len(base_rates) >= 2 and len(run) == 1:
        return _one_side(base, run[0], False, unit)
    rates = [a.throughput for a in run], [a.throughput for a in base]
    found = within_run_speedup_ci95(*rates, in_steps=unit == "steps")
    if found is None:
        return None
    low, high = found
    return SpeedupInterval(low, high, WITHIN_RUN, f"within-run 95 % interval {low:.2f}–{high:.2f}×, from "
                           f"batch means; {SPREAD_NOT_MEASURED}")  # fmt: skip


def repeats_disagree(group: Sequence[RunAnalysis]) -> str:
    """'' when the group's runs agree (or it has one run), else what shows they do not."""
    unit = rate_unit(group)
    rated = [(a, r) for a in group if (r := _rate(a, unit))]
    if len(rated) < 2:
        return ""
    intervals = [(a, ci) for a, _ in rated if (ci := _ci95(a, unit)) is not None]
    if len(intervals) == len(rated):
        slow, slow_ci = min(intervals, key=lambda x: x[1][1])
        fast, fast_ci = max(intervals, key=lambda x: x[1][0])
        if fast_ci[0] <= slow_ci[1]:
            return ""
        f = ".1f" if unit == "examples" else ".3g"  # a job's steps/s may be well below 1
        return (f"repeats disagree: not the same conditions ({fast.run_id} {fast_ci[0]:{f}}–{fast_ci[1]:{f}} "
                f"{unit}/s, {slow.run_id} {slow_ci[0]:{f}}–{slow_ci[1]:{f}}: within-run 95 % intervals "
                "that do not overlap)")  # fmt: skip
    slow, low = min(rated, key=lambda x: x[1])
    fast, high = max(rated, key=lambda x: x[1])
    if high <= low * (1 + REPEATS_DISAGREE_FRACTION):
        return ""
    f = ".1f" if unit == "examples" else ".3g"
    return (f"repeats disagree: not the same conditions ({fast.run_id} {high:{f}} {unit}/s, {slow.run_id} "
            f"{low:{f}}: {high / low - 1:.0%} apart, > {REPEATS_DISAGREE_FRACTION:.0%})")  # fmt: skip
