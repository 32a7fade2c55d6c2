"""The span a run's verdict is judged over when its telemetry comes from recordings of different spans.

A run merged from several recordings (a sysstat day file and the job's nvidia-smi log, docs/run-format.md)
has rows where only one of them has readings. The verdict's means are taken over the span its column
families share (CPU columns, GPU columns; each family's span from its own non-empty rows), so the CPU
is never averaged over six hours while the GPU is averaged over the job's one. What the run does not say
about time (an assumed UTC offset) is a caveat.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from runformat.columns import (
    CPU_IOWAIT_PCT,
    CPU_STEAL_PCT,
    CPU_UTIL_PCT,
    DISK_UTIL_PCT,
    PROC_BUSIEST_THREAD_PCT,
    PROC_CPU_PCT,
    UTIL_PCT,
    cpu_pattern,
)
from sizing.model import gpu_indices, times_of, train_windows

HOST_TOTALS = (
    CPU_UTIL_PCT,
    CPU_IOWAIT_PCT,
    CPU_STEAL_PCT,
    DISK_UTIL_PCT,
    PROC_CPU_PCT,
    PROC_BUSIEST_THREAD_PCT,
)
HOST_COLUMN = re.compile("^(?:" + "|".join([cpu_pattern(UTIL_PCT), *HOST_TOTALS]) + ")$")
SHORT_SPAN_FRACTION = 0.9  # a shared span below this share of the window it cuts is said as a caveat
COLLECTOR = "this workbench's collector"
ASSUMED_OFFSET = "UTC offset assumed"


@dataclass(frozen=True)
class FamilySpan:
    family: str  # "CPU" or "GPU"
    source: str  # the recording its columns came from ("sysstat", "nvidia-smi", COLLECTOR, ...)
    start_unix: float
    end_unix: float
    interval_s: float | None  # the median spacing of its rows

    def text(self) -> str:
        every = f", every {self.interval_s:.3g} s" if self.interval_s else ""
        return f"{self.family} ({self.source}{every}, {_span_clock(self.start_unix, self.end_unix)})"


@dataclass(frozen=True)
class MeasurementSpan:
    """The families the verdict uses and the span they share within the window they were cut from."""

    families: tuple[FamilySpan, ...]
    window: tuple[float, float]  # the window before the cut (steady state, training, or all telemetry)
    shared: tuple[float, float] | None  # None: the families do not overlap within the window

    @property
    def shared_s(self) -> float:
        return self.shared[1] - self.shared[0] if self.shared else 0.0

    @property
    def fraction(self) -> float:
        length = self.window[1] - self.window[0]
        return min(1.0, self.shared_s / length) if length > 0 else 0.0

    @property
    def short(self) -> bool:
        return self.shared is None or self.fraction < SHORT_SPAN_FRACTION

    @property
    def merged(self) -> bool:
        return len({f.source for f in self.families}) > 1

    def text(self) -> str:
        names = " and ".join(f.text() for f in self.families)
        of = f"{_hours(self.window[1] - self.window[0])} window"
        if self.shared is None:
            return (f"the {names} recordings do not overlap within the {of}: the host's part is unknown, "
                    "judged on the GPU's columns alone")  # fmt: skip
        return (
            f"verdict judged over {_span_clock(*self.shared)} ({_hours(self.shared_s)}, "
            f"{_floor_pct(self.fraction)} of the {of}), the span the {names} share"
        )

    def as_json(self) -> dict:
        return {
            "start_unix": self.shared[0] if self.shared else None,
            "end_unix": self.shared[1] if self.shared else None,
            "window_start_unix": self.window[0],
            "window_end_unix": self.window[1],
            "fraction_of_window": self.fraction,
            "families": [
                {
                    "family": f.family,
                    "source": f.source,
                    "start_unix": f.start_unix,
                    "end_unix": f.end_unix,
                    "interval_s": f.interval_s,
                }
                for f in self.families
            ],
        }


def _clock(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span_clock(start: float, end: float) -> str:
    """'2026-11-23 14:00:00–15:00:00 UTC' (the end's date only when it differs)."""
    first, last = _clock(start), _clock(end)
    return f"{first[:-4]}–{last[11:] if first[:10] == last[:10] else last}"


def _hours(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def _floor_pct(fraction: float) -> str:
    """Rounded down, so a share just under a threshold never prints as the threshold."""
    return f"{math.floor(fraction * 100 + 1e-9):.0f}%"


def family_columns(telemetry: pd.DataFrame, kind: str, gpus: list[int]) -> dict[str, list[str]]:
    """The column families the verdict uses: the host's (CPU, iowait, disk, the training's processes)
    and, for a GPU run, the charged GPUs' utilization (every GPU's when none is charged)."""
    families = {"CPU": [str(c) for c in telemetry.columns if HOST_COLUMN.match(str(c))]}
    if kind == "gpu":
        families["GPU"] = [f"gpu{i}_util_pct" for i in (gpus or gpu_indices(telemetry))]
    return {name: [c for c in columns if c in telemetry] for name, columns in families.items()}


def family_times(telemetry: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """The sorted times of the rows with a reading in any of the columns."""
    times = times_of(telemetry)
    if not columns or times.size == 0:
        return np.array([])
    cells = telemetry[columns].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    return np.sort(times[np.isfinite(cells).any(axis=1) & np.isfinite(times)])


def merged_from(meta: dict) -> list[dict]:
    """run.json's merged_from entries that are objects (anything else reads as none)."""
    merged = meta.get("merged_from")
    return [m for m in merged if isinstance(m, dict)] if isinstance(merged, list) else []


def family_sources(meta: dict) -> dict[str, str]:
    """Which recording each family's columns came from, as run.json's imported_from and merged_from say."""
    imported = meta.get("imported_from") if isinstance(meta.get("imported_from"), dict) else {}
    merged = merged_from(meta)
    own = str(imported.get("tool") or COLLECTOR)
    gpu = str(merged[-1].get("tool") or "a merged log") if merged else own
    return {"CPU": own, "GPU": gpu}


def measurement_span(
    telemetry: pd.DataFrame, meta: dict, kind: str, gpus: list[int], window: tuple[float, float] | None
) -> MeasurementSpan | None:
    """The span the verdict's families share within `window`; None when the verdict uses one family
    only (a CPU run, an nvidia-smi log alone, a sysstat file alone) or there is no window."""
    if window is None:
        return None
    sources = family_sources(meta)
    found = []
    for family, columns in family_columns(telemetry, kind, gpus).items():
        times = family_times(telemetry, columns)
        if times.size:
            steps = np.diff(times)
            steps = steps[steps > 0]
            interval = float(np.median(steps)) if steps.size else None
            found.append(FamilySpan(family, sources[family], float(times[0]), float(times[-1]), interval))
    if len(found) < 2:
        return None
    start = max(window[0], *(f.start_unix for f in found))
    end = min(window[1], *(f.end_unix for f in found))
    return MeasurementSpan(tuple(found), window, (start, end) if end > start else None)


def verdict_samples(samples: pd.DataFrame, span: MeasurementSpan | None) -> pd.DataFrame:
    """The samples the verdict's means are taken over: those in the shared span; where the families do
    not overlap, the window's samples without the host's columns (its part unknown, not idle)."""
    if span is None:
        return samples
    if span.shared is None:
        return samples.drop(columns=[c for c in samples.columns if HOST_COLUMN.match(str(c))])
    times = pd.to_numeric(samples["time_unix"], errors="coerce") if "time_unix" in samples else None
    if times is None:
        return samples
    return samples[(times >= span.shared[0]) & (times <= span.shared[1])]


def span_warnings(run_id: str, span: MeasurementSpan | None) -> tuple[list[str], list[str]]:
    """(warnings, caveats): the span is said for a merged run, and is a caveat when it is short."""
    if span is None or not (span.merged or span.short):
        return [], []
    line = f"{run_id}: {span.text()}"
    return [line], [line] if span.short else []


def time_caveats(run_id: str, meta: dict) -> list[str]:
    """An imported log whose local timestamps were read with an assumed UTC offset (nvidia-smi writes
    local time without a zone): its samples may be hours off the other recordings' and the training's."""
    entries = [meta.get("imported_from"), *merged_from(meta)]
    found = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        why = str(entry.get("utc_offset_from") or "")
        if why.startswith("assumed"):
            name = Path(str(entry.get("file") or "")).name or "log"
            found.append(
                f"{run_id}: {ASSUMED_OFFSET}: the {entry.get('tool') or 'imported'} log {name} was read as "
                f"UTC{entry.get('utc_offset')}, the importing machine's time zone; written in another zone, "
                "its times are shifted against the other recordings (re-import with --utc-offset)"
            )
    return found


def training_window(
    telemetry: pd.DataFrame, meta: dict, kind: str, gpus: list[int], phases: pd.DataFrame,
    window: tuple[float, float] | None,
) -> tuple[float, float] | None:  # fmt: skip
    """Without `train` phases the training window is the telemetry's span: cut to the span the verdict's
    families share (the hours only one recording saw are not the training's)."""
    if window is None or train_windows(phases, telemetry.iloc[0:0]):
        return window
    span = measurement_span(telemetry, meta, kind, gpus, window)
    return span.shared if span is not None and span.shared is not None else window
