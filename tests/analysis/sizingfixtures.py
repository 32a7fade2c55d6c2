"""Crafted runs with round numbers, so every figure of the sizing report has a hand computation.

`reference_cpu()` and `reference_gpu()` describe one CPU and one (fake, NVML-shaped) GPU run; the comments
give the figures they must produce. `write_run` writes any RunData as a run directory following
docs/run-format.md, so the same data also goes through analysis.load, dashboard.runs and the report CLI.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from runformat import write_json_atomic
from sizing.model import RunData

CPU_TRAIN_START = 1_795_000_000.0
GPU_TRAIN_START = CPU_TRAIN_START + 10_000.0
CPU_MODEL = "Crafted Xeon 8-core"
GPU_NAME = "Crafted H100"


def training_frame(
    start_unix: float, step_times: list[float], losses: list[float], batch_size: int = 2
) -> pd.DataFrame:
    """training.csv rows: step k ends at start + sum of the first k step times."""
    elapsed = np.cumsum(step_times)
    times = np.asarray(step_times, dtype=float)
    return pd.DataFrame(
        {
            "time_unix": start_unix + elapsed,
            "elapsed_s": elapsed,
            "step": np.arange(1, len(step_times) + 1, dtype=float),
            "loss_total": np.asarray(losses, dtype=float),
            "learning_rate": np.full(len(step_times), 0.01),
            "step_time_s": times,
            "examples_per_s": batch_size / times,
        }
    )


def telemetry_frame(
    start_unix: float, samples: int, interval_s: float = 1.0, **columns: object
) -> pd.DataFrame:
    """telemetry.csv rows every interval_s from start_unix; scalar columns are broadcast."""
    elapsed = np.arange(samples, dtype=float) * interval_s
    data: dict[str, object] = {"time_unix": start_unix + elapsed, "elapsed_s": elapsed}
    for name, value in columns.items():
        data[name] = np.broadcast_to(np.asarray(value, dtype=float), (samples,)).copy()
    return pd.DataFrame(data)


def phases_frame(rows: list[tuple[str, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"phase": p, "start_unix": s, "end_unix": e, "status": "ok"} for p, s, e in rows],
        columns=["phase", "start_unix", "end_unix", "status"],
    )


def meta(run_id: str, device: str, start_unix: float, gpus: int = 0, label: str | None = None) -> dict:
    return {
        "format_version": 1,
        "run_id": run_id,
        "label": label or f"{device} crafted",
        "device": device,
        "host": "craftbox",
        "command": ["python", "-m", "training", "train", "--device", device],
        "interval_s": 1.0,
        "start_utc": "2026-11-21T00:00:00+00:00",
        "start_unix": start_unix,
        "end_utc": None,
        "end_unix": start_unix + 100.0,
        "requested_duration_s": None,
        "actual_duration_s": 100.0,
        "end_reason": "completed",
        "exit_code": 0,
        "samples": 0,
        "late_ticks": 0,
        "skipped_ticks": 0,
        "system": {
            "cpu_model": CPU_MODEL,
            "cpu_cores_logical": 8,
            "mem_total_bytes": 64 * 2**30,
            "gpu_driver_version": "550.54" if gpus else None,
            "gpu_count": gpus,
            "gpus": [
                {
                    "index": i,
                    "name": GPU_NAME,
                    "uuid": f"GPU-{i}",
                    "mem_total_bytes": 8e10,
                    "power_limit_w": 700.0,
                    "pci_bus_id": f"0000:0{i}:00.0",
                }
                for i in range(gpus)
            ],
        },
        "sources": {"cpu": {"available": True}},
    }


def training_info(
    device_used: str,
    start_unix: float,
    steps: int,
    warmup: int | None,
    batch_size: int = 2,
    budget_s: float | None = None,
) -> dict:
    info = {
        "format_version": 1,
        "tensorflow_version": "2.20.0",  # a Model Garden run as written before training.json's `framework`
        "status": "completed",
        "device_requested": "cpu" if device_used == "CPU" else "gpu",
        "device_used": device_used,
        "gpu_names": [] if device_used == "CPU" else [GPU_NAME],
        "gpu_uuids": [] if device_used == "CPU" else ["GPU-0"],
        "preset": "small",
        "backbone": "resnet18",
        "image_size": 256,
        "batch_size": batch_size,
        "precision": "float32",
        "dataset": "data/datasets/waldo",
        "dataset_info": {"kind": "synthetic", "seed": 0, "image_size": 256, "images": {"train": 256}},
        "start_unix": start_unix,
        "steps": steps,
        "initial_step": 0,
        "global_step": steps,
        "duration_budget_s": budget_s,
    }
    if warmup is not None:
        info["warmup_steps_excluded"] = warmup
    return info


def reference_cpu(run_id: str = "ref-cpu") -> RunData:
    """30 steps: the first takes 10 s, then 29 × 2 s; warm-up 5 steps (stated in training.json).

    Steady: rows 5..30, from t = S+18 to S+68: 25 steps / 50 s = 0.5 steps/s = 1.0 examples/s.
    RAPL counter rises 40 W → J per 1,000 steps = 40 × 1000 / 0.5 = 80,000 J = 0.0222… kWh.
    cpu_util 90 % → CPU-bound. Loss 4 − 0.1·k: 20-step trailing mean at k is 4 − 0.1·(k − 9.5).
    """
    start = CPU_TRAIN_START
    training = training_frame(start, [10.0] + [2.0] * 29, [4 - 0.1 * k for k in range(1, 31)])
    times = 81  # telemetry from S−5 to S+75
    telemetry = telemetry_frame(
        start - 5,
        times,
        cpu_util_pct=90.0,
        cpu_freq_mhz=3000.0,
        disk_util_pct=3.0,
        cpu_energy_j=40.0 * np.arange(times),
        cpu_temp_c=60.0,
    )
    phases = phases_frame([("train", start, start + 70), ("evaluate", start + 70, start + 74)])
    return RunData(
        run_id,
        meta(run_id, "cpu", start - 5),
        training_info("CPU", start, 30, 5, budget_s=60.0),
        {
            "format_version": 1,
            "map_50": 0.25,
            "recall_50": 0.5,
            "precision_50": 0.4,
            "num_images": 8,
            "global_step": 30,
        },
        telemetry,
        training,
        phases,
    )


def reference_gpu(run_id: str = "ref-gpu") -> RunData:
    """200 steps: the first takes 20 s, then 199 × 0.1 s; warm-up 20 steps.

    Steady: rows 20..200, S+21.9 to S+39.9: 180 steps / 18 s = 10 steps/s = 20 examples/s (20× the CPU).
    NVML counter 300 W, RAPL 50 W → 30,000 + 5,000 = 35,000 J per 1,000 steps. GPU util 95 % → GPU-bound
    (0 % before the train phase: a board alone, not shared). gpu0_temp_c 85 °C for samples 20–29 (10 s ≥
    80 °C, peak 85). Throttle reasons: 0x20 (SW thermal) in samples 30–32 and 40–41 (2 events, 5 samples),
    0x1 idle before the training, none elsewhere (clocks as high as they go; 0x2 would be a clocks setting).
    Loss 4 − 0.02·k: trailing mean 4 − 0.02·(k − 9.5).
    """
    start = GPU_TRAIN_START
    training = training_frame(start, [20.0] + [0.1] * 199, [4 - 0.02 * k for k in range(1, 201)])
    samples = 51  # S−5 … S+45
    temps = np.full(samples, 70.0)
    temps[20:30] = 85.0
    reasons = np.zeros(samples)
    reasons[:5] = 0x1
    reasons[30:33] = 0x20
    reasons[40:42] = 0x20
    telemetry = telemetry_frame(
        start - 5,
        samples,
        cpu_util_pct=30.0,
        cpu_freq_mhz=3000.0,
        disk_util_pct=2.0,
        cpu_energy_j=50.0 * np.arange(samples),
        gpu0_util_pct=np.where(np.arange(samples) < 5, 0.0, 95.0),
        gpu0_power_w=300.0,
        gpu0_energy_j=300.0 * np.arange(samples),
        gpu0_temp_c=temps,
        gpu0_throttle_reasons=reasons,
    )
    phases = phases_frame([("train", start, start + 40)])
    return RunData(
        run_id,
        meta(run_id, "gpu", start - 5, gpus=1),
        training_info(GPU_NAME, start, 200, 20),
        {
            "format_version": 1,
            "map_50": 0.4,
            "recall_50": 0.7,
            "precision_50": 0.6,
            "num_images": 8,
            "global_step": 200,
        },
        telemetry,
        training,
        phases,
    )


def _write_csv(path: Path, frame: pd.DataFrame) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(frame.columns)
        for row in frame.itertuples(index=False):
            writer.writerow(
                [
                    "" if isinstance(v, float) and np.isnan(v) else repr(v) if isinstance(v, float) else v
                    for v in row
                ]
            )


def write_run(parent: Path, run: RunData) -> Path:
    """The run as a directory parent/<run_id> with the contract's file names."""
    run_dir = parent / run.run_id
    run_dir.mkdir(parents=True)
    write_json_atomic(run_dir / "run.json", run.meta)
    _write_csv(run_dir / "telemetry.csv", run.telemetry)
    if not run.training.empty:
        _write_csv(run_dir / "training.csv", run.training)
    if run.training_info:
        write_json_atomic(run_dir / "training.json", run.training_info)
    if not run.phases.empty:
        _write_csv(run_dir / "phases.csv", run.phases)
    if run.evaluation:
        write_json_atomic(run_dir / "eval.json", run.evaluation)
    return run_dir


def with_info(run: RunData, **changes: object) -> RunData:
    """The run with training.json fields changed (None removes a field)."""
    info = {**run.training_info, **changes}
    info = {k: v for k, v in info.items() if v is not None}
    return replace(run, training_info=info)


def with_system(run: RunData, **changes: object) -> RunData:
    """The run with run.json system fields changed."""
    meta = {**run.meta, "system": {**run.meta["system"], **changes}}
    return replace(run, meta=meta)


def renamed(run: RunData, run_id: str) -> RunData:
    return replace(run, run_id=run_id, meta={**run.meta, "run_id": run_id})


def repeat_of(run: RunData, run_id: str) -> RunData:
    """Another measurement of the run's setup: renamed, its telemetry a sample shorter (identical files
    would be a copy of the run, counted once: sizing.analysis.copies)."""
    again = renamed(run, run_id)
    return replace(again, telemetry=again.telemetry.iloc[:-1].reset_index(drop=True))
