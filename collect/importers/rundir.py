"""What every file importer shares: a run directory published only when complete, telemetry.csv cells,
times in run.json's form, and telemetry.csv rewritten in place without losing a row."""

from __future__ import annotations

import csv
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from runformat import FORMAT_VERSION, RUNS_SUBDIR


class RunDirError(OSError):
    """The run directory cannot be created or written; the message is one line for the user."""


def stage_and_publish(data_dir: Path, base: str, write: Callable[[Path, str], None]) -> Path:
    """Write into a hidden directory, then rename it to runs/<run_id> (-2, -3... if taken)."""
    runs = data_dir / RUNS_SUBDIR
    try:
        runs.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix=f".import-{base}.", dir=runs))
    except OSError as exc:
        raise RunDirError(f"cannot create a run directory in {runs}: {exc.strerror or exc}") from exc
    try:
        for attempt in range(1, 1000):
            target = runs / (base if attempt == 1 else f"{base}-{attempt}")
            if not target.exists():
                write(staged, target.name)
                staged.rename(target)
                return target
        raise RunDirError(f"too many runs named {base} in {runs}")
    except RunDirError:
        raise
    except OSError as exc:
        raise RunDirError(f"cannot write the run into {runs}: {exc.strerror or exc}") from exc
    finally:
        if staged.exists():
            shutil.rmtree(staged, ignore_errors=True)


def cell(value: float | int | str | None) -> str:
    """A telemetry.csv cell: empty for None, integers without a decimal point, text as it is."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(round(value, 6))


def utc(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).isoformat()


def imported_run_header(
    run_id: str, label: str, device: str, host: str | None, interval_s: float, start: float, end: float
) -> dict[str, Any]:
    """The run.json fields every imported run shares: who and when, no command, ended as recorded."""
    return {
        "format_version": FORMAT_VERSION,
        "run_id": run_id,
        "label": label,
        "device": device,
        "host": host,
        "command": None,
        "interval_s": interval_s,
        "start_utc": utc(start),
        "start_unix": start,
        "end_utc": utc(end),
        "end_unix": end,
        "requested_duration_s": None,
        "actual_duration_s": round(end - start, 3),
        "end_reason": "completed",
        "exit_code": None,
    }


def write_csv(path: Path, columns: list[str], rows: Iterable[Mapping[str, float | int | str | None]]) -> None:
    """telemetry.csv (or any run CSV) written beside itself and renamed over it: all or nothing."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        with open(partial, "w", encoding="ascii", errors="replace", newline="") as handle:
            handle.write(",".join(columns) + "\n")
            for row in rows:
                handle.write(",".join(cell(row.get(column)) for column in columns) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise RunDirError(f"cannot write {path}: {exc.strerror or exc}") from exc


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """A run CSV's header and rows as text; a truncated last line is kept with its empty cells."""
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, [])
        rows = [dict(zip(header, cells, strict=False)) for cells in reader if cells]
    return header, rows
