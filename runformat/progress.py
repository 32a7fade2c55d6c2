"""How far a training got, even when its training.json is stale.

training.json is rewritten at every checkpoint and at the end; training.csv gets every step as it
happens. A training killed without its last word (kill -9, power loss, an old version dying of its own
output) leaves a training.json that says `running` (or too few steps) while training.csv holds every
step. Every reader (the collector's summary, the dashboard, the sizing report) asks here instead of
trusting training.json alone. Standard library only.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from runformat.layout import RUN_JSON, TRAINING_CSV, TRAINING_JSON
from runformat.records import RunRecord, TrainingRecord, raw_of, read_record

ENDED_UNRECORDED = "ended unrecorded"
LOSS_NOT_FINITE_FROM_STEP = "loss_not_finite_from_step"


@dataclass(frozen=True)
class TrainingProgress:
    steps: int | None  # steps of this training session (training.json's `steps`), None if unknown
    global_step: int | None
    status: str  # training.json's status, or ENDED_UNRECORDED when it is stale
    stale: bool  # training.json says running, but the training process is gone
    note: str  # why the figures differ from training.json; "" when they do not
    # the first step of the last stretch of non-finite losses (NaN, ±inf) that lasts to the end of this
    # session's training.csv: the training diverged there; None when its last loss read is finite
    loss_not_finite_from_step: int | None = None

    def applied_to(self, training: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """training.json's object with steps, global_step and status from training.csv where they differ,
        and `loss_not_finite_from_step` where the loss diverged; the note saying why ("" when none)."""
        if not training:
            return training, ""
        corrected = dict(training)
        if (self.steps, self.global_step) != (training.get("steps"), training.get("global_step")):
            corrected.update(steps=self.steps, global_step=self.global_step)
        if self.stale:
            corrected["status"] = self.status
        if self.loss_not_finite_from_step is not None:
            corrected[LOSS_NOT_FINITE_FROM_STEP] = self.loss_not_finite_from_step
        return corrected, self.note


def training_progress(run_dir: Path) -> TrainingProgress:
    run_dir = Path(run_dir)
    training, _ = read_record(TrainingRecord, run_dir / TRAINING_JSON)
    return progress_of(run_dir, training, lambda: read_record(RunRecord, run_dir / RUN_JSON)[0])


def progress_of(
    run_dir: Path, training: TrainingRecord | None, run: RunRecord | Callable[[], RunRecord | None] | None
) -> TrainingProgress:
    """training_progress from the records already read (`run` may be a function that reads run.json: it
    is needed only while training.json says running)."""
    status = (training and training.status) or ("not started" if not raw_of(training) else "unknown")
    json_steps = training.steps if training else None
    json_global = training.global_step if training else None
    start = training.start_unix if training else None
    csv_steps, csv_global, diverged = _csv_progress(Path(run_dir) / TRAINING_CSV, start)
    if status == "running" and training is not None and _process_gone(training, run):
        return TrainingProgress(
            steps=csv_steps if csv_steps is not None else json_steps,
            global_step=csv_global if csv_global is not None else json_global,
            status=ENDED_UNRECORDED,
            stale=True,
            note=f"{TRAINING_JSON} still says running but the training process is gone; "
            f"steps from {TRAINING_CSV}",
            loss_not_finite_from_step=diverged,
        )
    if csv_steps is not None and csv_steps > (json_steps or 0):
        note = (
            ""
            if status == "running"  # alive: training.json only catches up at the next checkpoint
            else f"{TRAINING_JSON} records {json_steps or 0} steps, {TRAINING_CSV} {csv_steps}; "
            f"steps from {TRAINING_CSV}"
        )
        return TrainingProgress(csv_steps, csv_global, status, False, note, diverged)
    return TrainingProgress(json_steps, json_global, status, False, "", diverged)


def _process_gone(training: TrainingRecord, run: RunRecord | Callable[[], RunRecord | None] | None) -> bool:
    """True when the training cannot still be running: its collector has finished, or its pid (on this
    host) no longer exists. False when that cannot be told (another host, an older training.json)."""
    run = run() if callable(run) else run
    if run is not None and run.end_reason not in (None, "running"):
        return True
    pid = _int(training.pid)
    if pid is None or pid <= 0 or training.host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):  # OverflowError: a pid no process can have
        return False
    return False


class StepRow(NamedTuple):
    """One complete row of training.csv."""

    time_unix: float
    step: int
    elapsed_s: float | None
    loss_total: float | None  # None: the loss was not read at this step (NaN and ±inf are readings)


def step_rows(path: Path, start_unix: float | None = None) -> Iterator[StepRow] | None:
    """training.csv's complete rows with a time and a step, at or after start_unix (so a resumed run's
    earlier sessions are left out); None without the file or its step and time columns. The one reader
    of the step log's rows; a row still being written waits."""
    try:
        with Path(path).open("r", encoding="utf-8", errors="replace") as handle:
            header = [name.strip() for name in handle.readline().strip().lstrip("\ufeff").split(",")]
    except OSError:
        return None
    if "step" not in header or "time_unix" not in header:
        return None
    return _rows(Path(path), header, start_unix)


def _rows(path: Path, header: list[str], start_unix: float | None) -> Iterator[StepRow]:
    time_at, step_at = header.index("time_unix"), header.index("step")
    elapsed_at = header.index("elapsed_s") if "elapsed_s" in header else None
    loss_at = header.index("loss_total") if "loss_total" in header else None
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            handle.readline()
            for line in handle:
                if not line.endswith("\n"):
                    break  # a row still being written
                cells = line.rstrip("\r\n").split(",")
                if len(cells) != len(header):
                    continue
                when, step = _float(cells[time_at]), _int(cells[step_at])
                if when is None or step is None or (start_unix is not None and when < start_unix - 1e-6):
                    continue
                elapsed = _float(cells[elapsed_at]) if elapsed_at is not None else None
                loss = _float(cells[loss_at].strip()) if loss_at is not None else None
                yield StepRow(when, step, elapsed, loss)
    except OSError:
        return


def _csv_progress(path: Path, start_unix: float | None) -> tuple[int | None, int | None, int | None]:
    """(rows of this session, last step, the step from which every loss read to the end is not finite) of
    training.csv; (None, None, None) without the file or its step column. A row that repeats the step before
    it (a logger attached twice) is not another step."""
    rows = step_rows(path, start_unix)
    if rows is None:
        return None, None, None
    count, last_step, diverged = 0, None, None
    for row in rows:
        count, last_step = count + (row.step != last_step), row.step
        if row.loss_total is not None:
            finite = math.isfinite(row.loss_total)
            diverged = None if finite else (diverged if diverged is not None else row.step)
    return count, last_step, diverged


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None
