"""GPU verdicts that read power and clocks as well as utilization.

NVML utilization is the share of time *a* kernel ran, not how much work was done: a GPU spinning in a
stalled collective reads 100 %. These rules add what real traces show, each with the numbers behind it:
at the power limit (a state, not a fault), busy but not computing, and the straggler of a multi-GPU job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sizing.model import Thresholds, number, values_of

POWER_LIMITED = "at its power limit (a state, not a fault)"
BUSY_NOT_COMPUTING = "busy but not computing"
HELD_BY_SETTING = "clocks or power held by a setting"
STRAGGLER = "straggler"
POWER_LIMIT_MARGIN = (
    0.05  # power within 5 % of the limit counts as at the limit (with the SM clock below max)
)
BUSY_UTIL_PCT = 80.0
NOT_COMPUTING_POWER_FRACTION = 0.35  # of the power limit
STRAGGLER_GAP_PCT = 30.0  # points of mean utilization below every other GPU
SW_POWER_CAP = 0x4
THERMAL_BITS = 0x20 | 0x40


@dataclass(frozen=True)
class GpuFinding:
    source: str  # gpu<i>
    label: str
    evidence: str
    numbers: dict[str, float | None] = field(default_factory=dict)
    primary: bool = False  # names the bottleneck instead of "GPU-bound" (or "GPU underused")


def power_limit_w(samples: pd.DataFrame, index: int, info: dict) -> np.ndarray | None:
    """The limit in force per sample: gpu<i>_power_limit_w, else run.json's power_limit_w for every sample."""
    limits = values_of(samples, f"gpu{index}_power_limit_w")
    if limits is not None:
        return limits
    fixed = number(info.get("power_limit_w"))
    return np.full(len(samples), fixed) if fixed else None


def max_sm_clock_mhz(samples: pd.DataFrame, index: int, info: dict) -> float | None:
    recorded = values_of(samples, f"gpu{index}_sm_clock_max_mhz")
    return float(np.nanmax(recorded)) if recorded is not None else number(info.get("sm_clock_max_mhz"))


def _mean(values: np.ndarray | None, where: np.ndarray | None = None) -> float | None:
    if values is None:
        return None
    chosen = values if where is None else values[where]
    chosen = chosen[np.isfinite(chosen)]
    return float(chosen.mean()) if chosen.size else None


def power_limited(samples: pd.DataFrame, index: int, info: dict, t: Thresholds) -> GpuFinding | None:
    """Samples with the SW power cap bit, or power within 5 % of the limit while the SM clock is below max."""
    gpu = f"gpu{index}"
    reasons = values_of(samples, f"{gpu}_throttle_reasons")
    power, limit = values_of(samples, f"{gpu}_power_w"), power_limit_w(samples, index, info)
    sm, sm_max = values_of(samples, f"{gpu}_sm_clock_mhz"), max_sm_clock_mhz(samples, index, info)
    rows = len(samples)
    known = np.zeros(rows, dtype=bool)
    capped = np.zeros(rows, dtype=bool)
    if reasons is not None:
        valid = np.isfinite(reasons)
        known |= valid
        capped |= valid & ((np.where(valid, reasons, 0).astype(np.int64) & SW_POWER_CAP) != 0)
    near = np.zeros(rows, dtype=bool)
    if power is not None and limit is not None:
        with np.errstate(invalid="ignore"):
            valid = np.isfinite(power) & np.isfinite(limit) & (limit > 0)
            near = valid & (power >= (1.0 - POWER_LIMIT_MARGIN) * limit)
            if sm is not None and sm_max:
                near &= np.isfinite(sm) & (sm < sm_max - 1.0)
        known |= valid
    flagged = capped | near
    if not known.any() or not flagged.any():
        return None
    fraction = float(flagged.sum() / known.sum())
    temps = values_of(samples, f"{gpu}_temp_c")
    thermal = reasons is not None and bool((np.nan_to_num(reasons).astype(np.int64) & THERMAL_BITS).any())
    numbers = {
        f"{gpu} power-limited fraction": fraction,
        f"{gpu} power-limited mean power w": _mean(power, flagged),
        f"{gpu} power limit w": _mean(limit),
        f"{gpu} power-limited mean sm clock mhz": _mean(sm, flagged),
        f"{gpu} max sm clock mhz": sm_max,
        f"{gpu} peak temp c": float(np.nanmax(temps)) if temps is not None else None,
    }
    how = [f"{int(capped.sum())} with the SW power cap bit"] if reasons is not None else []
    if power is not None and limit is not None:
        clock = f" with the SM clock below its {sm_max:.0f} MHz max" if sm is not None and sm_max else ""
        how.append(f"{int(near.sum())} within {POWER_LIMIT_MARGIN:.0%} of the limit{clock}")
    detail = ", ".join(
        f"{what} {_fmt(numbers[key], unit)}"
        for what, key, unit in (
            ("mean", f"{gpu} power-limited mean power w", " W"),
            ("of a", f"{gpu} power limit w", " W limit"),
            ("SM clock", f"{gpu} power-limited mean sm clock mhz", " MHz"),
            ("peak", f"{gpu} peak temp c", " °C"),
        )
        if numbers[key] is not None
    )
    heat = "thermal bits set too" if thermal else "no thermal bit, so not thermally throttled"
    evidence = (
        f"{gpu} at its power limit in {fraction:.0%} of samples ({'; '.join(how)}): {detail}; "
        f"a state, not a fault ({heat})"
    )
    label = POWER_LIMITED if fraction >= t.throttled_sample_fraction else ""
    return GpuFinding(gpu, label, evidence, numbers)


def busy_not_computing(samples: pd.DataFrame, index: int, info: dict) -> GpuFinding | None:
    """Mean utilization ≥ 80 % while mean power stays ≤ 35 % of the limit."""
    gpu = f"gpu{index}"
    util, power = values_of(samples, f"{gpu}_util_pct"), values_of(samples, f"{gpu}_power_w")
    limit = _mean(power_limit_w(samples, index, info))
    mean_util, mean_power = _mean(util), _mean(power)
    if mean_util is None or mean_power is None or not limit:
        return None
    if mean_util < BUSY_UTIL_PCT or mean_power > NOT_COMPUTING_POWER_FRACTION * limit:
        return None
    evidence = (
        f"{gpu} mean util {mean_util:.1f} % ≥ {BUSY_UTIL_PCT:g} % at a mean {mean_power:.0f} W, "
        f"{mean_power / limit:.0%} of its {limit:.0f} W limit (≤ {NOT_COMPUTING_POWER_FRACTION:.0%}): "
        "kernels resident but not computing (spinning on a stalled collective or a sync, or too small "
        "to fill the GPU), not a GPU-bound job"
    )
    numbers = {f"{gpu} mean power w": mean_power, f"{gpu} power of limit fraction": mean_power / limit}
    return GpuFinding(gpu, BUSY_NOT_COMPUTING, evidence, numbers, primary=True)


def straggler(samples: pd.DataFrame, gpus: Sequence[int], t: Thresholds) -> GpuFinding | None:
    """One GPU ≥ 30 points less busy than every other, while the others are busy (≥ the underused line)."""
    means = {i: m for i in gpus if (m := _mean(values_of(samples, f"gpu{i}_util_pct"))) is not None}
    if len(means) < 2:
        return None
    lowest = min(means, key=lambda i: means[i])
    others = {i: m for i, m in means.items() if i != lowest}
    if (
        min(others.values()) < t.gpu_underused_util_pct
        or min(others.values()) - means[lowest] < STRAGGLER_GAP_PCT
    ):
        return None
    gpu = f"gpu{lowest}"
    shown = ", ".join(f"gpu{i} {m:.0f} %" for i, m in others.items())
    evidence = (
        f"{gpu} mean util {means[lowest]:.1f} %, ≥ {STRAGGLER_GAP_PCT:g} points below every other GPU "
        f"({shown}): the others wait for it at each synchronisation"
    )
    numbers = {f"{gpu} mean util pct": means[lowest], "other gpus min util pct": min(others.values())}
    return GpuFinding(gpu, f"{STRAGGLER}: {gpu}", evidence, numbers, primary=True)


def held_by_setting(busy: GpuFinding | None, gpu: str, why: str) -> GpuFinding:
    """Clocks or power held low by a setting (analysis.gpu_state): what busy but not computing would have
    said is a setting's doing, not a stall."""
    if busy is None:
        return GpuFinding(gpu, HELD_BY_SETTING, f"{gpu} {why}", {})
    low = busy.evidence.split(": kernels resident")[0]
    evidence = f"{low}: {why}, not {BUSY_NOT_COMPUTING}"
    return GpuFinding(gpu, HELD_BY_SETTING, evidence, busy.numbers)


def gpu_findings(
    samples: pd.DataFrame, gpus: Sequence[int], gpu_info: Sequence[dict], t: Thresholds,
    held: Mapping[int, str] | None = None,
) -> list[GpuFinding]:  # fmt: skip
    """Every rule's findings for the GPUs charged to the run (straggler first: it explains the rest).
    `held`: per GPU index, why its clocks or power were held low by a setting: busy but not computing
    never fires for it."""
    if samples.empty:
        return []
    found: list[GpuFinding] = []
    if (late := straggler(samples, gpus, t)) is not None:
        found.append(late)
    for index in gpus:
        info = gpu_info[index] if index < len(gpu_info) and isinstance(gpu_info[index], dict) else {}
        busy = busy_not_computing(samples, index, info)
        if held and held.get(index):
            busy = held_by_setting(busy, f"gpu{index}", held[index])
        found += [f for f in (busy, power_limited(samples, index, info, t)) if f]
    return found


def _fmt(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:.0f}{unit}"
