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

from runformat import INFERENCE_JSON, PHASES_CSV, RUN_JSON, TELEMETRY_CSV, TRAINING_CSV, TRAINING_JSON
from runformat.records import InferenceRecord, RunRecord, TrainingRecord, checked, one_warning
from runformat.tuning import tuning_problems
from sizing.model import RunData

TEXT_COLUMNS = {PHASES_CSV: ("phase", "status")}
LAST_UNIX_S = 253_402_300_799  # 9999-12-31 23:59:59 UTC: the last second a timestamp can name


def checked_object(data: object, file: str, record: type) -> tuple[dict, str | None]:
    """A JSON object as runformat.reader checks it: without its fields of the wrong type, and the file's
    one warning naming them."""
    kept, problems = checked(record, data if isinstance(data, dict) else {}, file)
    return kept, one_warning(problems)


def checked_frame(frame: pd.DataFrame, file: str) -> tuple[pd.DataFrame, list[str]]:
    """Numeric cells finite or NaN (inf and text read as empty); rows with a finite time, in time order."""
    if frame.empty:
        return frame, []
    text = TEXT_COLUMNS.get(file, ())
    numeric = frame.apply(lambda c: c if c.name in text else pd.to_numeric(c, errors="coerce"))
    problems = []
    values = [numeric[c] for c in numeric.columns if c not in text]
    infinite = int(sum(np.isinf(v.to_numpy(dtype=float)).sum() for v in values))
    if infinite:
        problems.append(f"{file}: {infinite} infinite cell(s) read as empty")
        numeric = numeric.replace([np.inf, -np.inf], np.nan)
    time_column = "start_unix" if file == PHASES_CSV else "time_unix"
    if time_column not in numeric:
        return numeric, problems
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
    ordered = numeric[time_column].to_numpy(dtype=float)
    if ordered.size > 1 and (np.diff(ordered) < 0).any():
        problems.append(
            f"{file}: rows out of time order ({int((np.diff(ordered) < 0).sum())}): sorted by time"
        )
        numeric = numeric.sort_values(time_column, kind="stable")
    return numeric.reset_index(drop=True), problems


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
    problems += tuning_problems(meta)
    frames = {}
    for name, file in (("telemetry", TELEMETRY_CSV), ("training", TRAINING_CSV), ("phases", PHASES_CSV)):
        frames[name], more = checked_frame(getattr(run, name), file)
        problems += more
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
