"""Finding and reading run directories (docs/run-format.md) for the dashboard and the sizing report.

Reading only: nothing here writes into a run directory. Every problem with a file (missing, truncated,
unparseable) becomes a one-line warning on the run instead of an exception. CSV files are parsed once
per change of (path, mtime, size), incrementally while they grow (dashboard.csvcache); a big file's parse
is also kept as Parquet outside data/ (dashboard.parsecache) so a restarted dashboard skips it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from dashboard.csvcache import CsvCache, warnings_of, with_warnings
from runformat import (
    DETECTIONS_DIR,
    DETECTIONS_JSON,
    EVAL_JSON,
    INFERENCE_JSON,
    PHASES_COLUMNS,
    PHASES_CSV,
    RUN_JSON,
    TELEMETRY_CSV,
    TRAINING_CSV,
    TRAINING_JSON,
    RunFiles,
    read_run,
    resolve_run_dir,
    run_dirs,
)
from runformat.bursts import burst_ends
from runformat.diskfull import DISK_FULL
from runformat.jsonio import read_object
from runformat.progress import progress_of
from runformat.records import RunRecord, TrainingRecord, as_record, raw_of, training_framework
from runformat.textfile import packed_copy
from runformat.tuning import TuningTag, tuning_of
from sizing.analysis.clock_steps import ClockSteps
from sizing.analysis.jobcheck import is_job
from sizing.analysis.validate import (
    Mended,
    checked_and_mended,
    fractions_for_percent,
    gpu_memory_bytes,
    impossible_cells,
    phases_columns,
    step_log_read,
)
from sizing.model import number


@dataclass(frozen=True)
class RunInfo:
    """One run directory and its small JSON files; CSVs are read on demand with `read_telemetry` etc."""

    run_id: str
    path: Path
    kind: str
    meta: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @functools.cached_property
    def record(self) -> RunRecord:
        """run.json as its record (runformat.records)."""
        return as_record(RunRecord, self.meta)

    @functools.cached_property
    def training_record(self) -> TrainingRecord:
        """training.json as its record, steps and status as corrected from training.csv."""
        return as_record(TrainingRecord, self.training)

    @functools.cached_property
    def tuning(self) -> TuningTag | None:
        """run.json's `tuning` tag: this run's place in a `--tune` sweep; None for a run of no sweep."""
        return tuning_of(self.meta)

    @property
    def label(self) -> str:
        return self.record.label or self.run_id

    @property
    def device(self) -> str:
        return self.record.device or self.training_record.device_requested or "unknown"

    @property
    def framework(self) -> str:
        """`tensorflow` or `torch` (runformat.records.training_framework, as the report reads it)."""
        return training_framework(self.training) or "n/a"

    @property
    def framework_version(self) -> str:
        return str(self.training.get("framework_version") or self.training.get("tensorflow_version") or "")

    @property
    def host(self) -> str:
        return self.record.host or "unknown"

    @property
    def start_unix(self) -> float | None:
        start = self.record.start_unix
        return start if start is not None else self.training_record.start_unix

    @property
    def duration_s(self) -> float | None:
        run = self.record
        if run.actual_duration_s is not None:
            return run.actual_duration_s
        return (
            run.end_unix - run.start_unix if run.start_unix is not None and run.end_unix is not None else None
        )

    @property
    def end_reason(self) -> str:
        """run.json's end_reason; `failed (disk full)` when a full disk ended the run (its `failure`)."""
        reason = self.record.end_reason or "unknown"
        if (self.record.failure or {}).get("reason") == DISK_FULL:
            return f"{reason} ({DISK_FULL})"
        return reason

    @property
    def start_utc(self) -> str:
        """`2026-11-21 13:02 UTC`, or '' when the start is unknown."""
        start = self.start_unix
        if start is None:
            return ""
        return datetime.fromtimestamp(start, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def discover_runs(data_dir: Path) -> list[RunInfo]:
    """Every run under data_dir/runs and data_dir/examples, newest first. Reads JSON only.

    A run id present in both places is listed once, from runs/ (as `resolve_run_dir` resolves it).
    """
    runs = [_load_run(entry, entry.name, entry.parent.name) for entry in run_dirs(Path(data_dir))]
    runs.sort(key=lambda run: (run.start_unix or 0.0, run.run_id), reverse=True)
    return runs


def get_run(data_dir: Path, run_id: str) -> RunInfo | None:
    """The run called `run_id`, or None if the id is unsafe or names no run directory."""
    if not isinstance(run_id, str):
        return None
    path = resolve_run_dir(Path(data_dir), run_id)
    if path is None:
        return None
    return _load_run(path, run_id, path.parent.name)


def open_run_dir(path: Path) -> RunInfo:
    """A run directory given directly (the report CLI); its id is the directory name."""
    path = Path(path)
    return _load_run(path, path.name, "path")


def read_telemetry(run: RunInfo, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """telemetry.csv as floats, read as the sizing report reads it (sizing.analysis.validate): infinite
    cells and cells no reading can hold (a counter's sentinel) empty, rows in time order (a clock stepped
    mid-run mended as the report mends it); only `columns` that exist when given. Warnings in
    `df.attrs["warnings"]`."""
    return _select(_with_parse_warnings(_telemetry_checked(run)), columns)


def read_training(run: RunInfo) -> pd.DataFrame:
    """training.csv as floats, read as the sizing report reads it; an empty frame if the run has none."""
    kept = _training_checked(run, None)
    telemetry = _telemetry_checked(run)[4]
    if telemetry is not None and telemetry[1].forward():  # the step log's gaps at those steps, too
        kept = _training_checked(run, telemetry[1])
    return _select(_with_parse_warnings(kept, *_steps_read(run, kept[2])), None)


def _steps_read(run: RunInfo, checked: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The checked step log read as the report reads it (validate.step_log_read), once per checked frame
    and training.json."""
    path = run.path / TRAINING_CSV
    kept = _STEPS_READ.get(path)
    if kept is None or kept[0] is not checked or kept[1] != run.training:
        kept = _STEPS_READ[path] = (checked, dict(run.training), *step_log_read(checked, run.training))
        while len(_STEPS_READ) > _CHECKED_MAX:
            _STEPS_READ.pop(next(iter(_STEPS_READ)))
    return kept[2], kept[3]


def _training_checked(run: RunInfo, other: ClockSteps | None) -> _Checked:
    return _checked(run.path / TRAINING_CSV, False, None, number(run.training.get("start_unix")), other)


def _telemetry_checked(run: RunInfo) -> _Checked:
    step_log = _training_checked(run, None)[4]
    start = number(run.meta.get("start_unix"))
    other = step_log[1] if step_log is not None else None
    return _checked(run.path / TELEMETRY_CSV, True, gpu_memory_bytes(run.meta), start, other)


def _checked(
    path: Path, required: bool, gpu_memory: dict[int, float] | None, start_unix: float | None,
    other: ClockSteps | None = None,
) -> _Checked:  # fmt: skip
    """A numeric CSV through sizing's checks, once per parse and reading (the checks follow the cached
    parse)."""
    raw = _CSV_CACHE.read(path, numeric=True, required=required)
    key = (path, start_unix, other)
    kept = _CHECKED.get(key)
    if kept is None or kept[0] is not raw or kept[1] != gpu_memory:
        checked, problems, mended = checked_and_mended(raw, path.name, start_unix, other)
        if gpu_memory is not None:
            checked, impossible = impossible_cells(checked, gpu_memory)
            checked, fractions = fractions_for_percent(checked)
            problems += [note for note in (impossible, fractions) if note]
        kept = _CHECKED[key] = (raw, gpu_memory, checked, problems, mended)
        while len(_CHECKED) > _CHECKED_MAX:
            _CHECKED.pop(next(iter(_CHECKED)))
    return kept


def _with_parse_warnings(
    kept: _Checked, frame: pd.DataFrame | None = None, more: Sequence[str] = ()
) -> pd.DataFrame:
    """The checked frame (or `frame`, read from it) with its checks' warnings, `more`, and the parse's own
    as of this read (a partial last line comes and goes without a new parse)."""
    shown = kept[2] if frame is None else frame
    return with_warnings(shown.copy(deep=False), [*warnings_of(kept[0]), *kept[3], *more])


def step_log_bursts(run: RunInfo) -> int:
    """How many bursts a job's training.csv came in (runformat.bursts), once per parse; 0 for our own
    training (it times each step itself) and for a log whose rows were each timed."""
    if not is_job(run.training):
        return 0
    path = run.path / TRAINING_CSV
    raw = _CSV_CACHE.read(path, numeric=True, required=False)
    kept = _BURSTS.get(path)
    if kept is None or kept[0] is not raw:
        times = sorted(raw["time_unix"].dropna().tolist()) if "time_unix" in raw else []
        start = number(run.training.get("start_unix"))
        kept = _BURSTS[path] = (raw, len(burst_ends(times, start) or ()))
        while len(_BURSTS) > _CHECKED_MAX:
            _BURSTS.pop(next(iter(_BURSTS)))
    return kept[1]


def read_phases(run: RunInfo) -> pd.DataFrame:
    """phases.csv (`phase, start_unix, end_unix, status`), a column it lacks empty (said); an empty frame if
    absent."""
    frame = _select(_CSV_CACHE.read(run.path / PHASES_CSV, numeric=False, required=False), None)
    if frame.empty:
        return with_warnings(pd.DataFrame(columns=list(PHASES_COLUMNS)), warnings_of(frame))
    earlier = warnings_of(frame)
    frame, lacking = phases_columns(frame)
    for column in ("start_unix", "end_unix"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return with_warnings(frame, [*earlier, lacking] if lacking else earlier)


def read_detections(run: RunInfo) -> dict[str, Any]:
    """detections/detections.json, or {} if absent or unreadable (see `detections_warnings`)."""
    path = run.path / DETECTIONS_DIR / DETECTIONS_JSON
    data, _ = _read_detections(path)
    images = data.get("images")
    if data and not isinstance(images, list):
        return {}
    return data


def detections_warnings(run: RunInfo) -> list[str]:
    path = run.path / DETECTIONS_DIR / DETECTIONS_JSON
    data, problem = _read_detections(path)
    if problem:
        return [problem]
    if data and not isinstance(data.get("images"), list):
        return [f"{DETECTIONS_DIR}/{DETECTIONS_JSON}: no 'images' list"]
    return []


def parsed_csvs(run: RunInfo) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """telemetry.csv and training.csv as parsed (numeric), before sizing's checks, for build_report to apply
    once, as `python -m sizing` does (a clock set back mends the run's records too); and the parse's own
    warnings."""
    telemetry = _CSV_CACHE.read(run.path / TELEMETRY_CSV, numeric=True, required=True)
    training = _CSV_CACHE.read(run.path / TRAINING_CSV, numeric=True, required=False)
    said = [*warnings_of(telemetry), *warnings_of(training)]
    return telemetry.copy(deep=False), training.copy(deep=False), said


def run_warnings(run: RunInfo) -> list[str]:
    """Every warning of the run: its JSON files and its CSVs (parses the CSVs if not yet cached)."""
    found = list(run.warnings)
    found += warnings_of(read_telemetry(run))
    found += warnings_of(read_training(run))
    found += warnings_of(read_phases(run))
    found += detections_warnings(run)
    return list(dict.fromkeys(found))


def files_signature(run: RunInfo) -> tuple[tuple[str, int, int], ...]:
    """(name, mtime_ns, size) of every file the dashboard reads: changes exactly when they do."""
    names = (RUN_JSON, TELEMETRY_CSV, TRAINING_CSV, TRAINING_JSON, PHASES_CSV, EVAL_JSON, INFERENCE_JSON)
    paths = [run.path / name for name in names] + [run.path / DETECTIONS_DIR / DETECTIONS_JSON]
    signature = []
    for path in paths:
        try:
            stat = path.stat()
        except OSError:
            continue
        signature.append((str(path.relative_to(run.path)), stat.st_mtime_ns, stat.st_size))
    return tuple(signature)


# ---------------------------------------------------------------------------------------------- JSON


def _load_run(path: Path, run_id: str, kind: str) -> RunInfo:
    files = run_files(path)
    warnings = list(files.warnings)
    if files.run is None and RUN_JSON not in files.problems:
        warnings.append(f"{RUN_JSON} is missing")
    training, note = (
        files.progress.applied_to(raw_of(files.training)) if files.progress else (raw_of(files.training), "")
    )
    if note:
        warnings.append(note)
    if not (path / TELEMETRY_CSV).is_file() and packed_copy(path / TELEMETRY_CSV) is None:
        warnings.append(f"{TELEMETRY_CSV} is missing")
    return RunInfo(run_id, path, kind, files.meta, training, files.evaluation or {}, tuple(warnings))


_FILES_CACHE: dict[Path, tuple[tuple[tuple[int, int], ...], RunFiles]] = {}
_DETECTIONS_CACHE: dict[Path, tuple[tuple[int, int], dict[str, Any] | None, str | None]] = {}
_STAMPED = (RUN_JSON, TRAINING_JSON, TRAINING_CSV, EVAL_JSON, INFERENCE_JSON)


def run_files(path: Path) -> RunFiles:
    """runformat.read_run of the directory, read again when one of its files changes; while its
    training.json says running, how far training got is asked again (its pid can die unseen)."""
    key = tuple(_stamp(path / name) for name in _STAMPED)
    cached = _FILES_CACHE.get(path)
    if cached and cached[0] == key:
        files = cached[1]
        if not (files.training and files.training.status == "running"):
            return files
        return replace(files, progress=progress_of(path, files.training, files.run))  # only that can change
    files = read_run(path)
    _FILES_CACHE[path] = (key, files)
    return files


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (0, 0)
    return (stat.st_mtime_ns, stat.st_size)


def _read_detections(path: Path) -> tuple[dict[str, Any], str | None]:
    """({}, None) when absent; ({}, warning) when unreadable; (data, None) otherwise. Cached by mtime+size."""
    key = _stamp(path)
    cached = _DETECTIONS_CACHE.get(path)
    if cached and cached[0] == key:
        return cached[1] or {}, cached[2]
    data, problem = read_object(path, f"{DETECTIONS_DIR}/{DETECTIONS_JSON}")
    _DETECTIONS_CACHE[path] = (key, data, problem)
    return data or {}, problem


_CSV_CACHE = CsvCache()
# the parse, the GPUs' memory it was checked with, the checked frame, its warnings, the clock steps mended;
# by the file, its start_unix and the clock steps of the run's other file
_Checked = tuple[pd.DataFrame, dict[int, float] | None, pd.DataFrame, list[str], Mended | None]
_CHECKED: dict[tuple[Path, float | None, ClockSteps | None], _Checked] = {}
_CHECKED_MAX = 24
_BURSTS: dict[Path, tuple[pd.DataFrame, int]] = {}  # training.csv -> (the parse, its bursts)
# training.csv -> (the checked frame, training.json, the steps read, what was said)
_STEPS_READ: dict[Path, tuple[pd.DataFrame, dict, pd.DataFrame, list[str]]] = {}


def clear_caches() -> None:
    """Forget every parsed file (tests, and callers that want to bound memory)."""
    _CSV_CACHE.clear()
    _CHECKED.clear()
    _BURSTS.clear()
    _STEPS_READ.clear()
    _FILES_CACHE.clear()
    _DETECTIONS_CACHE.clear()


# ------------------------------------------------------------------------------------------- helpers


def _select(frame: pd.DataFrame, columns: Sequence[str] | None) -> pd.DataFrame:
    warnings = warnings_of(frame)
    if columns is None:
        selected = frame.copy(deep=False)
    else:
        selected = frame[[name for name in dict.fromkeys(columns) if name in frame.columns]]
    return with_warnings(selected, warnings)


__all__ = [
    "RunInfo",
    "clear_caches",
    "detections_warnings",
    "discover_runs",
    "files_signature",
    "get_run",
    "open_run_dir",
    "parsed_csvs",
    "read_detections",
    "read_phases",
    "read_telemetry",
    "read_training",
    "run_files",
    "run_warnings",
    "step_log_bursts",
]
