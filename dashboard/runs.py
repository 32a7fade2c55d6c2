"""Finding and reading run directories (docs/run-format.md) for the dashboard and the sizing report.

Reading only: nothing here writes into a run directory. Every problem with a file (missing, truncated,
unparseable) becomes a one-line warning on the run instead of an exception. CSV files are parsed once
per change of (path, mtime, size); a file that only grew (a run in progress) is parsed from where the
previous read stopped; a big file's parse is also kept as Parquet outside data/ (dashboard.parsecache)
so a restarted dashboard does not parse it again.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from dashboard import parsecache
from runformat import (
    DETECTIONS_DIR,
    DETECTIONS_JSON,
    EVAL_JSON,
    EXAMPLES_SUBDIR,
    FORMAT_VERSION,
    INFERENCE_JSON,
    PHASES_CSV,
    RUN_JSON,
    RUNS_SUBDIR,
    TELEMETRY_CSV,
    TRAINING_CSV,
    TRAINING_JSON,
    TrainingProgress,
    is_valid_run_id,
    read_json,
    resolve_run_dir,
    training_progress,
)

WARNINGS_ATTR = "warnings"
PHASES_COLUMNS = ("phase", "start_unix", "end_unix", "status")


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

    @property
    def label(self) -> str:
        return str(self.meta.get("label") or self.run_id)

    @property
    def device(self) -> str:
        return str(self.meta.get("device") or self.training.get("device_requested") or "unknown")

    @property
    def framework(self) -> str:
        """`tensorflow` or `torch` (training.json); runs from before the torch twin trained TensorFlow."""
        name = self.training.get("framework")
        if name:
            return str(name)
        config = self.training.get("config")
        model_garden = isinstance(config, dict) and "task" in config
        return "tensorflow" if self.training.get("tensorflow_version") or model_garden else "n/a"

    @property
    def framework_version(self) -> str:
        return str(self.training.get("framework_version") or self.training.get("tensorflow_version") or "")

    @property
    def host(self) -> str:
        return str(self.meta.get("host") or "unknown")

    @property
    def start_unix(self) -> float | None:
        start = _number(self.meta.get("start_unix"))
        return start if start is not None else _number(self.training.get("start_unix"))

    @property
    def duration_s(self) -> float | None:
        actual = _number(self.meta.get("actual_duration_s"))
        if actual is not None:
            return actual
        start, end = _number(self.meta.get("start_unix")), _number(self.meta.get("end_unix"))
        return end - start if start is not None and end is not None else None

    @property
    def end_reason(self) -> str:
        return str(self.meta.get("end_reason") or "unknown")

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
    seen: set[str] = set()
    runs: list[RunInfo] = []
    for sub in (RUNS_SUBDIR, EXAMPLES_SUBDIR):
        parent = Path(data_dir) / sub
        for entry in _list_dirs(parent):
            if entry.name in seen or not is_valid_run_id(entry.name):
                continue
            seen.add(entry.name)
            runs.append(_load_run(entry, entry.name, sub))
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
    """telemetry.csv as floats; only `columns` that exist when given. Warnings in `df.attrs["warnings"]`."""
    return _select(_CSV_CACHE.read(run.path / TELEMETRY_CSV, numeric=True), columns)


def read_training(run: RunInfo) -> pd.DataFrame:
    """training.csv as floats; an empty frame if the run has none."""
    return _select(_CSV_CACHE.read(run.path / TRAINING_CSV, numeric=True, required=False), None)


def read_phases(run: RunInfo) -> pd.DataFrame:
    """phases.csv (`phase, start_unix, end_unix, status`); an empty frame if absent."""
    frame = _select(_CSV_CACHE.read(run.path / PHASES_CSV, numeric=False, required=False), None)
    if frame.empty:
        return _with_warnings(pd.DataFrame(columns=list(PHASES_COLUMNS)), _warnings_of(frame))
    for column in ("start_unix", "end_unix"):
        if column in frame:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def read_detections(run: RunInfo) -> dict[str, Any]:
    """detections/detections.json, or {} if absent or unreadable (see `detections_warnings`)."""
    path = run.path / DETECTIONS_DIR / DETECTIONS_JSON
    data, _ = _read_optional_json(path)
    images = data.get("images")
    if data and not isinstance(images, list):
        return {}
    return data


def detections_warnings(run: RunInfo) -> list[str]:
    path = run.path / DETECTIONS_DIR / DETECTIONS_JSON
    data, problem = _read_optional_json(path)
    if problem:
        return [problem]
    if data and not isinstance(data.get("images"), list):
        return [f"{DETECTIONS_DIR}/{DETECTIONS_JSON}: no 'images' list"]
    return []


def run_warnings(run: RunInfo) -> list[str]:
    """Every warning of the run: its JSON files and its CSVs (parses the CSVs if not yet cached)."""
    found = list(run.warnings)
    found += _warnings_of(read_telemetry(run))
    found += _warnings_of(read_training(run))
    found += _warnings_of(read_phases(run))
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
    warnings: list[str] = []
    meta, problem = _read_optional_json(path / RUN_JSON)
    if problem:
        warnings.append(problem)
    elif not meta:
        warnings.append(f"{RUN_JSON} is missing")
    elif meta.get("format_version") not in (None, FORMAT_VERSION):
        warnings.append(
            f"{RUN_JSON}: format_version {meta.get('format_version')!r}, expected {FORMAT_VERSION}"
        )
    training, problem = _read_optional_json(path / TRAINING_JSON)
    if problem:
        warnings.append(problem)
    training, note = _with_progress(path, training)
    if note:
        warnings.append(note)
    evaluation, problem = _read_optional_json(path / EVAL_JSON)
    if problem:
        warnings.append(problem)
    if not (path / TELEMETRY_CSV).is_file():
        warnings.append(f"{TELEMETRY_CSV} is missing")
    return RunInfo(run_id, path, kind, meta, training, evaluation, tuple(warnings))


_JSON_CACHE: dict[Path, tuple[tuple[int, int], dict[str, Any], str | None]] = {}
_PROGRESS_CACHE: dict[Path, tuple[tuple[Any, ...], TrainingProgress]] = {}


def _with_progress(path: Path, training: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """training.json with steps, global_step and status from training.csv when training.json is stale
    (or lags behind it), and the note saying so; cached until either file or run.json changes."""
    if not training:
        return training, ""
    key = tuple(_stamp(path / name) for name in (TRAINING_JSON, TRAINING_CSV, RUN_JSON))
    cached = _PROGRESS_CACHE.get(path)
    if cached and cached[0] == key and training.get("status") != "running":  # a pid can die unseen
        progress = cached[1]
    else:
        progress = training_progress(path)
        _PROGRESS_CACHE[path] = (key, progress)
    if (progress.steps, progress.global_step, progress.status) == (
        training.get("steps"),
        training.get("global_step"),
        training.get("status"),
    ):
        return training, ""
    corrected = {
        **training,
        "steps": progress.steps,
        "global_step": progress.global_step,
        "status": progress.status,
    }
    return corrected, progress.note


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (0, 0)
    return (stat.st_mtime_ns, stat.st_size)


def _read_optional_json(path: Path) -> tuple[dict[str, Any], str | None]:
    """({}, None) when absent; ({}, warning) when unreadable; (data, None) otherwise. Cached by mtime+size."""
    try:
        stat = path.stat()
    except OSError:
        return {}, None
    key = (stat.st_mtime_ns, stat.st_size)
    cached = _JSON_CACHE.get(path)
    if cached and cached[0] == key:
        return cached[1], cached[2]
    try:
        data, problem = read_json(path), None
    except ValueError as exc:
        data, problem = {}, f"{_short_name(path)} is unreadable: {_one_line(exc)}"
    _JSON_CACHE[path] = (key, data, problem)
    return data, problem


# ----------------------------------------------------------------------------------------------- CSV


@dataclass
class _CsvEntry:
    identity: tuple[int, int]
    stamp: tuple[int, int]
    consumed: int
    header: list[str]
    frame: pd.DataFrame
    warnings: list[str]


class _CsvCache:
    """Parsed CSVs keyed by path; re-parsed when (mtime, size) change, only the new bytes when it grew."""

    def __init__(self, max_entries: int = 12) -> None:
        self._entries: OrderedDict[Path, _CsvEntry] = OrderedDict()
        self._lock = threading.Lock()
        self._max_entries = max_entries

    def read(self, path: Path, *, numeric: bool, required: bool = True) -> pd.DataFrame:
        try:
            stat = path.stat()
        except OSError:
            missing = [f"{path.name} is missing"] if required else []
            return _with_warnings(pd.DataFrame(), missing)
        identity, stamp = (stat.st_dev, stat.st_ino), (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            entry = self._entries.get(path)
            if entry is None or entry.identity != identity or stat.st_size < entry.consumed:
                entry = _from_sidecar(path, identity, stamp) if numeric else None
                entry = entry or _parse_whole_and_keep(path, identity, stamp, numeric)
            elif entry.stamp != stamp:
                entry = _parse_appended(path, entry, numeric)
            entry.stamp = stamp
            self._entries[path] = entry
            self._entries.move_to_end(path)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
            return _with_warnings(entry.frame, entry.warnings)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_CSV_CACHE = _CsvCache()


def clear_caches() -> None:
    """Forget every parsed file (tests, and callers that want to bound memory)."""
    _CSV_CACHE.clear()
    _JSON_CACHE.clear()
    _PROGRESS_CACHE.clear()


def _from_sidecar(path: Path, identity: tuple[int, int], stamp: tuple[int, int]) -> _CsvEntry | None:
    kept = parsecache.load(path, identity, stamp)
    if kept is None:
        return None
    return _CsvEntry(identity, stamp, kept["consumed"], kept["header"], kept["frame"], list(kept["warnings"]))


def _parse_whole_and_keep(
    path: Path, identity: tuple[int, int], stamp: tuple[int, int], numeric: bool
) -> _CsvEntry:
    entry = _parse_whole(path, identity, numeric)
    if numeric and entry.consumed <= stamp[1] and entry.header:
        parsecache.store_later(
            path, identity, stamp, entry.frame, entry.consumed, entry.header, entry.warnings
        )
    return entry


def _parse_whole(path: Path, identity: tuple[int, int], numeric: bool) -> _CsvEntry:
    raw = _read_bytes(path, 0)
    newline = raw.find(b"\n")
    header_bytes = raw if newline < 0 else raw[:newline]
    header = [name.strip() for name in header_bytes.decode("utf-8", "replace").strip().split(",")]
    entry = _CsvEntry(identity, (0, 0), 0, header, pd.DataFrame(columns=header), [])
    if newline < 0 or not _is_valid_header(header):
        problem = "is empty" if not raw.strip() else "has no valid header line"
        entry.warnings.append(f"{path.name} {problem}")
        entry.header, entry.frame = [], pd.DataFrame()
        entry.consumed = len(raw)
        return entry
    entry.consumed = newline + 1
    return _parse_appended_bytes(path, entry, raw, newline + 1, numeric)


def _parse_appended(path: Path, entry: _CsvEntry, numeric: bool) -> _CsvEntry:
    if not entry.header:
        return _parse_whole(path, entry.identity, numeric)
    return _parse_appended_bytes(path, entry, _read_bytes(path, entry.consumed), 0, numeric)


def _parse_appended_bytes(path: Path, entry: _CsvEntry, raw: bytes, start: int, numeric: bool) -> _CsvEntry:
    """Parse the complete lines of raw[start:] onto `entry`; a partial last line waits for the next read."""
    last_newline = raw.rfind(b"\n", start)
    cut = last_newline + 1 if last_newline >= 0 else start
    complete, partial = memoryview(raw)[start:cut], raw[cut:]
    entry.warnings = [w for w in entry.warnings if "truncated last line" not in w]
    if partial.strip():
        entry.warnings.append(f"{path.name}: truncated last line ignored")
    entry.consumed += len(complete)
    if not len(complete):
        return entry
    parsed, problems = _parse_lines(complete, entry.header, numeric)
    entry.warnings.extend(f"{path.name}: {problem}" for problem in problems)
    entry.frame = parsed if entry.frame.empty else pd.concat([entry.frame, parsed], ignore_index=True)
    return entry


def _parse_lines(data: memoryview, header: list[str], numeric: bool) -> tuple[pd.DataFrame, list[str]]:
    if not numeric:
        return _parse_text_lines(bytes(data), header)
    bad_rows: list[int] = []

    def skip_bad_row(row: pacsv.InvalidRow) -> str:
        bad_rows.append(row.number or 0)
        return "skip"

    try:
        table = pacsv.read_csv(
            pa.BufferReader(pa.py_buffer(data)),
            read_options=pacsv.ReadOptions(column_names=header),
            parse_options=pacsv.ParseOptions(invalid_row_handler=skip_bad_row, newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(column_types=dict.fromkeys(header, pa.float64())),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return _parse_numeric_slowly(bytes(data), header)
    problems = [f"{len(bad_rows)} malformed row(s) skipped"] if bad_rows else []
    return table.to_pandas(), problems


def _parse_numeric_slowly(data: bytes, header: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """The tolerant path for files with non-numeric cells: those cells become NaN, with a warning."""
    frame, problems = _parse_text_lines(data, header)
    bad_cells = 0
    for column in frame.columns:
        text = frame[column]
        numbers = pd.to_numeric(text, errors="coerce")
        bad_cells += int((numbers.isna() & text.notna() & (text.astype(str).str.strip() != "")).sum())
        frame[column] = numbers.astype("float64")
    if bad_cells:
        problems.append(f"{bad_cells} non-numeric value(s) read as missing")
    return frame, problems


def _parse_text_lines(data: bytes, header: list[str]) -> tuple[pd.DataFrame, list[str]]:
    bad_lines: list[list[str]] = []

    def keep_count(line: list[str]) -> None:
        bad_lines.append(line)

    frame = pd.read_csv(
        io.BytesIO(data),
        names=header,
        header=None,
        dtype=str,
        keep_default_na=False,
        na_values=[""],
        engine="python",
        on_bad_lines=keep_count,
        encoding_errors="replace",
    )
    problems = [f"{len(bad_lines)} malformed row(s) skipped"] if bad_lines else []
    return frame, problems


def _read_bytes(path: Path, offset: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read()


def _is_valid_header(header: list[str]) -> bool:
    return (
        bool(header)
        and all(name and name.isprintable() for name in header)
        and len(set(header)) == len(header)
    )


# ------------------------------------------------------------------------------------------- helpers


def _select(frame: pd.DataFrame, columns: Sequence[str] | None) -> pd.DataFrame:
    warnings = _warnings_of(frame)
    if columns is None:
        selected = frame.copy(deep=False)
    else:
        selected = frame[[name for name in dict.fromkeys(columns) if name in frame.columns]]
    return _with_warnings(selected, warnings)


def _with_warnings(frame: pd.DataFrame, warnings: Sequence[str]) -> pd.DataFrame:
    frame.attrs[WARNINGS_ATTR] = list(warnings)
    return frame


def _warnings_of(frame: pd.DataFrame) -> list[str]:
    return list(frame.attrs.get(WARNINGS_ATTR, []))


def _list_dirs(parent: Path) -> list[Path]:
    try:
        return sorted(entry for entry in parent.iterdir() if entry.is_dir())
    except OSError:
        return []


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if np.isfinite(number) else None


def _short_name(path: Path) -> str:
    return f"{DETECTIONS_DIR}/{path.name}" if path.parent.name == DETECTIONS_DIR else path.name


def _one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text.split(": cannot read JSON ", 1)[-1]


__all__ = [
    "RunInfo",
    "clear_caches",
    "detections_warnings",
    "discover_runs",
    "files_signature",
    "get_run",
    "open_run_dir",
    "read_detections",
    "read_phases",
    "read_telemetry",
    "read_training",
    "run_warnings",
]
