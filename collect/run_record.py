"""run.json as the collector writes it when a recording starts (the session adds how it ended)."""

from __future__ import annotations

import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from collect.command import RunningCommand
from collect.options import SessionOptions
from collect.sources import SourceSet
from collect.sysinfo import system_info
from runformat import FORMAT_VERSION, TRAINING_JSON, read_json
from runformat.diskfull import DISK_FULL

# Held in the run directory until the final run.json is written (runformat.diskfull.Reserve): room for
# it (a few kB; up to ~150 kB with a thousand GPU state changes) and for the command's output the
# collector could not log while the disk was full.
COLLECTOR_RESERVE_BYTES = 512 * 1024


def initial_record(
    options: SessionOptions, run_id: str, sources: SourceSet, start_unix: float
) -> dict[str, Any]:
    """The record of a run that has just started: what it is, on which system, with which sources."""
    nvml = sources.nvml
    return {
        "format_version": FORMAT_VERSION,
        "run_id": run_id,
        "label": options.label,
        "device": options.device,
        "host": socket.gethostname(),
        "command": list(options.command) if options.command is not None else None,
        "interval_s": options.interval_s,
        "start_utc": datetime.fromtimestamp(start_unix, timezone.utc).isoformat(),
        "start_unix": round(start_unix, 6),
        "end_utc": None,
        "end_unix": None,
        "requested_duration_s": options.duration_s,
        "actual_duration_s": None,
        "end_reason": "running",
        "exit_code": None,
        "samples": 0,
        "late_ticks": 0,
        "skipped_ticks": 0,
        "system": system_info(
            options.hardware.proc_root,
            options.hardware.sys_root,
            gpus=nvml.gpu_info if nvml else [],
            gpu_driver_version=nvml.driver_version if nvml else None,
            cuda_version=nvml.cuda_version if nvml else None,
        ),
        "sources": sources.status,
        "sampler": {"priority": "not raised yet"},
        **options.extra_record,
    }


def sampler_record(
    priority: str, ticks: dict[str, Any], progress_error: str | None, command: RunningCommand | None
) -> dict[str, Any]:
    """run.json's `sampler`: the sampler's priority and tick statistics, and what it could not write."""
    record = {"priority": priority, **ticks}
    if progress_error is not None:
        record["progress_error"] = progress_error
    if command is not None and command.log_error:
        record["command_log_error"] = command.log_error
    if command is not None and command.output_sink_error:
        record["output_sink_error"] = command.output_sink_error
    return record


def command_failure(run_dir: Path) -> dict[str, Any] | None:
    """The command's own record of a full disk (training.json's `failure`), for run.json; else None."""
    try:
        failure = read_json(Path(run_dir) / TRAINING_JSON).get("failure")
    except ValueError:
        return None
    return failure if isinstance(failure, dict) and failure.get("reason") == DISK_FULL else None
