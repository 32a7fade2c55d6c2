"""The loading boundary: every run.json / training.json field sizing reads, type-checked in one place.

`validated_run(RunData) -> RunData` drops each field of the wrong type (a list where an object belongs, text
or NaN where a number belongs) so it reads as unknown, with one warning naming the file and the field; it
makes every telemetry and step-log cell a finite number or empty, drops rows without a finite time, and
puts rows in time order (saying so). It is idempotent: sizing.load and build_report both apply it, so runs
parsed elsewhere (the dashboard's caches) pass the same checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd

from runformat import PHASES_CSV, RUN_JSON, TELEMETRY_CSV, TRAINING_CSV, TRAINING_JSON
from sizing.model import RunData

Check = Callable[[object], bool]


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_count(value: object) -> bool:
    """A whole number ≥ 0 that a float holds exactly (a step, a batch, a number of CPUs)."""
    return is_number(value) and value >= 0 and float(value).is_integer() and value <= 2**53


def is_text(value: object) -> bool:
    return isinstance(value, str)


def is_bool(value: object) -> bool:
    return isinstance(value, bool)


def is_object(value: object) -> bool:
    return isinstance(value, dict)


def is_text_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


NUMBER, TEXT, BOOL, OBJECT, TEXT_LIST = "a number", "text", "true/false", "an object", "a list of text"
COUNT = "a whole number ≥ 0"
CHECKS: dict[str, Check] = {
    NUMBER: is_number, COUNT: is_count, TEXT: is_text, BOOL: is_bool, OBJECT: is_object,
    TEXT_LIST: is_text_list,
}  # fmt: skip

RUN_FIELDS: dict[str, str] = {
    "label": TEXT, "device": TEXT, "host": TEXT, "start_unix": NUMBER, "end_unix": NUMBER,
    "interval_s": NUMBER, "end_reason": TEXT, "exit_code": NUMBER, "error": TEXT, "system": OBJECT,
    "imported_from": OBJECT, "gpu_state": OBJECT, "failure": OBJECT,
}  # fmt: skip
SYSTEM_FIELDS: dict[str, str] = {
    "cpu_model": TEXT, "cpu_cores_logical": COUNT, "cpu_cores_physical": COUNT, "mem_total_bytes": NUMBER,
    "gpu_driver_version": TEXT, "gpu_count": COUNT, "virtual_machine": BOOL,
    "cgroup_cpu_quota_us": NUMBER, "cgroup_cpu_period_us": NUMBER, "cgroup_cpu_limit_cpus": NUMBER,
    "cgroup_cpu_quota_file": TEXT, "cpu_max_mhz": NUMBER, "cpu_max_mhz_source": TEXT, "cpu_simd": TEXT_LIST,
}  # fmt: skip
GPU_FIELDS: dict[str, str] = {
    "name": TEXT, "uuid": TEXT, "index": NUMBER, "power_limit_w": NUMBER, "sm_clock_max_mhz": NUMBER,
}  # fmt: skip
TRAINING_FIELDS: dict[str, str] = {
    "status": TEXT, "error": TEXT, "device_used": TEXT, "device_requested": TEXT, "framework": TEXT,
    "preset": TEXT, "backbone": TEXT, "image_size": COUNT, "batch_size": COUNT, "precision": TEXT,
    "dataset": TEXT, "dataset_info": OBJECT, "gpu_uuids": TEXT_LIST, "gpu_names": TEXT_LIST,
    "start_unix": NUMBER, "end_unix": NUMBER, "first_step_s": NUMBER, "steps": COUNT,
    "global_step": COUNT, "initial_step": COUNT, "warmup_steps_excluded": COUNT,
    "steady_steps_per_s": NUMBER, "steady_examples_per_s": NUMBER, "duration_budget_s": NUMBER,
    "host": TEXT, "pid": NUMBER, "loss_read_every_steps": COUNT, "world_size": COUNT, "flops": OBJECT,
    "failure": OBJECT,
}  # fmt: skip
FLOPS_FIELDS: dict[str, str] = {
    "per_example": NUMBER, "method": TEXT, "counted_batch": COUNT, "uncounted": TEXT_LIST, "math_dtype": TEXT,
    "reason": TEXT,
}  # fmt: skip
TEXT_COLUMNS = {PHASES_CSV: ("phase", "status")}


def _kind(value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return {dict: "an object", list: "a list", str: "text", bool: "true/false"}.get(type(value), "a number")


def checked_fields(data: dict, fields: dict[str, str], file: str, prefix: str = "") -> tuple[dict, list[str]]:
    """`data` without the listed fields whose value has the wrong type (null is unknown, not wrong)."""
    kept, problems = dict(data), []
    for name, expected in fields.items():
        value = data.get(name)
        if value is None or CHECKS[expected](value):
            continue
        del kept[name]
        problems.append(f"{file} field {prefix}{name} is {_kind(value)}, not {expected}: read as unknown")
    return kept, problems


def checked_meta(meta: dict) -> tuple[dict, list[str]]:
    kept, problems = checked_fields(meta, RUN_FIELDS, RUN_JSON)
    system = kept.get("system")
    if not isinstance(system, dict):
        return kept, problems
    system, more = checked_fields(system, SYSTEM_FIELDS, RUN_JSON, "system.")
    problems += more
    gpus = system.get("gpus")
    if gpus is not None and not isinstance(gpus, list):
        problems.append(f"{RUN_JSON} field system.gpus is {_kind(gpus)}, not a list: read as unknown")
        del system["gpus"]
    elif isinstance(gpus, list):
        kept_gpus = []
        for i, gpu in enumerate(gpus):
            if not isinstance(gpu, dict):
                problems.append(f"{RUN_JSON} field system.gpus[{i}] is {_kind(gpu)}, not an object: ignored")
                continue
            gpu, more = checked_fields(gpu, GPU_FIELDS, RUN_JSON, f"system.gpus[{i}].")
            problems += more
            kept_gpus.append(gpu)
        system["gpus"] = kept_gpus
    return {**kept, "system": system}, problems


def checked_training_info(info: dict) -> tuple[dict, list[str]]:
    kept, problems = checked_fields(info, TRAINING_FIELDS, TRAINING_JSON)
    if isinstance(kept.get("flops"), dict):
        kept["flops"], more = checked_fields(kept["flops"], FLOPS_FIELDS, TRAINING_JSON, "flops.")
        problems += more
    return kept, problems


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
    ordered = numeric[time_column].to_numpy(dtype=float)
    if ordered.size > 1 and (np.diff(ordered) < 0).any():
        problems.append(
            f"{file}: rows out of time order ({int((np.diff(ordered) < 0).sum())}): sorted by time"
        )
        numeric = numeric.sort_values(time_column, kind="stable")
    return numeric.reset_index(drop=True), problems


def validated_run(run: RunData) -> RunData:
    """The run with every field sizing reads of its documented type, and a warning per repair."""
    meta, problems = checked_meta(run.meta if isinstance(run.meta, dict) else {})
    info, more = checked_training_info(run.training_info if isinstance(run.training_info, dict) else {})
    problems += more
    frames = {}
    for name, file in (("telemetry", TELEMETRY_CSV), ("training", TRAINING_CSV), ("phases", PHASES_CSV)):
        frames[name], more = checked_frame(getattr(run, name), file)
        problems += more
    evaluation = run.evaluation if isinstance(run.evaluation, dict) else {}
    notes = [f"{run.run_id}: {p}" for p in problems]
    warnings = tuple(dict.fromkeys([*run.warnings, *notes]))
    return replace(run, meta=meta, training_info=info, evaluation=evaluation, warnings=warnings, **frames)


def nothing_to_size(run: RunData) -> str | None:
    """Why the run cannot be sized at all (None when it can)."""
    if run.telemetry.empty and run.training.empty and not run.training_info:
        return f"run {run.run_id!r} has neither {TELEMETRY_CSV} nor training files with readable rows"
    return None
