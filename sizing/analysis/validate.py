"""The loading boundary: every run.json / training.json / inference.json field sizing reads, type-checked.

`validated_run(RunData) -> RunData` drops each field of the wrong type (a list where an object belongs, text
or NaN where a number belongs) so it reads as unknown, with one warning per file naming the fields, by the
checks runformat.reader applies (runformat.records declares each field's type); it
makes every telemetry and step-log cell a finite number or empty, drops rows without a finite time, and
puts rows in time order (saying so). It is idempotent: analysis.load and build_report both apply it, so runs
parsed elsewhere (the dashboard's caches) pass the same checks.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from pandas.api.types import is_numeric_dtype

from runformat import (
    INFERENCE_JSON,
    PHASES_COLUMNS,
    PHASES_CSV,
    RUN_JSON,
    TELEMETRY_CSV,
    TRAINING_CSV,
    TRAINING_JSON,
)
from runformat.columns import TIME_COLUMNS, gpu_column, gpu_indices, split_gpu_column
from runformat.records import LAST_UNIX_S, InferenceRecord, RunRecord, TrainingRecord, checked, one_warning
from runformat.tuning import tag_disagrees, tuning_problems
from sizing.analysis.cells import as_numbers
from sizing.analysis.clock_steps import (
    ClockSteps,
    clock_steps,
    moved_ends,
    on_one_clock,
    phases_on_one_clock,
    said,
)
from sizing.analysis.coarse_times import (
    step_log_in_another_zone,
    times_from_elapsed,
    times_from_start,
    times_in_another_zone,
    times_in_finer_units,
)
from sizing.analysis.signature import listed_gpus
from sizing.analysis.step_counts import as_steps
from sizing.model import RunData, number

TEXT_COLUMNS = {PHASES_CSV: ("phase", "status")}
NOT_NEGATIVE_SUFFIXES = ("_pct", "_bytes", "_bps", "_bytes_per_s", "_w", "_j", "_mhz")
GPU_PCT_MAX = 101.0  # a GPU's own percentages (NVML, GPM, DCGM) are 0-100: above it, a sentinel or a misread
BLANK_MIN = 2.0**47  # DCGM's blank values (FP64 2^47, INT64 near 2^63) and above: no reading is this large
FRACTION_SUSPECTS = ("util_pct", "mem_util_pct")  # NVML's whole-percent utilizations
POWER_SUFFIXES = ("power_w", "power_instant_w")
WORKING_POWER_FACTOR = 1.5  # a board whose power's 95th percentile is this × its 5th did work
UNIT_CEILINGS = (  # no clock reaches 100 GHz (INT32 blanks do); no chip works at 150 °C (GPUs stop near 95)
    ("_mhz", 1e5, ""),
    ("_c", 150.0, " °C: kelvin or millidegrees?"),
)


def checked_object(data: object, file: str, record: type) -> tuple[dict, str | None]:
    """A JSON object as runformat.reader checks it: without its fields of the wrong type, and the file's
    one warning naming them."""
    kept, problems = checked(record, data if isinstance(data, dict) else {}, file)
    return kept, one_warning(problems)


Mended = tuple[np.ndarray, ClockSteps]  # a file's times as written, and the clock steps mended in them


def checked_frame(
    frame: pd.DataFrame, file: str, start_unix: float | None = None, other: ClockSteps | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """Numeric cells finite or NaN (inf and text read as empty); rows with a finite time, in time order (a
    clock stepped mid-run mended: clock_steps, `other` the clock steps found in the run's other file); a
    file none of whose rows can be placed in time, not read. A time_unix rounded by a spreadsheet is rebuilt
    from elapsed_s and the file's `start_unix` (run.json's for telemetry, training.json's for the step log)
    where given (coarse_times)."""
    checked, problems, _ = checked_and_mended(frame, file, start_unix, other)
    return checked, problems


def checked_and_mended(
    frame: pd.DataFrame, file: str, start_unix: float | None, other: ClockSteps | None = None
) -> tuple[pd.DataFrame, list[str], Mended | None]:
    """checked_frame's frame and warnings, and the clock steps mended in it with its times as written."""
    if frame.empty:
        return frame, [], None
    missing = _unplaced(frame, file)
    if missing:
        header = ", ".join(str(name) for name in list(frame.columns)[:4])
        unread = f"{file} has no {missing} (its header begins {header[:80]!r}): not read"
        return frame.iloc[0:0], [unread], None
    text = TEXT_COLUMNS.get(file, ())
    numeric = frame
    convert = [c for c in frame.columns if c not in text and not is_numeric_dtype(frame[c])]
    problems = []
    if convert:  # only text-bearing columns are read again (as load reads them): a float column already is
        numeric = frame.copy()
        numeric[convert], cells = as_numbers(frame[convert], skip_headers=False)
        problems += [f"{file}: {cells}"] if cells else []
    values = [numeric[c] for c in numeric.columns if c not in text]
    infinite = int(sum(np.isinf(v.to_numpy(dtype=float)).sum() for v in values))
    if infinite:
        problems.append(f"{file}: {infinite} infinite cell(s) read as empty")
        numeric = numeric.replace([np.inf, -np.inf], np.nan)
    time_column = "start_unix" if file == PHASES_CSV else "time_unix"
    if time_column not in numeric:
        return numeric, problems, None
    if file in (TELEMETRY_CSV, TRAINING_CSV):
        records = RUN_JSON if file == TELEMETRY_CSV else TRAINING_JSON
        numeric, finer = times_in_finer_units(numeric, file, start_unix, records)
        numeric, rebuilt = times_from_start(numeric, file, start_unix, records)
        numeric, zoned = times_in_another_zone(numeric, file, start_unix, records)
        problems += [note for note in (finer, rebuilt, zoned) if note]
    times = numeric[time_column]
    if times.isna().any():
        problems.append(f"{file}: {int(times.isna().sum())} row(s) without a time left out")
        numeric = numeric[times.notna()]
    beyond = numeric[time_column] > LAST_UNIX_S
    if beyond.any():
        problems.append(
            f"{file}: {int(beyond.sum())} row(s) with a {time_column} past the year 9999 left out "
            "(not seconds since 1970: milliseconds?)"
        )
        numeric = numeric[~beyond]
    if file in (TELEMETRY_CSV, TRAINING_CSV):
        numeric, rounded = times_from_elapsed(numeric, file, start_unix)
        problems += [rounded] if rounded else []
    stepped = None
    written = numeric[time_column].to_numpy(dtype=float)
    steps = (
        clock_steps(numeric, file, other)
        if file in (TELEMETRY_CSV, TRAINING_CSV) and len(numeric) > 1
        else None
    )
    if steps is not None:
        problems.append(said(file, numeric, steps))
        stepped, numeric = (written, steps), on_one_clock(numeric, steps)
    ordered = numeric[time_column].to_numpy(dtype=float)
    if ordered.size > 1 and (np.diff(ordered) < 0).any():
        problems.append(
            f"{file}: rows out of time order ({int((np.diff(ordered) < 0).sum())}): sorted by time"
        )
        numeric = numeric.sort_values(time_column, kind="stable")
    repeated = numeric[time_column].duplicated() if file == TELEMETRY_CSV else None
    if repeated is not None and repeated.any():  # one sampler never stamps two rows alike: a file kept twice
        problems.append(f"{file}: {int(repeated.sum())} row(s) repeat an earlier row's time: the first kept")
        numeric = numeric[~repeated.to_numpy()]
    twice = numeric.duplicated() if file == TRAINING_CSV else None
    if twice is not None and twice.any():  # a step is logged once: a logger attached twice, a file kept twice
        problems.append(f"{file}: {int(twice.sum())} row(s) repeat an earlier one, cell for cell: first kept")
        numeric = numeric[~twice.to_numpy()]
    return numeric.reset_index(drop=True), problems, stepped


def _unplaced(frame: pd.DataFrame, file: str) -> str | None:
    """What a file lacks without which none of its rows can be placed in time (another tool's names for
    the columns, another separator, a file read in the wrong encoding)."""
    columns = {str(column).strip() for column in frame.columns}
    if file == TELEMETRY_CSV and not columns & {"time_unix", "elapsed_s"}:
        return "time_unix or elapsed_s column"
    if file == TRAINING_CSV and not {"time_unix", "step"} <= columns:
        return "time_unix and step columns"
    return None


def impossible_cells(
    frame: pd.DataFrame, gpu_memory_bytes: dict[int, float]
) -> tuple[pd.DataFrame, str | None]:
    """telemetry.csv with the cells no reading can hold read as empty (a counter's "not available"
    sentinel, a column misread): below 0 in a column of percent, bytes, watts, joules or MHz; above
    GPU_PCT_MAX in a GPU's percentage; a GPU's used memory above its total (run.json); a clock or a
    temperature above UNIT_CEILINGS; anything else at BLANK_MIN or above. And the warning."""
    found: list[str] = []
    cleaned = frame
    for column in frame.columns:
        name = str(column)
        if name in TIME_COLUMNS:
            continue
        values = frame[column].to_numpy(dtype=float)
        gpu = split_gpu_column(name)
        total = gpu_memory_bytes.get(gpu[0]) if gpu is not None and gpu[1] == "mem_used_bytes" else None
        with np.errstate(invalid="ignore"):
            if gpu is not None and name.endswith("_pct"):
                over, above = values > GPU_PCT_MAX, f"above {GPU_PCT_MAX:g} %"
            elif total:
                over, above = values > total, f"above the GPU's {total / 2**30:.0f} GiB"
            elif unit := next((u for u in UNIT_CEILINGS if name.endswith(u[0])), None):
                over, above = values > unit[1], f"above {unit[1]:,.0f}{unit[2]}"
            else:
                over, above = values >= BLANK_MIN, "at a counter's blank value (≥ 2^47)"
            below_zero = values < 0 if name.endswith(NOT_NEGATIVE_SUFFIXES) else np.zeros(values.shape, bool)
        if not (below_zero.any() or over.any()):
            continue
        counts = [f"{int(m.sum())} {what}" for m, what in ((below_zero, "below 0"), (over, above)) if m.any()]
        found.append(f"{name}: {', '.join(counts)}")
        cleaned = cleaned if cleaned is not frame else frame.copy()
        cleaned[column] = np.where(below_zero | over, np.nan, values)
    if not found:
        return frame, None
    return cleaned, f"{TELEMETRY_CSV}: cells no reading can hold read as empty ({'; '.join(found)})"


def step_log_read(training: pd.DataFrame, training_info: dict) -> tuple[pd.DataFrame, list[str]]:
    """The checked step log as the run's: moved onto its training's clock where it was stamped in local time
    without elapsed_s (coarse_times.step_log_in_another_zone), its step column read as the run's steps
    (step_counts.as_steps); and a warning for each reading. The report and the dashboard both read it so."""
    zoned, moved = step_log_in_another_zone(training, training_info)
    counted, notes = as_steps(zoned, training_info)
    return counted, [moved, *notes] if moved else notes


def phases_columns(phases: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """phases.csv with each column of PHASES_COLUMNS it lacks added empty (unknown), and the warning; an
    empty frame as it is."""
    missing = [column for column in PHASES_COLUMNS if column not in phases]
    if phases.empty or not missing:
        return phases, None
    said = f"{PHASES_CSV} has no {', '.join(missing)} column: read as unknown"
    return phases.assign(**dict.fromkeys(missing, None)), said


def fractions_for_percent(frame: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """telemetry.csv with a GPU's NVML utilization columns (`util_pct`, `mem_util_pct`) read as unknown
    where they hold a 0–1 fraction, not a percentage (a ratio such as DCGM's GR_ENGINE_ACTIVE written
    there): never above 1, some cell between 0 and 1 (NVML counts whole percents), while the same board's
    power rose to WORKING_POWER_FACTOR times its idle (5th percentile) or more: read as percent, a board
    that worked would read as one that did no work. And the warning."""
    found, cleaned = [], frame
    for index in gpu_indices(frame.columns):
        power = next((frame[c] for s in POWER_SUFFIXES if (c := gpu_column(index, s)) in frame), None)
        watts = power.dropna().to_numpy(dtype=float) if power is not None else np.array([])
        if watts.size < 2 or not np.percentile(watts, 5) > 0:
            continue
        low, high = np.percentile(watts, [5, 95])
        if high < WORKING_POWER_FACTOR * low:
            continue
        for suffix in FRACTION_SUSPECTS:
            column = gpu_column(index, suffix)
            cells = frame[column].dropna().to_numpy(dtype=float) if column in frame else np.array([])
            if cells.size and cells.max() <= 1 and ((cells > 0) & (cells < 1)).any():
                found.append(column)
                cleaned = cleaned if cleaned is not frame else frame.copy()
                cleaned[column] = np.nan
    if not found:
        return frame, None
    return cleaned, (
        f"{TELEMETRY_CSV}: {', '.join(found)} never above 1 while the board's power rose from idle "
        "(a 0–1 fraction, not a percentage?): read as unknown"
    )


def gpu_memory_bytes(meta: dict) -> dict[int, float]:
    """Each listed GPU's total memory by its index (its place in the list where it records none)."""
    found = {}
    for position, gpu in enumerate(listed_gpus(meta)):
        index, total = number(gpu.get("index")), number(gpu.get("mem_total_bytes"))
        if total is not None and total > 0:
            found[int(index) if index is not None else position] = total
    return found


def validated_run(run: RunData) -> RunData:
    """The run with every field sizing reads of its documented type, and a warning per repaired file."""
    meta, run_problem = checked_object(run.meta, RUN_JSON, RunRecord)
    info, training_problem = checked_object(run.training_info, TRAINING_JSON, TrainingRecord)
    inference, inference_problem = (
        checked_object(run.inference, INFERENCE_JSON, InferenceRecord)
        if run.inference is not None
        else (None, None)
    )
    problems = [p for p in (run_problem, training_problem, inference_problem) if p]
    problems += tuning_problems(meta) + tag_disagrees(meta, info)
    frames = {}
    starts = {TELEMETRY_CSV: number(meta.get("start_unix")), TRAINING_CSV: number(info.get("start_unix"))}
    found = {}
    frames["training"], more, found["training"] = checked_and_mended(
        run.training, TRAINING_CSV, starts[TRAINING_CSV]
    )
    step_log = found["training"][1] if found["training"] else None
    frames["telemetry"], first, found["telemetry"] = checked_and_mended(
        run.telemetry, TELEMETRY_CSV, starts[TELEMETRY_CSV], step_log
    )
    if found["telemetry"] and found["telemetry"][1].forward():  # the step log's gaps at those steps, too
        frames["training"], more, found["training"] = checked_and_mended(
            run.training, TRAINING_CSV, starts[TRAINING_CSV], found["telemetry"][1]
        )
    problems += first + more
    frames["training"], read = step_log_read(frames["training"], info)
    problems += read
    phases = run.phases
    if stepped := found["telemetry"] or found["training"]:  # the densest record places the step best
        times, steps = stepped
        meta, info = (moved_ends(record, steps.total_s, float(times[-1])) for record in (meta, info))
        if not phases.empty:
            earliest = min((s for s in starts.values() if s is not None), default=None)
            phases = phases_on_one_clock(phases, times, steps, earliest)
        problems.append(f"the run's end_unix ({RUN_JSON}, {TRAINING_JSON}) and {PHASES_CSV} moved with them")
    phases, lacking = phases_columns(phases)
    frames["phases"], more, _ = checked_and_mended(phases, PHASES_CSV, None)
    problems += [lacking, *more] if lacking else more
    frames["telemetry"], impossible = impossible_cells(frames["telemetry"], gpu_memory_bytes(meta))
    frames["telemetry"], fractions = fractions_for_percent(frames["telemetry"])
    problems += [note for note in (impossible, fractions) if note]
    evaluation = run.evaluation if isinstance(run.evaluation, dict) else {}
    notes = [f"{run.run_id}: {p}" for p in problems]
    warnings = tuple(dict.fromkeys([*run.warnings, *notes]))
    return replace(
        run,
        meta=meta,
        training_info=info,
        inference=inference,
        evaluation=evaluation,
        warnings=warnings,
        **frames,
    )


def nothing_to_size(run: RunData) -> str | None:
    """Why the run cannot be sized at all (None when it can)."""
    if run.telemetry.empty and run.training.empty and not run.training_info:
        return f"run {run.run_id!r} has neither {TELEMETRY_CSV} nor training files with readable rows"
    return None
