"""The x axis of every time figure: a run's clock as seconds (or % of runtime) since run.json's start.

Each frame's clock is computed once per version of the frame; series are cut to the visible window and
downsampled server-side with MinMaxLTTB (tsdownsample) to at most `max_points` points.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from tsdownsample import MinMaxLTTBDownsampler

from dashboard.runs import RunInfo

MAX_POINTS = 2000
X_SECONDS = "seconds"
X_PERCENT = "percent"
FULL_WINDOW = (0.0, 100.0)
_DOWNSAMPLER = MinMaxLTTBDownsampler()


@dataclass(frozen=True)
class TimeBase:
    """How a run's clock maps to the x axis: seconds since `origin_unix`; `span_s` is 100 %."""

    origin_unix: float
    span_s: float

    def x(self, time_unix: np.ndarray, mode: str) -> np.ndarray:
        seconds = time_unix - self.origin_unix
        return seconds * (100.0 / self.span_s) if mode == X_PERCENT else seconds

    def window_s(self, window: tuple[float, float]) -> tuple[float, float]:
        """The window in seconds; the full window is unbounded, so nothing outside 0–100 % is hidden."""
        low, high = window
        low_s = -np.inf if low <= 0 else low * self.span_s / 100.0
        high_s = np.inf if high >= 100 else high * self.span_s / 100.0
        return low_s, high_s


@dataclass(frozen=True)
class TimeView:
    """What part of each run a time figure shows and how: the x axis (seconds or % of runtime), the window
    (% of runtime), a zoom (x_range, in the x axis's unit) and the most points one line keeps."""

    x_mode: str = X_SECONDS
    window: tuple[float, float] = FULL_WINDOW
    x_range: tuple[float, float] | None = None
    max_points: int = MAX_POINTS

    def bounds_s(self, base: TimeBase) -> tuple[float, float]:
        """The shown part of a run in seconds since its origin: the window, narrowed to x_range if any."""
        low_s, high_s = base.window_s(self.window)
        if self.x_range is not None:
            scale = base.span_s / 100.0 if self.x_mode == X_PERCENT else 1.0
            low_s, high_s = max(low_s, self.x_range[0] * scale), min(high_s, self.x_range[1] * scale)
        return low_s, high_s


WHOLE_RUN = TimeView()


def time_base(run: RunInfo, time_unix: np.ndarray) -> TimeBase:
    """Origin: run.json's start (all files align on it); 100 %: the run's duration, else its last sample."""
    first = float(time_unix[0]) if len(time_unix) else 0.0
    origin = run.start_unix if run.start_unix is not None else first
    span = run.duration_s
    if not span or span <= 0:
        last = float(np.nanmax(time_unix)) - origin if len(time_unix) else 0.0
        span = last if last > 0 else 1.0
    return TimeBase(origin, span)


def downsample(x: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most `max_points` points that keep the shape (minima, maxima) of y(x); missing readings dropped."""
    keep = np.isfinite(y) & np.isfinite(x)
    if not keep.all():
        x, y = x[keep], y[keep]
    if len(x) > 1 and np.any(np.diff(x) < 0):
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    if len(x) <= max_points:
        return x, y
    index = _DOWNSAMPLER.downsample(np.ascontiguousarray(x), np.ascontiguousarray(y), n_out=max_points)
    return x[index], y[index]


def visible_slice(x_seconds: np.ndarray, low_s: float, high_s: float) -> slice:
    """Rows whose x lies in [low_s, high_s] plus one neighbour each side, so lines reach the edges.

    Nothing when every row lies on one side of the range (a zoom past the end of a run).
    """
    first_inside = int(np.searchsorted(x_seconds, low_s, side="left"))
    past_inside = int(np.searchsorted(x_seconds, high_s, side="right"))
    if first_inside >= len(x_seconds) or past_inside == 0:
        return slice(0, 0)
    return slice(max(first_inside - 1, 0), min(past_inside + 1, len(x_seconds)))


@dataclass(frozen=True)
class Clock:
    """A frame's rows in time order as seconds since the run's origin; `order` is None when already sorted."""

    base: TimeBase
    seconds: np.ndarray
    order: np.ndarray | None

    def values(self, frame: pd.DataFrame, column: str) -> np.ndarray:
        values = frame[column].to_numpy(dtype=np.float64)
        return values if self.order is None else values[self.order]


_CLOCKS: OrderedDict[tuple, Clock] = OrderedDict()
_CLOCKS_KEPT = 32
_CLOCKS_LOCK = threading.Lock()


def clock_of(run: RunInfo, frame: pd.DataFrame) -> Clock | None:
    """The frame's clock, computed once per version of the frame (a 24 h run has 864k rows)."""
    if frame.empty or "time_unix" not in frame:
        return None
    times = frame["time_unix"].to_numpy(dtype=np.float64)
    key = (
        str(run.path),
        run.start_unix,
        run.duration_s,
        len(times),
        times[0],
        times[-1],
        times.__array_interface__["data"][0],
    )
    with _CLOCKS_LOCK:
        cached = _CLOCKS.get(key)
        if cached is not None:
            _CLOCKS.move_to_end(key)
            return cached
    clock = _make_clock(run, times)
    with _CLOCKS_LOCK:
        _CLOCKS[key] = clock
        while len(_CLOCKS) > _CLOCKS_KEPT:
            _CLOCKS.popitem(last=False)
    return clock


def _make_clock(run: RunInfo, times: np.ndarray) -> Clock:
    base = time_base(run, times)
    seconds = times - base.origin_unix
    order = None
    if not (np.isfinite(seconds).all() and np.all(seconds[1:] >= seconds[:-1])):
        finite = np.flatnonzero(np.isfinite(seconds))
        order = finite[np.argsort(seconds[finite], kind="stable")]
        seconds = seconds[order]
    return Clock(base, seconds, order)


def series_xy(
    run: RunInfo, frame: pd.DataFrame, column: str, view: TimeView = WHOLE_RUN
) -> tuple[np.ndarray, np.ndarray]:
    """x (seconds or %) and y of `column`, cut to the view's window and x_range, downsampled."""
    clock = clock_of(run, frame) if column in frame else None
    if clock is None:
        return np.empty(0), np.empty(0)
    base = clock.base
    rows = visible_slice(clock.seconds, *view.bounds_s(base))
    x, y = downsample(clock.seconds[rows], clock.values(frame, column)[rows], view.max_points)
    return (x * (100.0 / base.span_s) if view.x_mode == X_PERCENT else x), y


_X_RANGE = re.compile(r"(xaxis\d*)\.range(\[0\])?")


def zoom_range(relayout: dict[str, Any] | None) -> tuple[float, float] | None:
    """The x range a user zoomed to in a graph, any subplot's x axis (None after a reset or other events)."""
    if not relayout:
        return None
    for key in relayout:
        match = _X_RANGE.fullmatch(key)
        if not match:
            continue
        axis = match.group(1)
        if match.group(2):
            low, high = relayout.get(f"{axis}.range[0]"), relayout.get(f"{axis}.range[1]")
        elif isinstance(relayout[key], list) and len(relayout[key]) == 2:
            low, high = relayout[key]
        else:
            continue
        try:
            low, high = float(low), float(high)
        except (TypeError, ValueError):
            return None
        return (low, high) if low < high else None
    return None


def changes_x_range(relayout: dict[str, Any]) -> bool:
    """True for a zoom or a reset of an x axis; legend clicks, pans of y and the like change nothing here."""
    return zoom_range(relayout) is not None or any(
        re.fullmatch(r"xaxis\d*\.autorange", key) for key in relayout
    )


def window_of(value: Sequence[float] | None) -> tuple[float, float]:
    """The percent-of-runtime window from the range slider, clamped to [0, 100]."""
    if not value or len(value) != 2:
        return FULL_WINDOW
    low, high = sorted(min(max(float(v), 0.0), 100.0) for v in value)
    return (low, high) if high > low else FULL_WINDOW
