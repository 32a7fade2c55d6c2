"""Writers for the training files of a run directory: training.csv, training.json, phases.csv."""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any

from runformat import FORMAT_VERSION, PHASES_CSV, TRAINING_CSV, TRAINING_JSON, write_json_atomic

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
PHASE_COLUMNS = ["phase", "start_unix", "end_unix", "status"]


class TrainingCsv:
    """One row per step, flushed as written; appends (header once) so a resumed run continues the file."""

    def __init__(self, run_dir: Path) -> None:
        path = Path(run_dir) / TRAINING_CSV
        needs_header = not path.exists() or path.stat().st_size == 0
        self._handle = path.open("a", newline="", encoding="utf-8")
        self._writer = csv.writer(self._handle)
        if needs_header:
            self._writer.writerow(TRAINING_COLUMNS)
            self._handle.flush()

    def write(
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
        row = [f"{time_unix:.6f}", f"{elapsed_s:.6f}", step]
        row += [f"{losses[name]:.6g}" for name in LOSS_COLUMNS]
        row += [f"{learning_rate:.6g}", f"{step_time_s:.6f}", f"{batch_size / step_time_s:.4f}"]
        self._writer.writerow(row)
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def append_phase(run_dir: Path, phase: str, start_unix: float, end_unix: float, ok: bool) -> None:
    path = Path(run_dir) / PHASES_CSV
    needs_header = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        if needs_header:
            writer.writerow(PHASE_COLUMNS)
        writer.writerow([phase, f"{start_unix:.6f}", f"{end_unix:.6f}", "ok" if ok else "failed"])


def write_training_json(run_dir: Path, state: dict[str, Any]) -> None:
    write_json_atomic(Path(run_dir) / TRAINING_JSON, {"format_version": FORMAT_VERSION, **state})


class Phase:
    """Context manager that appends the phase's row to phases.csv when it ends, ok or failed."""

    def __init__(self, run_dir: Path, name: str) -> None:
        self.run_dir, self.name = Path(run_dir), name
        self.ok = True

    def __enter__(self) -> Phase:
        self.start = time.time()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        append_phase(self.run_dir, self.name, self.start, time.time(), self.ok and exc_type is None)
