"""A step log whose `step` or `step_time_s` means other than the run format says, read as the format's.

- **Within each epoch.** A loop that logs its batch index (`for step, batch in enumerate(loader)`) starts
  its count again each epoch: sorted by time, the step goes back to where it began while the run goes on
  (its `elapsed_s` does not start again; without one, no pause a restart needs). Read as it is, each epoch
  is a resumed session and the file "holds steps 1–100". Where every step back is such a restart, each
  epoch's steps follow the last: one running count.
- **Examples.** A loop that logs the examples it has seen as its step advances by the batch each row. Read
  as steps, the rate is the batch times too high. Where the step advances by the batch (≥ 2) in nearly
  every row and the rows say each is one step (its own `examples_per_s × step_time_s` is that batch and
  its time since the row before is its `step_time_s`; or training.json counts the step column's last
  value over the batch as its steps), the count is divided by the batch.
- **Milliseconds.** A `step_time_s` a thousand times what the rows' spacing fits (by the step's advance,
  or a row a step) is read in seconds, before the step column is read.

A resumed run (its `elapsed_s` starts again, or a pause before the step goes back), a rollback to an
earlier checkpoint, two ranks writing one file, or a log written every N steps is left as it is. What no
reading mends is said: a step that advances faster than its own step times allow
(steps_outrun_their_times) counts something finer than steps, a caveat.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from runformat import TRAINING_CSV
from runformat.bursts import BURST_GAP_S
from sizing.analysis.jobcheck import is_job
from sizing.analysis.sessions import GAP_FACTOR, GAP_MIN_S
from sizing.analysis.throughput import batch_size, rated_batch
from sizing.model import number

MIN_EPOCH_ROWS = 2  # an epoch logs at least this many rows: fewer, and the steps back are not restarts
EXAMPLES_ROW_SHARE = 0.9  # share of rows whose step advances by exactly the batch
ONE_STEP_MIN_RATIO = 0.8  # the rows' time since the row before over their step_time_s, for one step a row …
ONE_STEP_MAX_RATIO = 1.25  # … at most this
STEPS_MATCH_SHARE = 0.02  # training.json's steps against the step column's last value over the batch
MAX_STEPS_PER_STEP_TIME = 1.5  # a row's step advance × its step_time_s over its time since the row before
MIN_TIMED_ROWS = 10  # rows with a step time, a time since the row before and a step advance
MS_RATIO_SHARE = 0.1  # … a thousand, within this share: step_time_s in milliseconds


def as_steps(training: pd.DataFrame, training_info: dict) -> tuple[pd.DataFrame, list[str]]:
    """The step log (in time order) with its step column read as the run's steps and its step times in
    seconds, and a warning for each reading (running_steps, steps_from_examples, step_times_in_seconds)."""
    training, restarted = running_steps(training)
    training, milliseconds = step_times_in_seconds(training)
    training, examples = steps_from_examples(training, training_info)
    return training, [note for note in (restarted, milliseconds, examples) if note]


def step_times_in_seconds(training: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The step log with a step_time_s written in milliseconds read in seconds, and the warning: where its
    median row's step advance × step_time_s over its time since the row before is a thousand, within
    MS_RATIO_SHARE (every step a thousand times its time), or its step_time_s alone over that time is (a
    row a step, whatever its step column counts: examples, say). The log as it is, and None, otherwise."""
    ratios = (_steps_per_step_time(training), _steps_per_step_time(training, row_is_a_step=True))
    if not any(r is not None and abs(r / 1000 - 1) <= MS_RATIO_SHARE for r in ratios):
        return training, None
    counted = training.copy()
    counted["step_time_s"] = training["step_time_s"].to_numpy(dtype=float) / 1000
    return (
        counted,
        f"{TRAINING_CSV}: step_time_s is in milliseconds (a thousand times the rows' spacing): read in "
        "seconds",
    )


def running_steps(training: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The step log (in time order) with a count that restarts each epoch read as one running count, and
    the warning; the log as it is, and None, where its steps never go back or not only by restarts."""
    known = _with_a_step(training)
    if len(known) < 2 * MIN_EPOCH_ROWS:
        return training, None
    steps = known["step"].to_numpy(dtype=float)
    times = known["time_unix"].to_numpy(dtype=float)
    dstep = np.diff(steps)
    restarts = np.flatnonzero(dstep < 0)
    if restarts.size == 0:
        return training, None
    usual = float(np.median(dstep[dstep > 0])) if (dstep > 0).any() else 1.0
    floor = float(steps[restarts + 1].min())
    if floor > steps[0] + usual or (steps[restarts + 1] > floor + usual).any():
        return training, None  # back to somewhere inside the count: a rollback, or ranks interleaved
    if np.diff(np.concatenate(([-1], restarts))).min() < MIN_EPOCH_ROWS:
        return training, None
    if "elapsed_s" in known and np.isfinite(elapsed := known["elapsed_s"].to_numpy(dtype=float)).all():
        if (np.diff(elapsed)[restarts] < 0).any():
            return training, None  # a resumed session starts its elapsed_s again
    else:
        dt = np.diff(times)
        typical = float(np.median(dt[dt > 0])) if (dt > 0).any() else 0.0
        if (dt[restarts] > max(GAP_MIN_S, GAP_FACTOR * typical)).any():
            return training, None  # a pause a restart needs
    done = dstep.copy()
    done[restarts] = usual  # the log's usual stride: its cadence goes on across the restart
    last = steps[0] + float(done.sum())
    counted = _with_steps(training, known.index, steps[0] + np.concatenate(([0.0], np.cumsum(done))))
    note = (
        f"{TRAINING_CSV}: its step starts again {restarts.size} time(s) while the run goes on (a count "
        f"within each epoch): read as one running count, {steps[0]:,.0f}–{last:,.0f}"
    )
    return counted, note


def steps_from_examples(training: pd.DataFrame, training_info: dict) -> tuple[pd.DataFrame, str | None]:
    """The step log with a step column that counts examples divided by the batch, and the warning; the log
    as it is, and None, where the rows do not say so (module docstring)."""
    known = _with_a_step(training)
    if len(known) < 3:
        return training, None
    steps = known["step"].to_numpy(dtype=float)
    per_row = np.diff(steps)
    batch = batch_size(known, training_info)
    if batch is None or batch < 2 or float(np.mean(per_row == batch)) < EXAMPLES_ROW_SHARE:
        return training, None
    if not (_steps_counted(training_info, steps[-1] / batch) or _one_step_a_row(known, batch)):
        return training, None
    counted = _with_steps(training, known.index, steps / batch)
    first, last = steps[0] / batch, steps[-1] / batch
    note = (
        f"{TRAINING_CSV}: its step advances by the batch ({batch:,.0f}) a row, and each row is one step "
        f"(a count of examples): read as steps, {first:,.0f}–{last:,.0f}"
    )
    return counted, note


def steps_outrun_their_times(training: pd.DataFrame, training_info: dict) -> str | None:
    """'its step advances 2.0× as fast as its own step times allow: …' where the median row's step advance
    times its step_time_s, over its time since the row before, is above MAX_STEPS_PER_STEP_TIME: a step
    takes at least its own step time, so a step column advancing faster counts something finer (examples,
    micro-batches), or its step_time_s times several steps. None otherwise, for a job (its rows come in
    bursts, timed by the collector) and with fewer than MIN_TIMED_ROWS such rows."""
    ratio = None if is_job(training_info) else _steps_per_step_time(training)
    if ratio is None or ratio <= MAX_STEPS_PER_STEP_TIME:
        return None
    return (
        f"its step advances {ratio:,.1f}× as fast as its own step times allow (training.csv step_time_s): "
        "a step column counting examples or micro-batches, or a step_time_s that times several steps? Its "
        f"rate may be {ratio:,.1f}× too high"
    )


def _steps_per_step_time(training: pd.DataFrame, row_is_a_step: bool = False) -> float | None:
    """The median row's step advance (1 where row_is_a_step) × its step_time_s over its time since the row
    before (1 for a log of one row a step, each timed whole), over rows at least runformat.bursts.BURST_GAP_S
    after the one before (rows written in one burst are not apart by their steps' time); None with fewer than
    MIN_TIMED_ROWS such rows."""
    known = _with_a_step(training)
    if "step_time_s" not in known or len(known) < MIN_TIMED_ROWS + 1:
        return None
    advance = np.diff(known["step"].to_numpy(dtype=float))
    advance = np.where(advance > 0, 1.0, advance) if row_is_a_step else advance
    since = np.diff(known["time_unix"].to_numpy(dtype=float))
    took = known["step_time_s"].to_numpy(dtype=float)[1:]
    timed = np.isfinite(took) & (took > 0) & (since >= BURST_GAP_S) & (advance > 0)
    if timed.sum() < MIN_TIMED_ROWS:
        return None
    return float(np.median(advance[timed] * took[timed] / since[timed]))


def _with_steps(training: pd.DataFrame, rows: pd.Index, steps: np.ndarray) -> pd.DataFrame:
    """A copy of the step log whose `rows` have these steps (a float column, whatever the file's was)."""
    counted = training.copy()
    column = training["step"].to_numpy(dtype=float, copy=True)
    column[training.index.get_indexer(rows)] = steps
    counted["step"] = column
    return counted


def _with_a_step(training: pd.DataFrame) -> pd.DataFrame:
    """The rows with a step (a torn or emptied cell left out)."""
    return training[training["step"].notna()] if "step" in training else training.iloc[0:0]


def _steps_counted(training_info: dict, steps_if_examples: float) -> bool:
    """training.json's last step (global_step, else steps) is the step column's last value over the batch."""
    for field in ("global_step", "steps"):
        counted = number(training_info.get(field))
        if counted is not None and counted > 0:
            return abs(counted - steps_if_examples) <= STEPS_MATCH_SHARE * steps_if_examples
    return False


def _one_step_a_row(training: pd.DataFrame, batch: float) -> bool:
    """Each row's own cells say it is one step of `batch` examples: its examples_per_s × step_time_s is the
    batch, and the rows are as far apart as their step_time_s (ONE_STEP_MIN_RATIO to ONE_STEP_MAX_RATIO):
    the step advancing by the batch a row fits `batch` times its step times."""
    advance = _steps_per_step_time(training)
    return (
        rated_batch(training) == batch
        and advance is not None
        and ONE_STEP_MIN_RATIO <= batch / advance <= ONE_STEP_MAX_RATIO
    )
