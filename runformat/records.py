"""run.json, training.json and inference.json as typed records, as psutil's _ntuples.py holds its records.

A record has the fields its readers use as attributes and `raw`, the file's whole object as read, unknown
fields included. A field that is absent, null or of the wrong type is None: unknown, never zero. Each
field declares its type once (`Text`, `Number`, `Count`, ...): `checked` drops a field of the wrong type
from the object, saying so, and `record_of` builds the record from what is left. runformat.reader reads
the files. Standard library only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, is_dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_args, get_origin, get_type_hints

from runformat.jsonio import read_object

NUMBER, COUNT, TEXT, BOOL = "a number", "a whole number ≥ 0", "text", "true/false"
UNIX_TIME = "seconds since 1970 before the year 10000 (milliseconds?)"
LAST_UNIX_S = 253_402_300_799  # 9999-12-31 23:59:59 UTC: the last second a timestamp can name
OBJECT, LIST, TEXT_LIST = "an object", "a list", "a list of text"


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_unix_time(value: object) -> bool:
    return is_number(value) and 0 <= value <= LAST_UNIX_S


def is_count(value: object) -> bool:
    """A whole number ≥ 0 that a float holds exactly (a step, a batch, a number of CPUs)."""
    return is_number(value) and value >= 0 and float(value).is_integer() and value <= 2**53


CHECKS: dict[str, Callable[[object], bool]] = {
    NUMBER: is_number,
    UNIX_TIME: is_unix_time,
    COUNT: is_count,
    TEXT: lambda value: isinstance(value, str),
    BOOL: lambda value: isinstance(value, bool),
    OBJECT: lambda value: isinstance(value, dict),
    LIST: lambda value: isinstance(value, list),
    TEXT_LIST: lambda value: isinstance(value, list) and all(isinstance(v, str) for v in value),
}


Text = Annotated[str | None, TEXT]
Number = Annotated[float | None, NUMBER]
UnixTime = Annotated[float | None, UNIX_TIME]
Count = Annotated[int | None, COUNT]
Flag = Annotated[bool | None, BOOL]
Object = Annotated[dict[str, Any] | None, OBJECT]  # kept as a dict, its fields unchecked
TextList = Annotated[tuple[str, ...] | None, TEXT_LIST]
# A field typed `Annotated[SomeRecord | None, OBJECT]` or `Annotated[tuple[SomeRecord, ...] | None, LIST]` is
# read as that record (a list item that is not an object is left out).


@dataclass(frozen=True)
class GpuRecord:
    """run.json `system.gpus[i]`: the board of column gpu<i>_*."""

    name: Text = None
    uuid: Text = None
    index: Number = None
    power_limit_w: Number = None
    sm_clock_max_mhz: Number = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class SystemRecord:
    """run.json `system`: the host the run measured."""

    cpu_model: Text = None
    cpu_cores_logical: Count = None
    cpu_cores_physical: Count = None
    cpu_affinity_cpus: Count = None
    mem_total_bytes: Number = None
    gpu_driver_version: Text = None
    gpu_count: Count = None
    virtual_machine: Flag = None
    cgroup_cpu_quota_us: Number = None
    cgroup_cpu_period_us: Number = None
    cgroup_cpu_limit_cpus: Number = None
    cgroup_cpu_quota_file: Text = None
    cpu_max_mhz: Number = None
    cpu_max_mhz_source: Text = None
    cpu_simd: TextList = None
    gpus: Annotated[tuple[GpuRecord, ...] | None, LIST] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class RunRecord:
    """run.json: what the collector recorded about the run."""

    label: Text = None
    device: Text = None
    host: Text = None
    start_unix: UnixTime = None
    end_unix: UnixTime = None
    actual_duration_s: Number = None
    interval_s: Number = None
    end_reason: Text = None
    exit_code: Number = None
    error: Text = None
    system: Annotated[SystemRecord | None, OBJECT] = None
    imported_from: Object = None
    gpu_state: Object = None
    failure: Object = None
    nodes: Object = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


MIN_FLOPS_PER_EXAMPLE = 1e5  # fewer than any network's training example: a count in GFLOPs or TFLOPs


@dataclass(frozen=True)
class FlopsRecord:
    """training.json `flops`: the model's FLOPs per example and how they were counted."""

    per_example: Number = None
    method: Text = None
    counted_batch: Count = None
    uncounted: TextList = None
    math_dtype: Text = None
    reason: Text = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class TrainingRecord:
    """training.json: what the training recorded about itself."""

    status: Text = None
    error: Text = None
    device_used: Text = None
    device_requested: Text = None
    framework: Text = None
    preset: Text = None
    backbone: Text = None
    image_size: Count = None
    batch_size: Count = None
    precision: Text = None
    dataset: Text = None
    dataset_info: Object = None
    gpu_uuids: TextList = None
    gpu_names: TextList = None
    start_unix: UnixTime = None
    end_unix: UnixTime = None
    first_step_s: Number = None
    steps: Count = None
    global_step: Count = None
    initial_step: Count = None
    warmup_steps_excluded: Count = None
    steady_steps_per_s: Number = None
    steady_examples_per_s: Number = None
    duration_budget_s: Number = None
    host: Text = None
    pid: Number = None
    loss_read_every_steps: Count = None
    world_size: Count = None
    flops: Annotated[FlopsRecord | None, OBJECT] = None
    failure: Object = None
    loss_not_finite_from_step: Count = None  # not in the file: runformat.progress reads it from training.csv
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class CellRecord:
    """inference.json `runtimes[i].cells[j]`: one runtime × batch size."""

    batch_size: Count = None
    start_unix: UnixTime = None
    end_unix: UnixTime = None
    calls: Count = None
    images: Count = None
    images_per_s: Number = None
    latency_ms_p50: Number = None
    latency_ms_p90: Number = None
    latency_ms_p99: Number = None
    latency_ms_max: Number = None
    ms_per_image_p99: Number = None
    warmup_calls: Count = None
    warmup_s: Number = None
    rss_peak_bytes: Number = None
    gpu_mem_peak_bytes: Number = None
    gpu_mem_peak_note: Text = None
    error: Text = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class RuntimeRecord:
    """inference.json `runtimes[i]`: one runtime, its cells, or why it could not take the model."""

    runtime: Text = None
    available: Flag = None
    reason: Text = None
    cells: Annotated[tuple[CellRecord, ...] | None, LIST] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def measured(self) -> tuple[CellRecord, ...]:
        """The cells with a measured images/s."""
        return tuple(cell for cell in self.cells or () if cell.images_per_s is not None)


@dataclass(frozen=True)
class ModelRecord:
    """inference.json `model`: the exported model's size."""

    parameters: Number = None
    parameters_note: Text = None
    flops_per_image: Number = None
    flops_note: Text = None
    measured_by: Text = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def training_framework(training: dict[str, Any]) -> str | None:
    """The framework a training.json names: its `framework`, else `tensorflow` for a Model Garden run
    written before that field (it carries `tensorflow_version`, or a Model Garden `config` with its `task`);
    None where none of these says."""
    named = training.get("framework")
    if isinstance(named, str) and named.strip():
        return named.strip()
    config = training.get("config")
    model_garden = isinstance(config, dict) and "task" in config
    return "tensorflow" if "tensorflow_version" in training or model_garden else None


@dataclass(frozen=True)
class InferenceRecord:
    """inference.json: the trained model's latency and images/s per runtime × batch size."""

    device: Text = None
    framework: Text = None
    status: Text = None
    start_unix: UnixTime = None
    end_unix: UnixTime = None
    duration_per_cell_s: Number = None
    warmup_calls: Count = None
    model: Annotated[ModelRecord | None, OBJECT] = None
    input: Object = None
    runtimes: Annotated[tuple[RuntimeRecord, ...] | None, LIST] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


R = TypeVar("R")


@functools.cache
def spec(record: type) -> dict[str, tuple[str, type | None]]:
    """Field name -> (its declared type in the words of the warnings, the record it is read as or None)."""
    found = {}
    for name, hint in get_type_hints(record, include_extras=True).items():
        if get_origin(hint) is Annotated:
            of, kind = get_args(hint)[:2]
            found[name] = (kind, _record_in(of))
    return found


def _record_in(hint: Any) -> type | None:
    """The record class inside `SomeRecord | None` or `tuple[SomeRecord, ...] | None`, else None."""
    if is_dataclass(hint):
        return hint
    return next(filter(None, map(_record_in, get_args(hint))), None)


def _kind(value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return {dict: "an object", list: "a list", str: "text", bool: "true/false"}.get(type(value), "a number")


def checked(record: type, data: dict, file: str, prefix: str = "") -> tuple[dict, list[str]]:
    """`data` without its fields of the wrong type (null is unknown, not wrong), nested records checked
    too, and one problem per field dropped."""
    kept, problems = dict(data), []
    for name, (kind, inner) in spec(record).items():
        value = data.get(name)
        if value is None:
            continue
        if not CHECKS[kind](value):
            del kept[name]
            problems.append(f"{file} field {prefix}{name} is {_kind(value)}, not {kind}: read as unknown")
        elif inner is not None and kind == OBJECT:
            kept[name], more = checked(inner, value, file, f"{prefix}{name}.")
            problems += more
        elif inner is not None:
            kept[name], more = _checked_items(inner, value, file, f"{prefix}{name}")
            problems += more
    return kept, problems


def _checked_items(record: type, items: list, file: str, prefix: str) -> tuple[list, list[str]]:
    kept, problems = [], []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(f"{file} field {prefix}[{i}] is {_kind(item)}, not an object: ignored")
            continue
        item, more = checked(record, item, file, f"{prefix}[{i}].")
        problems += more
        kept.append(item)
    return kept, problems


def record_of(record: type[R], data: dict) -> R:
    """The record of an object that `checked` has passed: its declared fields, and `raw` = data."""
    values: dict[str, Any] = {}
    for name, (kind, inner) in spec(record).items():
        value = data.get(name)
        if value is None:
            continue
        if inner is not None:
            value = record_of(inner, value) if kind == OBJECT else tuple(record_of(inner, v) for v in value)
        elif kind == COUNT:
            value = int(value)
        elif kind == TEXT_LIST:
            value = tuple(value)
        values[name] = value
    return record(**values, raw=data)


def as_record(record: type[R], data: dict) -> R:
    """The record of any object, its fields of the wrong type read as unknown (without a warning)."""
    return record_of(record, checked(record, data, "")[0])


def one_warning(problems: list[str]) -> str | None:
    """A file's problems as its one warning (None when it has none)."""
    return "; ".join(problems) or None


def read_record(record: type[R], path: Path) -> tuple[R | None, str | None]:
    """(the file as `record`, its one warning or None); (None, None) when absent, (None, why) when it is
    unreadable or not a JSON object."""
    data, problem = read_object(path)
    if data is None:
        return None, problem
    kept, problems = checked(record, data, Path(path).name)
    return record_of(record, kept), one_warning(problems)


def raw_of(record: Any) -> dict[str, Any]:
    """The record's whole object, {} for an absent file."""
    return record.raw if record is not None else {}
