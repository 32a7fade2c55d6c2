"""`python -m collect import-sysstat FILE`: a sysstat recording laid out as a run directory.

FILE is a binary `sa` file written by `sadc` / `sar -o` (read with `sadf -d -U`, which must be the
sysstat that wrote it), or the semicolon-separated text `sadf -d` prints. The run directory gets the
contract's column names (docs/run-format.md) with sysstat's own definitions behind them (see
"Imported runs" there); what sysstat did not record is left out and `run.json` says why.
"""

from __future__ import annotations

import itertools
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from collect.importers.rundir import cell, imported_run_header, stage_and_publish, utc
from collect.importers.sadf import (
    NOT_IN_SYSSTAT,
    Recording,
    SysstatImportError,
    foreign_byte_order,
    implausibility,
    is_sa_binary,
    parse_sadf,
    sadf_text,
)
from runformat import RUN_JSON, TELEMETRY_CSV, new_run_id, write_json_atomic
from runformat.columns import UTIL_PCT, core_indices, cpu_column

SOURCE_ACTIVITIES = {
    "cpu": ("cpu", "load"),
    "memory": ("memory", "swap"),
    "disk": ("disk",),
    "network": ("network",),
}
COLUMN_ORDER = [
    "cpu_util_pct",
    "cpu_iowait_pct",
    "cpu_steal_pct",
    "load1",
    "cpu_temp_c",
    "mem_used_bytes",
    "mem_util_pct",
    "swap_used_bytes",
    "disk_read_bps",
    "disk_write_bps",
    "disk_util_pct",
    "disk_busiest_bps",
    "net_rx_bps",
    "net_tx_bps",
]


def telemetry_columns(recording: Recording) -> list[str]:
    present = {column for row in recording.rows.values() for column in row}
    cores = core_indices(present)
    columns = ["time_unix", "elapsed_s"]
    for column in COLUMN_ORDER:
        if column in present or column == "cpu_temp_c":
            columns.append(column)
        if column == "cpu_steal_pct":
            columns += [cpu_column(n, UTIL_PCT) for n in cores]
    return columns


def import_recording(source: Path, data_dir: Path, label: str = "") -> Path:
    """Write data_dir/runs/<run_id>/ (run.json, telemetry.csv) from a recording; its path."""
    info: dict[str, str] = {}
    if is_sa_binary(source):
        try:
            text, info = sadf_text(source)
        except SysstatImportError as exc:
            raise SysstatImportError(f"{exc}{_byte_order_hint(source)}") from exc
    else:
        try:
            text = source.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise SysstatImportError(f"{source}: neither a sysstat data file nor `sadf -d` text") from exc
    try:
        recording = parse_sadf(text.splitlines())
    except SysstatImportError as exc:
        raise SysstatImportError(f"{source}: {exc}") from exc
    if not recording.rows or "cpu" not in recording.activities:
        raise SysstatImportError(
            f"{source}: no CPU utilization samples (record with sadc, or sadf -d -- -u)"
            + (_byte_order_hint(source) if info else "")
        )
    problem = implausibility(recording)
    if problem is not None:
        raise SysstatImportError(f"{source}: not a believable recording: {problem}")
    times = sorted(recording.rows)
    interval = statistics.median(recording.intervals)
    start, end = times[0] - interval, times[-1]
    host = info.get("host") or recording.host or "unknown"
    run_dir = stage_and_publish(
        Path(data_dir),
        new_run_id("cpu", datetime.fromtimestamp(start, timezone.utc), host),
        lambda staged, run_id: _write_run(
            staged, run_id, source, recording, info, host, label, interval, start, end
        ),
    )
    return run_dir


def _write_run(
    run_dir: Path,
    run_id: str,
    source: Path,
    recording: Recording,
    info: dict[str, str],
    host: str,
    label: str,
    interval: float,
    start: float,
    end: float,
) -> None:
    columns = telemetry_columns(recording)
    times = sorted(recording.rows)
    with open(run_dir / TELEMETRY_CSV, "w", encoding="ascii", newline="") as handle:
        handle.write(",".join(columns) + "\n")
        for time_unix in times:
            row = recording.rows[time_unix] | {
                "time_unix": time_unix,
                "elapsed_s": round(time_unix - start, 6),
            }
            handle.write(",".join(cell(row.get(column)) for column in columns) + "\n")
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    skipped = sum(max(round(gap / interval) - 1, 0) for gap in gaps if gap > 1.5 * interval)
    notes = [
        f"imported from {source.name} with `python -m collect import-sysstat`; the figures are sysstat's "
        "(sadc), not this workbench's sampler"
    ]
    if info.get("sadf_warning"):
        notes.append(f"sadf said: {info['sadf_warning']} (the last sample may be missing)")
    if info.get("converted"):
        notes.append(f"sadf said: {info['converted']}")
    for when, cpus in recording.restarts:
        with_cpus = f", {cpus} CPUs after it" if cpus is not None else ""
        notes.append(
            f"the host restarted at {utc(when)} (LINUX RESTART{with_cpus}); the run goes on across it"
        )
    if len({cpus for _, cpus in _cpu_counts(info, recording)}) > 1:
        counts = " -> ".join(str(cpus) for _, cpus in _cpu_counts(info, recording))
        notes.append(f"the number of CPUs changed at a restart ({counts}): cpu_cores_logical is the last")
    if skipped:
        notes.append(f"{skipped} interval(s) missing from the recording")
    meta = {
        **imported_run_header(run_id, label or f"sysstat {host}", "cpu", host, interval, start, end),
        "samples": len(times),
        "late_ticks": None,
        "skipped_ticks": skipped,
        "system": _system(info, recording),
        "sources": _sources(recording),
        "notes": notes,
        "imported_from": {
            "tool": "sysstat",
            "file": str(source.resolve()),
            "format": _format(info),
            "sysstat_version": info.get("sysstat_version"),
            "restarts": [{"time_unix": when, "cpus": cpus} for when, cpus in recording.restarts],
            "imported_utc": datetime.now(timezone.utc).isoformat(),
        },
    }
    write_json_atomic(run_dir / RUN_JSON, meta)


def _byte_order_hint(source: Path) -> str:
    order = foreign_byte_order(source)
    return f" (it was written on a {order} machine: import the text of `sadf -d` made there)" if order else ""


def _format(info: dict[str, str]) -> str:
    if not info.get("sysstat_version"):
        return "sadf -d text"
    return "sa binary (sadf -c, then sadf -d -U)" if info.get("converted") else "sa binary (sadf -d -U)"


def _cpu_counts(info: dict[str, str], recording: Recording) -> list[tuple[float | None, int]]:
    """The logical CPU count the file states, in order: its header's, then each restart's."""
    counts: list[tuple[float | None, int]] = []
    if info.get("cpus", "").isdigit():
        counts.append((None, int(info["cpus"])))
    counts += [(when, cpus) for when, cpus in recording.restarts if cpus is not None]
    return counts


def _system(info: dict[str, str], recording: Recording) -> dict[str, Any]:
    present = {column for row in recording.rows.values() for column in row}
    cores = len(core_indices(present))
    stated = _cpu_counts(info, recording)
    logical = stated[-1][1] if stated else (cores or None)
    return {"cpu_cores_logical": logical, "os": info.get("os"), "kernel": info.get("kernel")}


def _sources(recording: Recording) -> dict[str, Any]:
    sources: dict[str, Any] = {}
    for name, activities in SOURCE_ACTIVITIES.items():
        found = [a for a in activities if a in recording.activities]
        entry: dict[str, Any] = {"available": bool(found)}
        if not found:
            entry["reason"] = f"no {name} activity in the sysstat recording" + (
                " (sadc records it with -S DISK)" if name == "disk" else ""
            )
        elif name == "disk":
            entry["notes"] = [f"disks: {', '.join(sorted(recording.disks))}"]
        elif name == "network":
            entry["notes"] = [f"interfaces: {', '.join(sorted(recording.interfaces))}"]
        sources[name] = entry
    sources["thermal"] = {"available": False, "reason": f"temperature is {NOT_IN_SYSSTAT}"}
    sources["process"] = {"available": False, "reason": "no command was launched (imported recording)"}
    sources["nvml"] = {"available": False, "reason": f"GPU readings are {NOT_IN_SYSSTAT}"}
    return sources


def main(source: Path, data_dir: Path, label: str = "") -> int:
    """The CLI's import-sysstat: 0 and the run directory on stderr, or one line and exit 2."""
    if not source.is_file():
        print(f"python -m collect import-sysstat: error: {source}: no such file", file=sys.stderr)
        return 2
    try:
        run_dir = import_recording(source, data_dir, label)
    except (SysstatImportError, OSError) as exc:
        print(f"python -m collect import-sysstat: error: {exc}", file=sys.stderr)
        return 2
    print(f"collect: imported {source} into {run_dir}", file=sys.stderr)
    return 0
