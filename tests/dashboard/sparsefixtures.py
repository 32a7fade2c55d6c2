"""A run the workbench did not record: another tool's 1 Hz recording converted to the run format.

Only CPU utilization and temperature, memory, disk busy and read/write, and one GPU's temperature; no
per-core, network, process or GPU utilization columns; no training, phases, eval or detections files;
run.json with free-text notes, per-source notes and unknown system fields as null.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from runformat import new_run_id

SPARSE_COLUMNS = (
    "time_unix",
    "elapsed_s",
    "cpu_util_pct",
    "cpu_temp_c",
    "mem_used_bytes",
    "mem_util_pct",
    "disk_util_pct",
    "disk_read_bps",
    "disk_write_bps",
    "gpu0_temp_c",
)
SPARSE_NOTE = "converted from the lab's thermal logger export (CSV, 1 Hz)"
SPARSE_SOURCE_NOTE = "GPU temperature from nvidia-smi -q, polled once a second"


def make_sparse_run(
    data_dir: Path, *, start_unix: float, duration_s: float = 300.0, label: str = "converted recording"
) -> Path:
    run_id = new_run_id("gpu", datetime.fromtimestamp(start_unix, tz=timezone.utc), "labhost")
    run_dir = Path(data_dir) / "runs" / run_id
    run_dir.mkdir(parents=True)
    rng = np.random.default_rng(7)
    elapsed = np.arange(int(duration_s)) + rng.uniform(0.0, 0.05, int(duration_s))
    busy = np.clip(50 + 40 * np.sin(elapsed / 40.0) + rng.normal(0, 3, len(elapsed)), 0, 100)
    columns = {
        "time_unix": start_unix + elapsed,
        "elapsed_s": elapsed,
        "cpu_util_pct": busy,
        "cpu_temp_c": 45 + busy / 4,
        "mem_used_bytes": 8e9 + busy * 1e7,
        "mem_util_pct": 30 + busy / 10,
        "disk_util_pct": np.clip(busy / 3, 0, 100),
        "disk_read_bps": busy * 1e5,
        "disk_write_bps": busy * 5e4,
        "gpu0_temp_c": 50 + busy / 5,
    }
    lines = [",".join(SPARSE_COLUMNS)]
    for row in range(len(elapsed)):
        lines.append(",".join(f"{columns[name][row]:.6f}" for name in SPARSE_COLUMNS))
    (run_dir / "telemetry.csv").write_text("\n".join(lines) + "\n")
    meta = {
        "format_version": 1,
        "run_id": run_id,
        "label": label,
        "device": "gpu",
        "host": "labhost",
        "command": None,
        "interval_s": 1.0,
        "start_unix": start_unix,
        "end_unix": start_unix + duration_s,
        "actual_duration_s": duration_s,
        "end_reason": "completed",
        "exit_code": None,
        "samples": len(elapsed),
        "system": {"cpu_model": None, "gpu_driver_version": None, "cuda_version": None, "gpus": None},
        "sources": {
            "cpu": {"available": True},
            "thermal": {"available": True, "sensor": "k10temp Tctl"},
            "memory": {"available": True},
            "disk": {"available": True},
            "nvml": {"available": True, "notes": [SPARSE_SOURCE_NOTE]},
        },
        "notes": SPARSE_NOTE,
    }
    (run_dir / "run.json").write_text(json.dumps(meta, indent=2))
    return run_dir
