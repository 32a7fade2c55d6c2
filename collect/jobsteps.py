"""A job's steps, from matched output lines or protocol records, into training.csv on the telemetry clock.

The collector writes training.csv for a job in the shape the training workload writes it
(docs/run-format.md, "A job's training files"): one row per step seen, `time_unix` when the collector saw the
step (or the protocol line's own `time_unix`: the same clock on the same host). A step is a row only when it
goes forward: a repeated or smaller step is skipped.
"""

from __future__ import annotations

import csv
import math
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runformat import TRAINING_CSV

JOB_COLUMNS = ["time_unix", "elapsed_s", "step", "examples", "loss_total", "step_time_s", "examples_per_s"]
MAX_EXTRA_COLUMNS = 20
_COLUMN_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if not math.isinf(value) else None


@dataclass
class Step:
    step: int
    time_unix: float
    examples: float | None = None
    loss: float | None = None
    extras: dict[str, float] = field(default_factory=dict)


class StepCounter:
    """Named groups of matched lines -> Steps: `step` as it is; `batch` added to the batches of the epochs
    before (a new `epoch` value, or without epoch groups a batch going back, starts an epoch; an epoch adds
    its `batches` where a line said them, else its last batch seen); `loss` on a line without a step
    waits for the next step."""

    def __init__(self, has_epoch: bool) -> None:
        self.has_epoch = has_epoch
        self.epoch: str | None = None
        self.offset = 0  # batches of the epochs before
        self.last_batch = 0
        self.epoch_batches: int | None = None  # the current epoch's batches, where a line said them
        self.pending_loss: float | None = None

    def _next_epoch(self) -> None:
        done = self.epoch_batches if self.epoch_batches and self.epoch_batches >= self.last_batch else None
        self.offset += done or self.last_batch
        self.last_batch = 0
        self.epoch_batches = None

    def feed(self, groups: dict[str, str], time_unix: float) -> Step | None:
        loss = _number(groups.get("loss"))
        epoch = groups.get("epoch")
        if epoch is not None and epoch != self.epoch:
            if self.epoch is not None:
                self._next_epoch()
            self.epoch = epoch
        step: int | None = None
        if groups.get("step") is not None:
            step = int(groups["step"])
        elif groups.get("batch") is not None:
            batch = int(groups["batch"])
            if batch < self.last_batch:
                if self.has_epoch:
                    batch = -1  # going back within an epoch (an evaluation's bar): not training
                else:
                    self._next_epoch()
            if batch >= 0 and groups.get("batches") is not None:
                self.epoch_batches = int(groups["batches"])
            if batch >= 0:
                self.last_batch = batch
                step = self.offset + batch
        examples = _number(groups.get("examples"))
        if step is None and examples is None:
            if loss is not None:
                self.pending_loss = loss
            return None
        if loss is None:
            loss, self.pending_loss = self.pending_loss, None
        else:
            self.pending_loss = None
        return Step(step if step is not None else -1, time_unix, examples, loss)


class StepLog:
    """training.csv of a job: a row per step that goes forward. Thread-safe (the output pump and the
    protocol reader both write). A declared `batch_size` gives examples/s where steps carry no examples."""

    def __init__(self, run_dir: Path, start_unix: float, batch_size: int | None = None) -> None:
        self.path = Path(run_dir) / TRAINING_CSV
        self.start_unix = start_unix
        self.batch_size = batch_size
        self.rows = 0
        self.first: Step | None = None
        self.last: Step | None = None
        self.skipped = 0  # steps that did not go forward
        self.write_error: str | None = None
        self._columns: list[str] | None = None
        self._handle: Any = None
        self._writer: Any = None
        self._lock = threading.Lock()

    def add(self, step: Step) -> bool:
        """Write the step's row; False when it does not go forward (or it cannot be written)."""
        with self._lock:
            last = self.last
            if step.step < 0 and step.examples is not None:  # examples alone: each new count is a step
                if last is not None and (last.examples is None or step.examples <= last.examples):
                    self.skipped += 1
                    return False
                step.step = last.step + 1 if last is not None else 1
            if step.step <= 0 or (last is not None and step.step <= last.step):
                self.skipped += 1
                return False
            if last is not None and step.time_unix < last.time_unix:
                step.time_unix = last.time_unix  # rows stay in time order
            self._write(step, last)
            self.first = self.first or step
            self.last = step
            self.rows += 1
            return True

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    def restart(self) -> int:
        """Drop every row so far (training.csv starts again with the next step); the rows dropped."""
        with self._lock:
            dropped = self.rows
            if self._handle is not None:
                self._handle.close()
            self._handle = self._writer = self._columns = None
            self.first = self.last = None
            self.rows = 0
            try:
                self.path.unlink(missing_ok=True)
            except OSError as exc:
                self.write_error = f"cannot write {TRAINING_CSV}: {exc.strerror or exc}"
            return dropped

    def _write(self, step: Step, last: Step | None) -> None:
        if self.write_error is not None:
            return
        try:
            if self._writer is None:
                self._open(step)
            self._writer.writerow(self._row(step, last))
            self._handle.flush()
        except OSError as exc:
            self.write_error = f"cannot write {TRAINING_CSV}: {exc.strerror or exc}"

    def _open(self, first: Step) -> None:
        extras = [name for name in first.extras if _COLUMN_NAME.match(name) and name not in JOB_COLUMNS]
        self._columns = JOB_COLUMNS + sorted(extras)[:MAX_EXTRA_COLUMNS]
        self._handle = self.path.open("a", newline="", encoding="utf-8")
        self._writer = csv.writer(self._handle)
        self._writer.writerow(self._columns)

    def _row(self, step: Step, last: Step | None) -> list[str]:
        since_t = step.time_unix - (last.time_unix if last else self.start_unix)
        since_steps = step.step - (last.step if last else 0)
        step_time = since_t / since_steps if since_steps > 0 and since_t > 0 else None
        rate = None
        if last is not None and step.examples is not None and last.examples is not None and since_t > 0:
            rate = (step.examples - last.examples) / since_t
        elif self.batch_size and step_time:
            rate = self.batch_size / step_time
        cells = {
            "time_unix": f"{step.time_unix:.6f}",
            "elapsed_s": f"{step.time_unix - self.start_unix:.6f}",
            "step": str(step.step),
            "examples": _cell(step.examples, "{:.0f}"),
            "loss_total": _cell(step.loss, "{:.6g}"),
            "step_time_s": _cell(step_time, "{:.6f}"),
            "examples_per_s": _cell(rate, "{:.4f}"),
        }
        for name, value in step.extras.items():
            cells[name] = _cell(value, "{:.6g}")
        return [cells.get(name, "") for name in self._columns or JOB_COLUMNS]


def _cell(value: float | None, form: str) -> str:
    if value is None:
        return ""
    return "nan" if math.isnan(value) else form.format(value)
