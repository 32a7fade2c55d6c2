"""A system clock set back mid-run (NTP stepping a VM's clock, a hand setting it): every row written after the
step is stamped earlier than the rows before it, so sorted by time the two stretches interleave (a step log
of thousands of "sessions", a GPU shared with itself, an energy counter that seems to reset). A file written
by one process keeps the order it was written in, and each later stretch moves on by the step plus one usual
row interval, so the whole run reads on one clock; the run's end times, written after the step, move with
them (`moved_ends`).

Only where the order written is shown to be the order taken: a step log whose steps go on while its time
goes back; a telemetry file whose time goes back at most MAX_CLOCK_STEPS times while a cumulative counter
(an `_energy_j` column) goes on across each, or whose steps back match the run's step log's. Rows out of
order for another reason (shuffled, a file kept twice, pieces saved out of order, a session resumed from an
earlier checkpoint) are sorted, as before.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from runformat import TRAINING_CSV
from sizing.analysis.sessions import set_back

MAX_CLOCK_STEPS = 3  # a file whose time goes back more often than this is out of order, not stepped
COUNTER_SUFFIX = "_energy_j"  # a cumulative counter: it never goes back in the order its rows were taken
MATCH_SLACK_S, MATCH_SHARE = 1.0, 0.05  # a telemetry step back is the step log's within max(these) + a row


@dataclass(frozen=True)
class ClockSteps:
    """Where a file's clock was set back: the first row on each new clock, how far on that row and every
    later one moved, and the file's usual row interval."""

    rows: tuple[int, ...]
    moved_s: tuple[float, ...]
    usual_s: float = 0.0

    @property
    def total_s(self) -> float:
        return float(sum(self.moved_s))


def clock_steps(frame: pd.DataFrame, file: str, step_log: ClockSteps | None = None) -> ClockSteps | None:
    """The clock steps back in a file's rows as written (time_unix finite in every row); None where its
    time never goes back, or nothing shows the order written to be the order taken (module docstring).
    `step_log`: the clock steps of the same run's training.csv, for its telemetry."""
    times = frame["time_unix"].to_numpy(dtype=float)
    dt = np.diff(times)
    back = np.flatnonzero(dt < 0)
    if back.size == 0:
        return None
    forward = dt[dt > 0]
    usual_s = float(np.median(forward)) if forward.size else 0.0
    found = ClockSteps(tuple(int(i) + 1 for i in back), tuple(float(-dt[i]) + usual_s for i in back), usual_s)
    if file == TRAINING_CSV:
        if "step" not in frame:
            return None
        steps = frame["step"].to_numpy(dtype=float)
        resumed = (np.diff(steps) < 0).any()  # a session resumed from an earlier checkpoint
        if not np.isfinite(steps).all() or resumed or not set_back(times, steps)[back].all():
            return None
        return found
    if back.size > MAX_CLOCK_STEPS:
        return None
    return found if _counters_go_on(frame, found.rows) or _same_steps(found, step_log) else None


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


def _same_steps(found: ClockSteps, step_log: ClockSteps | None) -> bool:
    """Each step back is the step log's, as far back as it (each file measures it to within a row)."""
    if step_log is None or len(step_log.moved_s) != len(found.moved_s):
        return False
    slack = [max(MATCH_SLACK_S, MATCH_SHARE * moved) + step_log.usual_s for moved in step_log.moved_s]
    return all(abs(a - b) <= s for a, b, s in zip(found.moved_s, step_log.moved_s, slack, strict=True))


def on_one_clock(frame: pd.DataFrame, steps: ClockSteps) -> pd.DataFrame:
    """The frame with each row's time_unix (and elapsed_s, where it went back with it) moved on by the steps
    before it."""
    mended = frame.copy()
    shift = np.zeros(len(frame))
    for row, moved in zip(steps.rows, steps.moved_s, strict=True):
        shift[row:] += moved
    mended["time_unix"] = frame["time_unix"].to_numpy(dtype=float) + shift
    if "elapsed_s" in frame:
        elapsed = frame["elapsed_s"].to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            stepped = np.array([row > 0 and elapsed[row] < elapsed[row - 1] for row in steps.rows])
        if stepped.all():
            mended["elapsed_s"] = elapsed + shift
    return mended


def said(file: str, frame: pd.DataFrame, steps: ClockSteps) -> str:
    """'training.csv: time_unix goes back 100.0 s at step 4,360 while the rows go on: …'."""
    first = steps.rows[0]
    times = frame["time_unix"].to_numpy(dtype=float)
    where = f"step {frame['step'].iloc[first]:,.0f}" if file == TRAINING_CSV else f"row {first + 1:,}"
    more = f" (and {len(steps.rows) - 1} more time(s))" if len(steps.rows) > 1 else ""
    return (
        f"{file}: time_unix goes back {times[first - 1] - times[first]:,.1f} s at {where}{more} while the "
        f"rows go on in the order written: the system clock was set back; the later rows moved on "
        f"{steps.total_s:,.1f} s to read on one clock"
    )


def moved_ends(record: dict, moved_s: float) -> dict:
    """A run.json or training.json whose end_unix, written after the clock was set back, read on the rows'
    mended clock (its start_unix came before: as it is)."""
    end = record.get("end_unix")
    if not moved_s or not isinstance(end, int | float) or isinstance(end, bool):
        return record
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
