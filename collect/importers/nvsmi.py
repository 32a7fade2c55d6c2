"""`python -m collect import-nvidia-smi FILE`: an nvidia-smi log as a run directory, or its GPU columns
added to an existing run (e.g. an `import-sysstat` one of the same host and time), aligned by time.

FILE is `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] -l N | -lms N` output or
`nvidia-smi dmon -o DT` output. nvidia-smi writes local time without a zone: `--utc-offset` says which,
else this machine's zone is assumed, and run.json says which. What the log cannot say (the CPU side, which
GPUs trained) is stated in run.json's `not_recorded`.
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from collect.importers.nvsmi_fields import GpuLog, NvsmiImportError, Value
from collect.importers.nvsmi_merge import merge_into
from collect.importers.nvsmi_parse import parse_log
from collect.importers.rundir import RunDirError, imported_run_header, stage_and_publish, write_csv
from runformat import RUN_JSON, TELEMETRY_CSV, new_run_id, write_json_atomic
from runformat.cli import USAGE_ERROR, OneLineParser
from runformat.columns import GPU_SUFFIXES, gpu_column
from runformat.gpm import GPM_SUFFIXES
from runformat.textfile import text_encoding

PROG = "python -m collect import-nvidia-smi"
NOT_IN_LOG = "not in an nvidia-smi log (it records GPUs only)"
TRAINING_GPUS = "training GPUs"
NOT_RECORDED = {
    TRAINING_GPUS: "an nvidia-smi log does not say which GPUs the training used",
    "CPU side": "CPU, memory, disk and network are not in an nvidia-smi log",
    "training steps": "an nvidia-smi log has no training steps (no training.csv)",
}
NO_GPM = "not in the log: record with `nvidia-smi dmon --gpm-metrics 1,2,3,5,10,...` (Hopper and newer)"
GPM_EMPTY = "the log's GPM columns are empty (`-`: GPM not supported, or a single sample)"
HOST_SOURCES = ("cpu", "memory", "disk", "network", "thermal", "process", "rapl")
_OFFSET = re.compile(r"^([+-])(\d{1,2}):?(\d{2})$")


def utc_offset(text: str) -> timezone:
    """`+02:00`, `-0530`, `+1`... or `Z`/`UTC` as a fixed zone; ValueError with a one-line reason."""
    stripped = text.strip()
    if stripped.upper() in ("Z", "UTC"):
        return timezone.utc
    match = _OFFSET.match(stripped) or re.match(r"^([+-])(\d{1,2})()$", stripped)
    if not match or int(match.group(2)) > 14 or int(match.group(3) or 0) >= 60:
        raise ValueError(f"--utc-offset {text!r}: use ±HH:MM, e.g. +02:00 or -05:00")
    sign = 1 if match.group(1) == "+" else -1
    return timezone(sign * timedelta(hours=int(match.group(2)), minutes=int(match.group(3) or 0)))


def _offset_type(text: str) -> timezone:
    try:
        return utc_offset(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="nvidia-smi --query-gpu CSV or nvidia-smi dmon -o DT output")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--into", type=Path, metavar="RUN_DIR", help="add the GPU columns to this run")
    where.add_argument("--data-dir", type=Path, default=Path("data"), help="where runs/<run_id>/ goes")
    parser.add_argument(
        "--label",
        default="",
        help="free text stored in run.json (default: nvidia-smi FILE; with --into: the run's own)",
    )
    parser.add_argument(
        "--gpus", type=_positive_int, help="GPUs per sample, for a log without index/uuid/pci.bus_id"
    )
    parser.add_argument(
        "--utc-offset",
        type=_offset_type,
        metavar="±HH:MM",
        help="the zone the log's local timestamps are in (default: this machine's)",
    )
    parser.add_argument(
        "--fields", help="for a log without a header: the --query-gpu list it was logged with"
    )


def _positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--gpus {text!r}: a whole number ≥ 1")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description="An nvidia-smi log as a run directory.")
    add_arguments(parser)
    return parser


def read_log(source: Path, fields: str | None, gpus: int | None) -> GpuLog:
    raw = source.read_bytes()
    try:
        text = raw.decode(text_encoding(raw))
    except UnicodeDecodeError as exc:
        raise NvsmiImportError("not text: not an nvidia-smi log") from exc
    field_list = None
    if fields:
        field_list = [name.strip() for name in fields.removeprefix("--query-gpu=").split(",") if name.strip()]
    return parse_log(text, field_list, gpus)


def to_unix(moment: datetime, zone: timezone | None) -> float:
    return (moment.replace(tzinfo=zone) if zone else moment.astimezone()).timestamp()


def offset_note(log: GpuLog, zone: timezone | None) -> dict[str, str]:
    if zone is not None:
        return {"utc_offset": _format_offset(zone.utcoffset(None)), "utc_offset_from": "--utc-offset"}
    local = log.samples[0][0].astimezone()
    return {
        "utc_offset": _format_offset(local.utcoffset()),
        "utc_offset_from": f"assumed: this machine's time zone ({local.tzname()}); nvidia-smi writes local "
        "time without a zone, give --utc-offset if the log was written elsewhere",
    }


def _format_offset(delta: timedelta | None) -> str:
    minutes = int((delta or timedelta()).total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def gpu_columns(log: GpuLog) -> list[str]:
    standard = [s for s in (*GPU_SUFFIXES, *GPM_SUFFIXES) if s in log.suffixes]
    ordered = standard + [s for s in log.suffixes if s not in standard]
    return [gpu_column(position, suffix) for position in range(len(log.gpu_keys)) for suffix in ordered]


def gpu_rows(log: GpuLog, zone: timezone | None) -> list[dict[str, Value]]:
    rows = []
    for moment, readings in log.samples:
        row: dict[str, Value] = {"time_unix": round(to_unix(moment, zone), 3)}
        for position, key in enumerate(log.gpu_keys):
            for suffix, value in (readings.get(key) or {}).items():
                row[gpu_column(position, suffix)] = value
        rows.append(row)
    return rows


def describe_gpus(log: GpuLog, rows: list[dict[str, Value]]) -> list[dict[str, Any]]:
    described = []
    for position, key in enumerate(log.gpu_keys):
        facts = log.descriptions.get(key, {})
        limit = _numbers(rows, gpu_column(position, "power_limit_w"))
        total = _numbers(rows, gpu_column(position, "mem_total_bytes"))
        max_sm = _numbers(rows, gpu_column(position, "sm_clock_max_mhz"))
        index = facts.get("index", key if key.isdigit() else str(position))
        described.append(
            {
                "index": int(index) if index.isdigit() else position,
                "name": facts.get("name"),
                "uuid": facts.get("uuid"),
                "mem_total_bytes": int(max(total)) if total else None,
                "power_limit_w": statistics.median(limit) if limit else None,
                "pci_bus_id": facts.get("pci_bus_id"),
                "sm_clock_max_mhz": max(max_sm) if max_sm else None,
            }
        )
    return described


def gpm_source(log: GpuLog, rows: list[dict[str, Value]], interval_s: float | None) -> dict[str, Any]:
    """sources.gpm of the run format: which GPUs' profiling counters (`dmon --gpm-metrics`) the log has."""
    logged = [suffix for suffix in GPM_SUFFIXES if suffix in log.suffixes]
    gpus: list[dict[str, Any]] = []
    for position in range(len(log.gpu_keys)):
        read = any(row.get(gpu_column(position, suffix)) is not None for row in rows for suffix in logged)
        entry: dict[str, Any] = {"index": position, "supported": read}
        gpus.append(entry if read else {**entry, "reason": GPM_EMPTY})
    if not logged or not any(gpu["supported"] for gpu in gpus):
        return {"available": False, "reason": GPM_EMPTY if logged else NO_GPM}
    return {
        "available": True,
        "period_s": interval_s,  # a dmon GPM figure spans the time between two of its samples
        "gpus": gpus,
        "notes": ["from nvidia-smi dmon --gpm-metrics, not NVML directly"],
    }


def _numbers(rows: list[dict[str, Value]], column: str) -> list[float]:
    return [float(v) for row in rows if isinstance(v := row.get(column), int | float)]


def log_notes(log: GpuLog, rows: list[dict[str, Value]], columns: list[str], source: Path) -> list[str]:
    notes = [
        f"GPU readings imported from {source.name} ({log.format}) with `{PROG}`; GPUs told apart by "
        f"{log.identified_by}; the figures are nvidia-smi's, not this workbench's sampler"
    ]
    notes += log.notes
    if log.kept:
        kept = ", ".join(f"{name} → gpu<N>_{suffix}" for name, suffix in log.kept.items())
        notes.append(f"fields kept under their own names, as logged (not in the run format): {kept}")
    empty = [c for c in columns if not any(row.get(c) is not None for row in rows)]
    if empty:
        notes.append(f"empty in every line ([N/A], [Not Supported] or the like): {', '.join(empty)}")
    notes += [f"warning: {said}" for said in (log.left_out_text, log.truncated_tail) if said]
    return notes


def interval_of(rows: list[dict[str, Value]]) -> float | None:
    times = [float(row["time_unix"]) for row in rows if isinstance(row["time_unix"], float | int)]
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    return round(statistics.median(gaps), 3) if gaps else None


def import_log(args: argparse.Namespace) -> tuple[Path, GpuLog, int]:
    log = read_log(args.file, args.fields, args.gpus)
    rows = gpu_rows(log, args.utc_offset)
    rows.sort(key=lambda row: float(row["time_unix"] or 0.0))
    columns = gpu_columns(log)
    imported = {
        "tool": "nvidia-smi",
        "file": str(args.file.resolve()),
        "format": log.format,
        "gpus_by": log.identified_by,
        "fields": log.fields,
        "kept_fields": log.kept,
        "interval_s": interval_of(rows),
        **offset_note(log, args.utc_offset),
        "imported_utc": datetime.now(timezone.utc).isoformat(),
    }
    notes = log_notes(log, rows, columns, args.file)
    gpus = describe_gpus(log, rows)
    gpm = gpm_source(log, rows, imported["interval_s"])
    driver = next((d["driver_version"] for d in log.descriptions.values() if d.get("driver_version")), None)
    if args.into is not None:
        run_dir = merge_into(
            Path(args.into), columns, rows, gpus, driver, imported, notes, NOT_RECORDED, gpm, args.label
        )
    else:
        run_dir = _new_run(args, columns, rows, gpus, driver, imported, notes, gpm)
    return run_dir, log, len(rows)


def _new_run(
    args: argparse.Namespace,
    columns: list[str],
    rows: list[dict[str, Value]],
    gpus: list[dict[str, Any]],
    driver: str | None,
    imported: dict[str, Any],
    notes: list[str],
    gpm: dict[str, Any],
) -> Path:
    interval = imported["interval_s"] or 1.0
    start, end = float(rows[0]["time_unix"] or 0.0) - interval, float(rows[-1]["time_unix"] or 0.0)
    for row in rows:
        row["elapsed_s"] = round(float(row["time_unix"] or 0.0) - start, 3)
    not_recorded = dict(NOT_RECORDED)
    if len(gpus) == 1:
        not_recorded.pop(TRAINING_GPUS)
    sources: dict[str, Any] = {name: {"available": False, "reason": NOT_IN_LOG} for name in HOST_SOURCES}
    sources["nvml"] = {
        "available": True,
        "notes": [f"from nvidia-smi ({imported['format']}), not NVML directly"],
    }
    sources["gpm"] = gpm

    def write(run_dir: Path, run_id: str) -> None:
        write_csv(run_dir / TELEMETRY_CSV, ["time_unix", "elapsed_s", *columns], rows)
        meta = {
            **imported_run_header(
                run_id, args.label or f"nvidia-smi {args.file.name}", "gpu", None, interval, start, end
            ),
            "samples": len(rows),
            "late_ticks": None,
            "skipped_ticks": None,
            "system": {"gpu_count": len(gpus), "gpus": gpus, "gpu_driver_version": driver},
            "sources": sources,
            "notes": notes + [f"not recorded: {why}" for why in not_recorded.values()],
            "not_recorded": not_recorded,
            "imported_from": imported,
        }
        write_json_atomic(run_dir / RUN_JSON, meta)

    base = new_run_id("gpu", datetime.fromtimestamp(start, timezone.utc), host="nvidia-smi")
    return stage_and_publish(Path(args.data_dir), base, write)


def main(args: argparse.Namespace) -> int:
    """The CLI's import-nvidia-smi: 0 and the run directory on stderr, or one line and exit 2."""
    if not args.file.is_file():
        print(f"{PROG}: error: {args.file}: no such file", file=sys.stderr)
        return USAGE_ERROR
    try:
        run_dir, log, count = import_log(args)
    except (NvsmiImportError, RunDirError, ValueError) as exc:
        print(f"{PROG}: error: {args.file}: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except OSError as exc:
        print(f"{PROG}: error: {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return USAGE_ERROR
    for said in (log.left_out_text, log.truncated_tail):
        if said:
            print(f"{PROG}: warning: {said}", file=sys.stderr)
    verb = "merged" if args.into is not None else "imported"
    print(f"collect: {verb} {count} samples of {len(log.gpu_keys)} GPU(s) from {args.file} into {run_dir}",
          file=sys.stderr)  # fmt: skip
    return 0


def run_cli(argv: Sequence[str]) -> int:
    return main(build_parser().parse_args(list(argv)))
