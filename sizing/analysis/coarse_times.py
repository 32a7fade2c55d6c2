"""A CSV whose time_unix was rounded (a spreadsheet saved it: `1795518531` for 1795518530.554553) while its
elapsed_s kept the rows apart: its times rebuilt from elapsed_s, so rows are not merged or dropped as one
time.

Our collector and training write time_unix = start_unix + elapsed_s (run.json's start for telemetry.csv,
training.json's for training.csv), so with that start the rebuilt times are the written ones; without it,
or where it does not fit, each session's offset is the median of time_unix − elapsed_s, off by at most half
the rounding.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from runformat import TRAINING_CSV, TRAINING_JSON
from runformat.records import LAST_UNIX_S
from sizing.model import number

FINEST_STEP_EXPONENT = -3  # times that are multiples of 1 ms or finer are taken as written
COARSEST_STEP_EXPONENT = 6
MAX_GUESSED_STEP_S = 10.0  # coarser rounding and no start that fits: the rows cannot be placed in time
UNREADABLE_FIT_S = 1.0  # the readable rows' median distance from start_unix + elapsed_s, for the rest
ZONE_STEP_S = 900.0  # UTC offsets are whole quarter hours
MAX_ZONE_OFFSET_S = 14 * 3600.0  # … from −12 h to +14 h
ZONE_FIT_SLACK_S = 60.0  # a step log without elapsed_s fits its training's span within this either side
FINER_UNITS = ((1e3, "milliseconds"), (1e6, "microseconds"), (1e9, "nanoseconds"))


def rounding_step_s(times: np.ndarray) -> float | None:
    """The coarsest power of ten (1 ms … 10⁶ s) every time is a multiple of; None when finer."""
    for exponent in range(COARSEST_STEP_EXPONENT, FINEST_STEP_EXPONENT - 1, -1):
        step = 10.0**exponent
        if np.all(np.abs(times - np.round(times / step) * step) < min(1e-3 * step, 1e-3)):
            return step
    return None


def times_from_elapsed(
    frame: pd.DataFrame, file: str, start_unix: float | None
) -> tuple[pd.DataFrame, str | None]:
    """The frame with time_unix rebuilt from elapsed_s where time_unix repeats while elapsed_s moves on and
    is rounded to a power of ten, and the warning that says so; a frame of no rows where the rounding is
    coarser than MAX_GUESSED_STEP_S and no start fits. Otherwise the frame as it is."""
    if "elapsed_s" not in frame or "time_unix" not in frame or len(frame) < 2:
        return frame, None
    times = frame["time_unix"].to_numpy(dtype=float)
    elapsed = frame["elapsed_s"].to_numpy(dtype=float)
    if not np.isfinite(elapsed).all():
        return frame, None
    merged = (np.diff(times) == 0) & (np.diff(elapsed) > 0)
    step = rounding_step_s(times) if merged.any() else None
    if step is None:
        return frame, None
    rebuilt = np.empty_like(times)
    anchored = True
    starts = [0, *(np.flatnonzero(np.diff(elapsed) < 0) + 1), len(times)]  # a resumed session starts again
    for first, end in itertools.pairwise(starts):
        offset, fits = _offset(times[first:end], elapsed[first:end], step, start_unix)
        anchored = anchored and fits
        rebuilt[first:end] = offset + elapsed[first:end]
    shared = int(merged.sum())
    rounded = f"{file}: time_unix is rounded to {step:,.0f} s ({shared:,} rows share the one before's)"
    if not anchored and step > MAX_GUESSED_STEP_S:
        return frame.iloc[0:0], f"{rounded}, and no start_unix fits it: its rows cannot be placed: not read"
    fixed = frame.copy()
    fixed["time_unix"] = rebuilt
    how = "and its start_unix" if anchored else f"(each session's offset within {step / 2:g} s)"
    return fixed, f"{rounded}: saved by a spreadsheet? Rebuilt from elapsed_s {how}"


def _offset(times: np.ndarray, elapsed: np.ndarray, step: float, start: float | None) -> tuple[float, bool]:
    """time_unix − elapsed_s of one session: the recorded start where every row rounds to it, else the
    median."""
    if start is not None and np.all(np.abs(start + elapsed - times) <= step / 2 + 1e-3):
        return start, True
    return float(np.median(times - elapsed)), False


def times_in_finer_units(
    frame: pd.DataFrame, file: str, start_unix: float | None, records: str
) -> tuple[pd.DataFrame, str | None]:
    """The frame with a time_unix written in milliseconds, microseconds or nanoseconds since 1970 (every
    readable cell past the year 9999) read in seconds, where that scale puts its rows on the recorded
    start_unix + elapsed_s (median within UNREADABLE_FIT_S); and the warning. Otherwise the frame as it is.
    `records`: the file whose start_unix it is."""
    if start_unix is None or "elapsed_s" not in frame or "time_unix" not in frame:
        return frame, None
    times = frame["time_unix"].to_numpy(dtype=float)
    elapsed = frame["elapsed_s"].to_numpy(dtype=float)
    both = np.isfinite(times) & np.isfinite(elapsed)
    if not both.any() or (times[np.isfinite(times)] <= LAST_UNIX_S).any():
        return frame, None
    for scale, unit in FINER_UNITS:
        if np.median(np.abs(times[both] / scale - (start_unix + elapsed[both]))) <= UNREADABLE_FIT_S:
            fixed = frame.copy()
            fixed["time_unix"] = times / scale
            return fixed, (
                f"{file}: time_unix is in {unit} since 1970 (it fits {records}'s start_unix + elapsed_s): "
                "read in seconds"
            )
    return frame, None


def times_from_start(
    frame: pd.DataFrame, file: str, start_unix: float | None, records: str
) -> tuple[pd.DataFrame, str | None]:
    """The frame with each time_unix that reads as no number (a date a spreadsheet or another tool wrote
    there, a damaged cell) rebuilt as start_unix + elapsed_s, where every such row has an elapsed_s, elapsed_s
    never goes back (one session) and the readable rows fit that start (within UNREADABLE_FIT_S); and the
    warning. `records`: the file whose start_unix it is. Otherwise the frame as it is."""
    if start_unix is None or "elapsed_s" not in frame or "time_unix" not in frame:
        return frame, None
    times = frame["time_unix"].to_numpy(dtype=float)
    elapsed = frame["elapsed_s"].to_numpy(dtype=float)
    unreadable = ~np.isfinite(times)
    if not unreadable.any() or not np.isfinite(elapsed[unreadable]).all():
        return frame, None
    if (np.diff(elapsed[np.isfinite(elapsed)]) < 0).any():
        return frame, None  # a session resumed: its elapsed_s counts from its own start
    readable = ~unreadable & np.isfinite(elapsed)
    if (
        readable.any()
        and np.median(np.abs(times[readable] - (start_unix + elapsed[readable]))) > UNREADABLE_FIT_S
    ):
        return frame, None
    fixed = frame.copy()
    fixed["time_unix"] = np.where(unreadable, start_unix + elapsed, times)
    return fixed, (
        f"{file}: {int(unreadable.sum()):,} time_unix cell(s) read as no number (dates? seconds since 1970 "
        f"belong there): rebuilt from elapsed_s and {records}'s start_unix"
    )


def times_in_another_zone(
    frame: pd.DataFrame, file: str, start_unix: float | None, records: str
) -> tuple[pd.DataFrame, str | None]:
    """The frame with time_unix moved by a whole number of quarter hours (at most MAX_ZONE_OFFSET_S) where
    its first session's time_unix − elapsed_s is the recorded start_unix off by exactly that, within
    UNREADABLE_FIT_S (a clock read as local time: `datetime.utcnow().timestamp()`); and the warning.
    Otherwise the frame as it is. `records`: the file whose start_unix it is."""
    if start_unix is None or "elapsed_s" not in frame or "time_unix" not in frame or frame.empty:
        return frame, None
    times = frame["time_unix"].to_numpy(dtype=float)
    elapsed = frame["elapsed_s"].to_numpy(dtype=float)
    went_back = np.flatnonzero(np.diff(elapsed) < 0)
    first = slice(0, int(went_back[0]) + 1 if went_back.size else len(times))  # a resumed session restarts
    offsets = (times - elapsed)[first]
    offsets = offsets[np.isfinite(offsets)]
    if offsets.size == 0 or np.ptp(offsets) > UNREADABLE_FIT_S:
        return frame, None
    off = float(np.median(offsets)) - start_unix
    zone = round(off / ZONE_STEP_S) * ZONE_STEP_S
    if zone == 0 or abs(zone) > MAX_ZONE_OFFSET_S or abs(off - zone) > UNREADABLE_FIT_S:
        return frame, None
    fixed = frame.copy()
    fixed["time_unix"] = times - zone
    hours = f"{abs(zone) / 3600:g} h {'ahead of' if zone > 0 else 'behind'}"
    moved = f"moved {'back' if zone > 0 else 'on'} {abs(zone):,.0f} s"
    return fixed, (
        f"{file}: time_unix is {hours} {records}'s start_unix + elapsed_s, to the second (a clock read as "
        f"local time: datetime.utcnow().timestamp()?): {moved}"
    )


def step_log_in_another_zone(training: pd.DataFrame, training_info: dict) -> tuple[pd.DataFrame, str | None]:
    """A step log without elapsed_s (so times_in_another_zone cannot tell) moved by a whole number of
    quarter hours (at most MAX_ZONE_OFFSET_S) where every row lies outside the training its training.json
    bounds (start_unix to end_unix, ZONE_FIT_SLACK_S either side) and exactly one such move places every row
    inside it (a clock read as local time); and the warning. Otherwise the log as it is."""
    start, end = (number(training_info.get(key)) for key in ("start_unix", "end_unix"))
    if start is None or end is None or end <= start or "elapsed_s" in training or "time_unix" not in training:
        return training, None
    times = training["time_unix"].to_numpy(dtype=float)
    times = times[np.isfinite(times)]
    low, high = start - ZONE_FIT_SLACK_S, end + ZONE_FIT_SLACK_S
    if times.size == 0 or ((times >= low) & (times <= high)).any():
        return training, None
    reach = int(MAX_ZONE_OFFSET_S // ZONE_STEP_S)
    fits = [k * ZONE_STEP_S for k in range(-reach, reach + 1) if k]
    fits = [z for z in fits if times.min() - z >= low and times.max() - z <= high]
    if len(fits) != 1:
        return training, None
    zone = fits[0]
    moved = training.copy()
    moved["time_unix"] = training["time_unix"] - zone
    hours = f"{abs(zone) / 3600:g} h {'after' if zone > 0 else 'before'}"
    way = "back" if zone > 0 else "on"
    return moved, (
        f"{TRAINING_CSV}: every time_unix lies {hours} the training ({TRAINING_JSON}'s start_unix to "
        f"end_unix), and no other whole number of quarter hours places it inside (a clock read as local "
        f"time?): moved {way} {abs(zone):,.0f} s"
    )
