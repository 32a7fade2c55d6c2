"""The settings that hold a GPU below what it can do, as gpu_state reads them: a power cap below the
board's default, applications or locked clocks, and clocks with no reason to be low (NVML names none only
at the highest clocks a board can run).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sizing.analysis import peaks
from sizing.analysis.gpu_verdicts import SW_POWER_CAP, max_sm_clock_mhz
from sizing.model import Thresholds, number, values_of

CLOCK_SETTING_BIT = 0x2  # NVML: clocks limited by the applications clocks or locked clocks setting
POWER_CAP_MARGIN_W = 1.0  # a limit this far below the board's own default (gpu_state) is a cap
TABLE_POWER_MARGIN = 0.10  # without it, a limit this share below the model's datasheet board power
CLOCK_MARGIN_MHZ = 1.0  # an applications clock this far below its default is held
UNEXPLAINED_CLOCK_FRACTION = 0.75  # busy with no clocks-event reason this far below its max: a setting


def entries(value: object) -> list[dict]:
    """A gpu_state list's objects (anything else reads as no entry)."""
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def entry_of(value: object, index: int) -> dict:
    """The entry of a gpu_state list (`start`, `end`, `before_training`) for the GPU at `index`, or {}."""
    return next((e for e in entries(value) if number(e.get("index")) == index), {})


def _busy(samples: pd.DataFrame, index: int) -> np.ndarray:
    """Samples in which the GPU ran a kernel (all samples where utilization is not recorded)."""
    util = values_of(samples, f"gpu{index}_util_pct")
    return np.ones(len(samples), dtype=bool) if util is None else np.nan_to_num(util) > 0


def bit_fraction(samples: pd.DataFrame, index: int, bit: int) -> tuple[float | None, np.ndarray]:
    """The share of busy samples (with a clocks-event reading) that have `bit` set, and those samples."""
    reasons = values_of(samples, f"gpu{index}_throttle_reasons")
    if reasons is None:
        return None, np.zeros(len(samples), dtype=bool)
    read = _busy(samples, index) & np.isfinite(reasons)
    flagged = read & ((np.nan_to_num(reasons).astype(np.int64) & bit) != 0)
    return (float(flagged.sum() / read.sum()) if read.any() else None), flagged


def clock_setting_samples(
    samples: pd.DataFrame, index: int, gpu: dict
) -> tuple[float | None, np.ndarray, str]:
    """Busy samples whose clocks a setting holds: the clocks-event bit 0x2 (applications or locked clocks),
    or no reason at all (NVML: clocks as high as possible) with the SM clock ≤ UNEXPLAINED_CLOCK_FRACTION
    of its max. Their share of the busy samples with a reading, those samples, and how they were told."""
    fraction, flagged = bit_fraction(samples, index, CLOCK_SETTING_BIT)
    reasons, sm = (
        values_of(samples, f"gpu{index}_throttle_reasons"),
        values_of(samples, f"gpu{index}_sm_clock_mhz"),
    )
    sm_max = max_sm_clock_mhz(samples, index, gpu)
    if fraction is None or reasons is None or sm is None or not sm_max:
        return fraction, flagged, f"{int(flagged.sum())} with clocks-event bit 0x2"
    read = _busy(samples, index) & np.isfinite(reasons)
    with np.errstate(invalid="ignore"):
        unexplained = read & (reasons == 0) & (sm <= UNEXPLAINED_CLOCK_FRACTION * sm_max)
    how = f"{int(flagged.sum())} with clocks-event bit 0x2"
    if unexplained.any():
        how += (f", {int(unexplained.sum())} with no clocks-event reason at an SM clock ≤ "
                f"{UNEXPLAINED_CLOCK_FRACTION:.0%} of its max")  # fmt: skip
    held = flagged | unexplained
    return float(held.sum() / read.sum()), held, how


def power_cap(
    state: dict, samples: pd.DataFrame, gpu: dict, index: int
) -> tuple[float | None, float | None, str]:
    """The lowest limit the run records (telemetry's median over the training, gpu_state's at start and
    end, run.json's), the board's default (gpu_state, else the GPU model's board power in analysis.peaks)
    and where the default came from."""
    start = entry_of(state.get("start"), index)
    end = entry_of(state.get("end"), index)
    limits = values_of(samples, f"gpu{index}_power_limit_w")
    recorded = [
        float(np.nanmedian(limits)) if limits is not None else None,
        number(start.get("power_limit_w")),
        number(end.get("power_limit_w")),
        number(gpu.get("power_limit_w")),
    ]
    limit = min((w for w in recorded if w is not None and w > 0), default=None)
    default = number(start.get("power_limit_default_w")) or number(end.get("power_limit_default_w"))
    if default is not None:
        return limit, default, "its default (gpu_state)"
    entry = peaks.gpu_peaks(gpu.get("name"))
    if entry is None or entry.board_power_w is None:
        return limit, None, ""
    source = f"the {entry.model}'s lowest default board power (sizing/analysis/peaks.py)"
    return limit, entry.board_power_w, source


def settings_of(
    state: dict, samples: pd.DataFrame, gpu: dict, index: int, t: Thresholds
) -> tuple[float | None, list[str], list[str], str]:
    """(power cap W or None, clocks-held evidence, evidence of every setting, why held low or '')."""
    evidence, clocks, held = [], [], []
    limit, default, whence = power_cap(state, samples, gpu, index)
    # the board's own default (gpu_state), or a model's datasheet figure: only a limit well below it is a cap
    below = POWER_CAP_MARGIN_W if "gpu_state" in whence else TABLE_POWER_MARGIN * (default or 0.0)
    cap = limit if limit is not None and default is not None and limit < default - below else None
    capped_fraction, _ = bit_fraction(samples, index, SW_POWER_CAP)
    if cap is not None:
        evidence.append(f"power limit {cap:.0f} W, below {whence} {default:.0f} W")
        if capped_fraction is not None and capped_fraction >= t.throttled_sample_fraction:
            held.append(
                f"power capped at {cap:.0f} W (SW power cap bit in {capped_fraction:.0%} of busy samples)"
            )
    start = entry_of(state.get("start"), index)
    for what, now, default_mhz in (
        ("SM", number(start.get("applications_clock_sm_mhz")),
         number(start.get("default_applications_clock_sm_mhz"))),
        ("memory", number(start.get("applications_clock_mem_mhz")),
         number(start.get("default_applications_clock_mem_mhz"))),
    ):  # fmt: skip
        if now is not None and default_mhz is not None and now < default_mhz - CLOCK_MARGIN_MHZ:
            clocks.append(
                f"applications clock ({what}) {now:.0f} MHz, below its default {default_mhz:.0f} MHz"
            )
    held += clocks
    fraction, flagged, how = clock_setting_samples(samples, index, gpu)
    if fraction is not None and fraction >= t.throttled_sample_fraction:
        sm = values_of(samples, f"gpu{index}_sm_clock_mhz")
        sm_max = max_sm_clock_mhz(samples, index, gpu)
        held_mhz = (
            float(np.nanmean(sm[flagged])) if sm is not None and np.isfinite(sm[flagged]).any() else None
        )
        clock = f", SM clock {held_mhz:.0f} MHz" if held_mhz is not None else ""
        of_max = f" of its {sm_max:.0f} MHz max" if held_mhz is not None and sm_max else ""
        line = (f"clocks held by a setting in {fraction:.0%} of busy samples ≥ "
                f"{t.throttled_sample_fraction:.0%} ({how}{clock}{of_max})")  # fmt: skip
        clocks.append(line)
        if held_mhz is None or not sm_max or held_mhz < sm_max - CLOCK_MARGIN_MHZ:
            held.append(line)
    return cap, clocks, evidence + clocks, "; ".join(held)


# The gpu_state fields whose change during the training makes its rate a blend of two settings.
CHANGED_FIELDS = {
    "power_limit_w": ("power limit", " W"),
    "applications_clock_sm_mhz": ("SM applications clock", " MHz"),
    "applications_clock_mem_mhz": ("memory applications clock", " MHz"),
    "mig_mode": ("MIG mode", ""),
}


def _shown(value: object, unit: str) -> str:
    amount = number(value)
    return f"{amount:g}{unit}" if amount is not None else str(value)


def setting_changes(
    state: dict, samples: pd.DataFrame, index: int, window: tuple[float, float] | None
) -> list[str]:
    """The settings of GPU `index` that changed inside the training window: gpu_state's `changes` (a field
    known before, then another value), else its power limit column in telemetry going from one value to
    another by more than POWER_CAP_MARGIN_W ('power limit 700 W → 300 W 45 s into the training')."""
    if window is None:
        return []
    found = []
    for change in entries(state.get("changes")):
        field, when = change.get("field"), number(change.get("time_unix"))
        if number(change.get("index")) != index or field not in CHANGED_FIELDS or change.get("from") is None:
            continue
        if when is not None and window[0] <= when <= window[1]:
            name, unit = CHANGED_FIELDS[str(field)]
            before, after = _shown(change.get("from"), unit), _shown(change.get("to"), unit)
            found.append(f"{name} {before} → {after} {when - window[0]:,.0f} s into the training")
    limits = values_of(samples, f"gpu{index}_power_limit_w")
    if not any(line.startswith("power limit") for line in found) and limits is not None:
        read = limits[np.isfinite(limits)]
        if read.size and abs(float(read[-1]) - float(read[0])) > POWER_CAP_MARGIN_W:
            found.append(f"power limit {read[0]:g} W → {read[-1]:g} W during the training (telemetry)")
    return found
