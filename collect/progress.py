"""The live progress line of a timed run, built from the collector's samples and the run directory.

It only reads: telemetry rows handed over by the sampling loop, and the training's own files
(training.csv, phases.csv) followed incrementally, as any reader of the run directory may.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from runformat import PHASES_CSV, TRAINING_CSV, format_duration

PHASE_ORDER = ("train", "export", "evaluate", "detect", "infer")
JOB_PHASES = ("train",)  # a job (collect timed ... -- COMMAND): its own command, no phase after it
RATE_WINDOW_S = 30.0
STARTING = "starting (framework, model and input pipeline)"
JOB_STARTING = "running, no step seen yet"


class CsvTail:
    """Follows a CSV file that another process appends to: header once, then each new complete row."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = ""
        self._header: list[str] | None = None

    def new_rows(self) -> list[dict[str, str]]:
        try:
            with self.path.open("r", encoding="utf-8", newline="") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
                self._offset = handle.tell()
        except FileNotFoundError:
            return []
        text = self._partial + chunk
        complete, _, self._partial = text.rpartition("\n")
        if not complete:
            return []
        rows = list(csv.reader(io.StringIO(complete + "\n")))
        if self._header is None and rows:
            self._header, rows = rows[0], rows[1:]
        header = self._header or []
        return [dict(zip(header, row, strict=True)) for row in rows if len(row) == len(header)]


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


@dataclass
class TrainingState:
    """What the training has reported so far."""

    step: int | None = None
    loss: float | None = None
    steps_per_s: float | None = None
    train_elapsed_s: float | None = None
    phase: str = "starting"
    phases: tuple[str, ...] = PHASE_ORDER
    starting_text: str = STARTING
    _recent: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=4096))

    def add_row(self, row: dict[str, str]) -> None:
        step, when = _number(row.get("step")), _number(row.get("time_unix"))
        if step is None or when is None:
            return
        self.step = int(step)
        self.loss = _number(row.get("loss_total"))
        self.train_elapsed_s = _number(row.get("elapsed_s"))
        self.phase = "train"
        self._recent.append((when, step))
        while self._recent and when - self._recent[0][0] > RATE_WINDOW_S:
            self._recent.popleft()
        (t0, s0) = self._recent[0]
        self.steps_per_s = (step - s0) / (when - t0) if when > t0 else self.steps_per_s

    def phases_done(self, names: list[str]) -> None:
        pending = [phase for phase in self.phases if phase not in names]
        if names:
            self.phase = pending[0] if pending else "finishing"


def render_line(
    elapsed_s: float, budget_s: float, state: TrainingState, telemetry: dict[str, float | None]
) -> str:
    """One status line: time, phase and budget, step, loss, throughput, temperatures and GPU power."""
    if state.phase == "train" and state.train_elapsed_s is not None:
        phase = f"train {format_duration(state.train_elapsed_s)} / {format_duration(budget_s)}"
    elif state.phase == "starting":
        phase = state.starting_text
    else:
        phase = f"{state.phase} (training budget done)"
    parts = [format_duration(elapsed_s), phase]
    if state.step is not None:
        parts.append(f"step {state.step}")
    if state.loss is not None:
        parts.append(f"loss {state.loss:.3f}")
    if state.steps_per_s is not None:
        parts.append(f"{state.steps_per_s:.2f} steps/s")
    cpu_temp = telemetry.get("cpu_temp_c")
    cpu = f"CPU {telemetry.get('cpu_util_pct') or 0:.0f}%"
    parts.append(cpu + (f" {cpu_temp:.0f}°C" if cpu_temp is not None else ""))
    for name, value in telemetry.items():
        if name.startswith("gpu") and name.endswith("_temp_c") and value is not None:
            gpu = name.removesuffix("_temp_c")
            power = telemetry.get(f"{gpu}_power_w")
            parts.append(f"{gpu.upper()} {value:.0f}°C" + (f" {power:.0f} W" if power is not None else ""))
    return "  ".join(parts)


class ProgressReporter:
    """Samples to a live line: rewritten in place on a terminal, a plain line now and then otherwise."""

    def __init__(
        self,
        budget_s: float,
        out: TextIO,
        clock: Callable[[], float] = time.monotonic,
        every_s: float | None = None,
        job: bool = False,
    ) -> None:
        """`job`: the user's own command (no phases after training; it may never report a step)."""
        self.budget_s = budget_s
        self.out = out
        self.clock = clock
        self.interactive = out.isatty()
        self.every_s = every_s if every_s is not None else (1.0 if self.interactive else 30.0)
        self.state = TrainingState(phases=JOB_PHASES, starting_text=JOB_STARTING) if job else TrainingState()
        self.peaks: dict[str, float] = {}
        self._peak_columns: list[str] | None = None
        self._run_dir: Path | None = None
        self._training: CsvTail | None = None
        self._started = clock()
        self._last_print = -math.inf
        self._line_open = False
        self.broken = False

    def start(self, run_dir: Path) -> None:
        self._run_dir = run_dir
        self._training = CsvTail(run_dir / TRAINING_CSV)
        self._started = self.clock()

    def on_sample(self, row: dict[str, float | None]) -> None:
        if self._peak_columns is None:  # the header is fixed at the first row: pick the columns once
            self._peak_columns = [name for name in row if name.endswith(("_temp_c", "_power_w"))]
        for name in self._peak_columns:
            value = row.get(name)
            if value is not None and value > self.peaks.get(name, -math.inf):
                self.peaks[name] = value
        now = self.clock()
        if now - self._last_print < self.every_s:
            return
        self._last_print = now
        self._refresh_training()
        self._print(render_line(now - self._started, self.budget_s, self.state, row))

    def finish(self) -> None:
        if self._line_open:
            self._line_open = False
            with contextlib.suppress(OSError, ValueError):
                self.out.write("\n")
                self.out.flush()

    def _refresh_training(self) -> None:
        if self._training is None or self._run_dir is None:
            return
        for row in self._training.new_rows():
            self.state.add_row(row)
        phases_file = self._run_dir / PHASES_CSV
        if phases_file.exists():
            with phases_file.open(encoding="utf-8", newline="") as handle:
                self.state.phases_done([row.get("phase", "") for row in csv.DictReader(handle)])

    def _print(self, line: str) -> None:
        if self.broken:
            return
        try:
            if self.interactive:
                self.out.write("\r\x1b[K" + line)
                self._line_open = True
            else:
                self.out.write(line + "\n")
            self.out.flush()
        except (OSError, ValueError):  # the console is gone (hung-up terminal, closed pipe): no more lines
            self.broken = True
            self._line_open = False
