"""Steady-state throughput from training.csv (the step log), else from training.json's totals; time to N
steps and to a target loss."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from runformat.bursts import burst_ends
from sizing.analysis import sessions as ss
from sizing.analysis.jobcheck import is_job
from sizing.model import number

DEFAULT_WARMUP_STEPS = 20
SHORT_RUN_STEPS = 3 * DEFAULT_WARMUP_STEPS
LOSS_WINDOW_STEPS = 20
FROM_STEP_LOG = "step log"
FROM_TOTALS = "from totals"
NO_WORK_COUNTER = "unknown (no work counter)"
NO_EXAMPLES_PER_STEP = "unknown (examples per step not known)"  # steps counted, no batch or examples
NOT_TIMED = "unknown (steps not timed: the step log came in too few bursts)"  # runformat.bursts


def examples_unknown(steps_per_s: float | None) -> str:
    """How an unknown examples/s reads: steps were counted (a job with no batch), or nothing was."""
    return NO_EXAMPLES_PER_STEP if steps_per_s else NO_WORK_COUNTER


@dataclass(frozen=True)
class Throughput:
    source: str  # FROM_STEP_LOG, FROM_TOTALS or NO_WORK_COUNTER
    steps_total: int | None
    steps_in_budget: int | None
    budget_s: float | None
    warmup_steps: int | None
    steady_steps: int | None
    steady_start_unix: float | None
    steady_end_unix: float | None
    steps_per_s: float | None
    batch_size: float | None
    examples_per_s: float | None
    first_step_s: float | None
    sessions: int = 1  # training sessions in the step log (a resumed run appends one)
    session_gaps_s: float = 0.0  # time between sessions, left out of the steady rate
    batch_steps_per_s: tuple[float, ...] = ()  # steps/s of contiguous batches of the steady rows
    steps_per_s_ci95: tuple[float, float] | None = None  # within-run, by batch means
    first_third_steps_per_s: float | None = None
    last_third_steps_per_s: float | None = None
    bursts: int = 0  # bursts the step log's rows came in (runformat.bursts); 0: each row timed
    pauses: ss.Pauses | None = None  # steady steps far slower than the median pace (sessions.pauses)

    @property
    def not_timed(self) -> bool:
        """Steps counted but not timed: the step log came in too few bursts for a rate."""
        return bool(self.bursts) and self.steps_per_s is None

    @property
    def steps_unknown(self) -> str:
        """How an unknown steps/s reads."""
        return NOT_TIMED if self.not_timed else NO_WORK_COUNTER

    @property
    def examples_unknown(self) -> str:
        """How an unknown examples/s reads: steps not timed, steps without examples, or nothing counted."""
        return NOT_TIMED if self.not_timed else examples_unknown(self.steps_per_s)

    @property
    def drift_fraction(self) -> float | None:
        """(last third − first third) / first third of the steady rate; None when unknown."""
        first, last = self.first_third_steps_per_s, self.last_third_steps_per_s
        return (last - first) / first if first and last is not None else None


def warmup_steps(step_count: int, training_info: dict) -> int:
    """Steps excluded as warm-up; always leaves ≥ 1 steady step when step_count ≥ 2."""
    stated = number(training_info.get("warmup_steps_excluded"))
    if stated is not None and stated >= 0:
        wanted = int(stated)
    else:
        wanted = DEFAULT_WARMUP_STEPS if step_count >= SHORT_RUN_STEPS else step_count // 3
    return min(max(1, wanted), max(step_count - 1, 0))


def clean_training(training: pd.DataFrame) -> pd.DataFrame:
    """Rows with a time and a step, in time order (a clock set back is mended before: clock_steps)."""
    if training.empty or "time_unix" not in training or "step" not in training:
        return training.iloc[0:0]
    rows = training.dropna(subset=["time_unix", "step"])
    return rows.sort_values("time_unix", kind="stable").reset_index(drop=True)


def training_elapsed(training: pd.DataFrame, training_info: dict) -> np.ndarray:
    """Training time at each row; a resumed session's `elapsed_s` (which starts again) continues from the
    end of the session before it, so the gap between sessions is not training time."""
    if "elapsed_s" in training and training["elapsed_s"].notna().all():
        elapsed = training["elapsed_s"].to_numpy(dtype=float)
        added = np.where(np.diff(elapsed) < 0, elapsed[:-1], 0.0)
        return elapsed + np.cumsum(np.concatenate([[0.0], added]))
    start = number(training_info.get("start_unix"))
    times = training["time_unix"].to_numpy(dtype=float)
    if start is not None:
        return times - start
    first_step = training["step_time_s"].to_numpy(dtype=float)[0] if "step_time_s" in training else 0.0
    return times - (times[0] - first_step)


def batch_size(training: pd.DataFrame, training_info: dict) -> float | None:
    stated = number(training_info.get("batch_size"))
    if stated is not None and stated > 0:
        return stated
    return logged_batch(training)


def logged_batch(training: pd.DataFrame) -> float | None:
    """Examples a step as the step log has them: its `examples` count's (counted_batch), else the median of
    examples_per_s × step_time_s, whole. None where it has neither."""
    counted = counted_batch(training)
    return rated_batch(training) if counted is None else counted


def rated_batch(training: pd.DataFrame) -> float | None:
    """Examples a step by the step log's own rate: the median of examples_per_s × step_time_s, whole. None
    where it has neither or no row with both."""
    if not {"examples_per_s", "step_time_s"} <= set(training.columns):
        return None
    per_step = (training["examples_per_s"] * training["step_time_s"]).dropna()
    return float(round(per_step.median())) if not per_step.empty else None


def counted_batch(training: pd.DataFrame) -> float | None:
    """Examples a step as the step log's `examples` column counts them (a job's own count, not a rate
    derived from a batch size): its growth per step, the median, whole. None without two counts."""
    if training.empty or not {"examples", "step"} <= set(training.columns):
        return None
    counted = training[["examples", "step"]].dropna().to_numpy(dtype=float)
    examples, steps = np.diff(counted[:, 0]), np.diff(counted[:, 1])
    per_step = examples[steps > 0] / steps[steps > 0]
    return float(round(np.median(per_step))) if per_step.size else None


def throughput(training: pd.DataFrame, training_info: dict) -> Throughput:
    """From the step log when there is one with ≥ 2 steps, else from training.json's totals."""
    rows = clean_training(training)
    if len(rows) < 2:
        return throughput_from_totals(training_info, batch_size(rows, training_info))
    budget = number(training_info.get("duration_budget_s"))
    budget = budget if budget and budget > 0 else None
    size = batch_size(rows, training_info)
    elapsed = training_elapsed(rows, training_info)
    first_step = number(training_info.get("first_step_s"))
    first_step = float(elapsed[0]) if first_step is None else first_step
    times = rows["time_unix"].to_numpy(dtype=float)
    began = float(times[0] - elapsed[0]) if np.isfinite(elapsed[0]) else None
    ends = burst_ends(times.tolist(), began) if is_job(training_info) else None  # ours times each step
    if ends is None:
        steady = ss.steady_sessions(rows, lambda count: warmup_steps(count, training_info))
        warmup = steady.warmup
    else:  # only each burst's last row is timed (steps_between_bursts)
        steady, warmup = steps_between_bursts(rows, ends, warmup_steps(len(rows), training_info))
    rate = steady.steps_per_s
    start, end = steady.longest if steady.longest else (None, None)
    stride = number(training_info.get("loss_read_every_steps"))
    batches = ss.batch_rates(steady, int(stride) if stride and stride >= 1 else 1)
    first_third, last_third = ss.thirds(steady)
    return Throughput(
        FROM_STEP_LOG,
        len(rows),
        int((elapsed <= budget).sum()) if budget else None,
        budget,
        warmup,
        steady.steady_steps,
        start,
        end,
        rate,
        size,
        rate * size if rate is not None and size else None,
        first_step,
        steady.sessions,
        steady.gaps_s,
        batches,
        ss.batch_means_ci95(rate, batches),
        first_third,
        last_third,
        len(ends) if ends is not None else 0,
        ss.pauses(steady, int(stride) if stride and stride >= 1 else 1),
    )


def steps_between_bursts(rows: pd.DataFrame, ends: list[int], warmup_rows: int) -> tuple[ss.Steady, int]:
    """The steady increments of a step log that came in bursts (runformat.bursts), and its warm-up in rows.

    A burst's last row is a time mark: its step was done by then, while the steps its buffer still held
    lag by about one buffer. So the marks run from the burst the warm-up ends in to the last burst but one:
    the last is often the buffer emptied at exit, with no lag, which would overstate the last interval."""
    warm = next(k for k, end in enumerate(ends) if end >= warmup_rows - 1)
    marks = rows.iloc[ends[:-1]].reset_index(drop=True)
    return ss.steady_sessions(marks, lambda count: min(warm + 1, count)), ends[warm] + 1


def throughput_from_totals(info: dict, size: float | None) -> Throughput:
    """training.json's steady_steps_per_s, else (global_step − initial_step) over the time after the first
    step; unknown when training.json has neither."""
    start, end = number(info.get("start_unix")), number(info.get("end_unix"))
    first = number(info.get("first_step_s"))
    steps = number(info.get("steps"))
    if steps is None and number(info.get("global_step")) is not None:
        steps = number(info.get("global_step")) - (number(info.get("initial_step")) or 0.0)
    rate = number(info.get("steady_steps_per_s"))
    steady_start = start + first if start is not None and first is not None else start
    if rate is None and steps and steady_start is not None and end is not None and end > steady_start:
        rate = (steps - 1 if first is not None else steps) / (end - steady_start)
    if rate is not None and rate <= 0:
        rate = None
    if rate is None and steps is None:
        return Throughput(NO_WORK_COUNTER, None, None, None, None, None, None, None, None, size, None, first)
    examples = number(info.get("steady_examples_per_s"))
    if examples is None and rate is not None and size:
        examples = rate * size
    window_known = steady_start is not None and end is not None and end > steady_start
    return Throughput(
        FROM_TOTALS if rate is not None else NO_WORK_COUNTER,
        int(steps) if steps is not None else None,
        None,
        number(info.get("duration_budget_s")),
        None,
        None,
        steady_start if window_known else None,
        end if window_known else None,
        rate,
        size,
        examples,
        first,
    )


@dataclass(frozen=True)
class TimeTo:
    seconds: float | None
    projected: bool = False
    step: float | None = None


def time_to_steps(
    training: pd.DataFrame, training_info: dict, target_step: float, steady_steps_per_s: float | None
) -> TimeTo:
    """Elapsed training time when `step` first reaches target_step; projected at the steady rate beyond."""
    rows = clean_training(training)
    if rows.empty:
        return TimeTo(None)
    elapsed = training_elapsed(rows, training_info)
    steps = rows["step"].to_numpy(dtype=float)
    reached = np.flatnonzero(steps >= target_step)
    if reached.size:
        return TimeTo(float(elapsed[reached[0]]), False, float(steps[reached[0]]))
    if not steady_steps_per_s:
        return TimeTo(None)
    remaining = (target_step - steps[-1]) / steady_steps_per_s
    return TimeTo(float(elapsed[-1] + remaining), True, float(target_step))


def smoothed_loss(training: pd.DataFrame, window: int = LOSS_WINDOW_STEPS) -> pd.Series:
    """Trailing mean of loss_total over `window` steps (the whole run when it is shorter)."""
    rows = clean_training(training)
    if rows.empty or "loss_total" not in rows:
        return pd.Series(dtype=float)
    losses = pd.to_numeric(rows["loss_total"], errors="coerce")
    size = max(1, min(window, int(losses.notna().sum())))
    return losses.rolling(size, min_periods=size).mean()


def time_to_loss(
    training: pd.DataFrame, training_info: dict, target_loss: float, window: int = LOSS_WINDOW_STEPS
) -> TimeTo:
    """Elapsed training time when the smoothed loss first falls to target_loss or below."""
    rows = clean_training(training)
    smooth = smoothed_loss(rows, window)
    if smooth.empty:
        return TimeTo(None)
    hits = np.flatnonzero(smooth.to_numpy(dtype=float) <= target_loss)
    if not hits.size:
        return TimeTo(None)
    elapsed = training_elapsed(rows, training_info)
    return TimeTo(float(elapsed[hits[0]]), False, float(rows["step"].iloc[hits[0]]))


def min_smoothed_loss(training: pd.DataFrame, window: int = LOSS_WINDOW_STEPS) -> float | None:
    smooth = smoothed_loss(training, window).dropna()
    return float(smooth.min()) if not smooth.empty else None


def common_target_loss(minimum_losses: Iterable[float | None]) -> float | None:
    """The lowest smoothed loss that every run reached: the highest of the runs' minima."""
    reached = [m for m in minimum_losses if m is not None]
    return max(reached) if reached else None
