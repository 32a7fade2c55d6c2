"""Writers for the training files of a run directory: training.csv, training.json, phases.csv."""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import os
import time
from pathlib import Path
from typing import Any

from runformat import (
    FORMAT_VERSION,
    PHASES_COLUMNS,
    PHASES_CSV,
    TRAINING_CSV,
    TRAINING_JSON,
    write_json_atomic,
)

LOSS_COLUMNS = {
    "total_loss": "loss_total",
    "rpn_score_loss": "loss_rpn_score",
    "rpn_box_loss": "loss_rpn_box",
    "frcnn_cls_loss": "loss_frcnn_cls",
    "frcnn_box_loss": "loss_frcnn_box",
    "model_loss": "loss_model",
}
TRAINING_COLUMNS = [
    "time_unix",
    "elapsed_s",
    "step",
    *LOSS_COLUMNS.values(),
    "learning_rate",
    "step_time_s",
    "examples_per_s",
]


class TrainingCsv:
    """One row per step, handed to the kernel as written; appends (header once) so a resumed run continues
    the file. A row that cannot be written (a full disk) stays queued for the next flush, and the file
    keeps only whole rows: OSError names the file."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / TRAINING_CSV
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._queued: list[str] = []
        self._text = io.StringIO()
        self._writer = csv.writer(self._text)
        if os.fstat(self._fd).st_size == 0:
            self._queue(TRAINING_COLUMNS)
        try:
            self.flush()
        except OSError:
            os.close(self._fd)
            raise

    def _queue(self, row: list) -> None:
        self._writer.writerow(row)
        self._queued.append(self._text.getvalue())
        self._text.seek(0)
        self._text.truncate()

    def flush(self) -> None:
        if not self._queued:
            return
        data = "".join(self._queued).encode("utf-8")
        end = os.fstat(self._fd).st_size
        try:
            while data:
                written = os.write(self._fd, data)
                if written <= 0:
                    raise OSError(errno.EIO, "nothing written")
                data = data[written:]
        except OSError as exc:
            with contextlib.suppress(OSError):  # no half row: the rows stay queued, whole
                os.ftruncate(self._fd, end)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
        self._queued.clear()

    def add(
        self,
        *,
        time_unix: float,
        elapsed_s: float,
        step: int,
        losses: dict[str, float],
        learning_rate: float,
        step_time_s: float,
        batch_size: int,
    ) -> None:
        """Queue one step's row (written by the next flush)."""
        row = [f"{time_unix:.6f}", f"{elapsed_s:.6f}", step]
        row += [f"{losses[name]:.6g}" for name in LOSS_COLUMNS]
        row += [f"{learning_rate:.6g}", f"{step_time_s:.6f}", f"{batch_size / step_time_s:.4f}"]
        self._queue(row)

    def close(self, quiet: bool = False) -> None:
        """Write what is queued and close; `quiet`: a run already failing loses the rows, not its error."""
        try:
            if quiet:
                with contextlib.suppress(OSError):
                    self.flush()
            else:
                self.flush()
        finally:
            os.close(self._fd)


def append_phase(run_dir: Path, phase: str, start_unix: float, end_unix: float, ok: bool) -> None:
    path = Path(run_dir) / PHASES_CSV
    needs_header = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        if needs_header:
            writer.writerow(PHASES_COLUMNS)
        writer.writerow([phase, f"{start_unix:.6f}", f"{end_unix:.6f}", "ok" if ok else "failed"])


def write_training_json(run_dir: Path, state: dict[str, Any]) -> None:
    path = Path(run_dir) / TRAINING_JSON
    try:
        write_json_atomic(path, {"format_version": FORMAT_VERSION, **state})
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


class Phase:
    """Context manager that appends the phase's row to phases.csv when it ends, ok or failed."""

    def __init__(self, run_dir: Path, name: str) -> None:
        self.run_dir, self.name = Path(run_dir), name
        self.ok = True

    def __enter__(self) -> Phase:
        self.start = time.time()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            append_phase(self.run_dir, self.name, self.start, time.time(), self.ok)
            return
        with contextlib.suppress(OSError):  # a full disk loses this row, never the phase's own error
            append_phase(self.run_dir, self.name, self.start, time.time(), False)
