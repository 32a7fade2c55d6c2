"""A system clock stepped mid-run (NTP stepping a VM's clock, a hand setting it). Set back, every row written
after the step is stamped earlier than the rows before it, so sorted by time the two stretches interleave (a
step log of thousands of "sessions", a GPU shared with itself, an energy counter that seems to reset); set
forward (or the machine asleep), the run seems paused, its budget overrun. A file written by one process
keeps the order it was written in, and each later stretch moves by the step, less one usual row interval,
so the whole run reads on one clock; the run's end times, written after the step, move with them
(`moved_ends`).

Only where the records show a clock, not the run, moved:
- back: a step log whose steps go on while its time goes back; a telemetry file whose time goes back at
  most MAX_CLOCK_STEPS times while a cumulative counter (an `_energy_j` column) goes on across each, or
  whose steps back match the run's step log's;
- forward: a telemetry gap the collector's own monotonic clock did not see (the row after it on time,
  `late_ms` under a row interval, no `skipped_ticks`), and the step log's gap as long at that place.
Rows out of order for another reason (shuffled, a file kept twice, pieces saved out of order, a session
resumed from an earlier checkpoint) are sorted, and a real pause stays a pause.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from runformat import TRAINING_CSV
from sizing.analysis.sessions import GAP_FACTOR, GAP_MIN_S, set_back

MAX_CLOCK_STEPS = 3  # a file whose time goes back more often than this is out of order, not stepped
COUNTER_SUFFIX = "_energy_j"  # a cumulative counter: it never goes back in the order its rows were taken
MATCH_SLACK_S, MATCH_SHARE = 1.0, 0.05  # one step seen in two files: within max(these) + a row interval


@dataclass(frozen=True)
class ClockSteps:
    """Where a file's clock was stepped: the first row on each new clock, how far that row and every later
    one moved (on: set back; back: set forward), and the file's usual row interval."""

    rows: tuple[int, ...]
    moved_s: tuple[float, ...]
    usual_s: float = 0.0

    @property
    def total_s(self) -> float:
        return float(sum(self.moved_s))

    def back(self) -> tuple[float, ...]:
        return tuple(m for m in self.moved_s if m > 0)

    def forward(self) -> tuple[float, ...]:
        return tuple(m for m in self.moved_s if m < 0)


def clock_steps(frame: pd.DataFrame, file: str, other: ClockSteps | None = None) -> ClockSteps | None:
    """The clock steps in a file's rows as written (time_unix finite in every row); None where it has none
    the records show (module docstring). `other`: the clock steps found in the run's other file (the step
    log's steps back, for its telemetry; the telemetry's steps forward, for its step log)."""
    times = frame["time_unix"].to_numpy(dtype=float)
    dt = np.diff(times)
    forward = dt[dt > 0]
    usual_s = float(np.median(forward)) if forward.size else 0.0
    back = [int(i) for i in np.flatnonzero(dt < 0)]
    gaps = [int(i) for i in np.flatnonzero(dt > max(GAP_MIN_S, GAP_FACTOR * usual_s))]
    if file == TRAINING_CSV:
        back = back if _steps_go_on(frame, times, back) else []
        ahead = other.forward() if other is not None else ()
        gaps = [i for i in gaps if _matches(usual_s - dt[i], ahead, usual_s)]
    else:
        kept = _in_order_taken(frame, back, usual_s - dt[back] if back else np.array([]), other)
        back = back if kept else []
        gaps = [i for i in gaps if _collector_on_time(frame, i + 1, usual_s)]
    found = sorted(back + gaps)
    if not found:
        return None
    return ClockSteps(tuple(i + 1 for i in found), tuple(float(usual_s - dt[i]) for i in found), usual_s)


def _steps_go_on(frame: pd.DataFrame, times: np.ndarray, back: list[int]) -> bool:
    """A step log's steps go on where its time goes back, and never go back themselves (a session resumed
    from an earlier checkpoint)."""
    if not back or "step" not in frame:
        return False
    steps = frame["step"].to_numpy(dtype=float)
    resumed = (np.diff(steps) < 0).any()
    return bool(np.isfinite(steps).all() and not resumed and set_back(times, steps)[back].all())


def _in_order_taken(
    frame: pd.DataFrame, back: list[int], moved: np.ndarray, step_log: ClockSteps | None
) -> bool:
    """A telemetry file's steps back are a clock's: at most MAX_CLOCK_STEPS, and a counter goes on across
    each or the step log went back as far."""
    if not back or len(back) > MAX_CLOCK_STEPS:
        return False
    if _counters_go_on(frame, tuple(i + 1 for i in back)):
        return True
    behind = step_log.back() if step_log is not None else ()
    return len(behind) == len(back) and all(
        _matches(m, behind, step_log.usual_s if step_log else 0.0) for m in moved
    )


def _counters_go_on(frame: pd.DataFrame, rows: tuple[int, ...]) -> bool:
    """A cumulative counter read on both sides of each step back never falls across it (in the order the
    rows were written); False without one."""
    read = False
    for column in (c for c in frame.columns if str(c).endswith(COUNTER_SUFFIX)):
        values = frame[column].to_numpy(dtype=float)
        for row in rows:
            before, after = values[:row][np.isfinite(values[:row])], values[row:][np.isfinite(values[row:])]
            if before.size and after.size:
                if after[0] < before[-1]:
                    return False
                read = True
    return read


def _collector_on_time(frame: pd.DataFrame, row: int, usual_s: float) -> bool:
    """The collector's row after a gap came on time by its own monotonic clock (no tick skipped, late by
    less than a row interval): the wall clock jumped, the collector did not wait."""
    if not {"late_ms", "skipped_ticks"} <= set(frame.columns):
        return False
    late_ms, skipped = (float(frame[c].iloc[row]) for c in ("late_ms", "skipped_ticks"))
    return bool(np.isfinite(late_ms) and np.isfinite(skipped) and skipped == 0 and late_ms < 1000 * usual_s)


def _matches(moved: float, others: tuple[float, ...], usual_s: float) -> bool:
    """One of `others` (another file's steps, of one sign) is this step, measured to within a row."""
    return any(
        abs(moved - other) <= max(MATCH_SLACK_S, MATCH_SHARE * abs(other)) + usual_s for other in others
    )


def on_one_clock(frame: pd.DataFrame, steps: ClockSteps) -> pd.DataFrame:
    """The frame with each row's time_unix (and elapsed_s, where it stepped with it) moved by the steps
    before it."""
    mended = frame.copy()
    shift = np.zeros(len(frame))
    for row, moved in zip(steps.rows, steps.moved_s, strict=True):
        shift[row:] += moved
    mended["time_unix"] = frame["time_unix"].to_numpy(dtype=float) + shift
    if "elapsed_s" in frame:  # derived from the wall clock (ours is): it stepped with it
        elapsed, times = frame["elapsed_s"].to_numpy(dtype=float), frame["time_unix"].to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            along = [abs((elapsed[r] - elapsed[r - 1]) - (times[r] - times[r - 1])) < 1.0 for r in steps.rows]
        if all(along):
            mended["elapsed_s"] = elapsed + shift
    return mended


def said(file: str, frame: pd.DataFrame, steps: ClockSteps) -> str:
    """'training.csv: time_unix goes back 100.0 s at step 4,360 while the rows go on: …'."""
    first = steps.rows[0]
    times = frame["time_unix"].to_numpy(dtype=float)
    where = f"step {frame['step'].iloc[first]:,.0f}" if file == TRAINING_CSV else f"row {first + 1:,}"
    more = f" (and {len(steps.rows) - 1} more time(s))" if len(steps.rows) > 1 else ""
    jump = times[first] - times[first - 1]
    if jump < 0:
        what = (
            f"time_unix goes back {-jump:,.1f} s at {where}{more} while the rows go on in the order "
            "written: the system clock was set back"
        )
    else:
        by = "the collector's own clock" if file != TRAINING_CSV else "the telemetry's collector"
        what = (
            f"time_unix jumps {jump:,.1f} s at {where}{more} where {by} saw no pause: the system clock "
            "was set forward (or the machine slept)"
        )
    how = "on" if steps.total_s >= 0 else "back"
    return f"{file}: {what}; the later rows moved {how} {abs(steps.total_s):,.1f} s to read on one clock"


def moved_ends(record: dict, moved_s: float, last_written_unix: float) -> dict:
    """A run.json or training.json whose end_unix, written after the clock was stepped, read on the rows'
    mended clock: where it lies nearer the file's last row as written than as mended (its start_unix came
    before: as it is)."""
    end = record.get("end_unix")
    if not moved_s or not isinstance(end, int | float) or isinstance(end, bool):
        return record
    if abs(end - last_written_unix) >= abs(end - (last_written_unix + moved_s)):
        return record  # stamped on the mended clock already (another tool's, or a monotonic end)
    return {**record, "end_unix": float(end) + moved_s}


def phases_on_one_clock(
    phases: pd.DataFrame, times: np.ndarray, steps: ClockSteps, earliest_unix: float | None
) -> pd.DataFrame:
    """phases.csv on the mended clock of the file whose times (as written) `steps` were found in. Each phase
    time belongs to the stretch of that file whose times (as written) it falls among: the first stretch
    reaches back to the run's earliest start, the last one on without end. One that two stretches could
    hold is read by what it is: an end came after the step, a start before it."""
    bounds = [0, *steps.rows, times.size]
    spans = [[float(times[a:b].min()), float(times[a:b].max())] for a, b in itertools.pairwise(bounds)]
    spans[0][0] = min(spans[0][0], earliest_unix) if earliest_unix is not None else -np.inf
    spans[-1][1] = np.inf
    dt = np.diff(times)
    slack_s = float(np.median(dt[dt > 0])) if (dt > 0).any() else 0.0
    moved = np.cumsum([0.0, *steps.moved_s])
    mended = phases.copy()
    for column in ("start_unix", "end_unix"):
        if column not in phases:
            continue
        values = pd.to_numeric(phases[column], errors="coerce").to_numpy(dtype=float)
        mended[column] = [
            value + moved[_stretch_of(value, spans, slack_s, column == "end_unix")] for value in values
        ]
    return mended


def _stretch_of(value: float, spans: list[list[float]], slack_s: float, late: bool) -> int:
    """The stretch a time stamped on its clock belongs to (the latest of several when `late`); the nearest
    where none holds it."""
    if not np.isfinite(value):
        return 0
    holding = [k for k, (low, high) in enumerate(spans) if low - slack_s <= value <= high + slack_s]
    if holding:
        return holding[-1] if late else holding[0]
    return int(np.argmin([min(abs(value - low), abs(value - high)) for low, high in spans]))
