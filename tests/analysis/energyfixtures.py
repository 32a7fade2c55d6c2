"""Crafted GPU runs for the energy, price and attribution tests: the reference GPU run's training (20
examples/s in the steady state S+21.9 … S+39.9) on finer or multi-GPU telemetry, and a serving run."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from sizingfixtures import (
    GPU_NAME,
    GPU_TRAIN_START,
    meta,
    reference_gpu,
    telemetry_frame,
    training_frame,
    with_info,
    write_run,
)

from sizing import RunData

FINE_INTERVAL_S = 0.25
STEADY = (GPU_TRAIN_START + 21.9, GPU_TRAIN_START + 39.9)


def fine_gpu(run_id: str = "fine-gpu", gpu_w: float = 300.0, cpu_w: float = 50.0) -> RunData:
    """The reference GPU run sampled every 0.25 s (S−5 … S+45): counter and power of gpu0, RAPL."""
    run = reference_gpu(run_id)
    samples = int(50 / FINE_INTERVAL_S) + 1
    elapsed = np.arange(samples) * FINE_INTERVAL_S
    telemetry = telemetry_frame(
        GPU_TRAIN_START - 5, samples, FINE_INTERVAL_S, cpu_util_pct=30.0, cpu_freq_mhz=3000.0,
        cpu_energy_j=cpu_w * elapsed, gpu0_util_pct=np.where(elapsed < 5, 0.0, 95.0), gpu0_power_w=gpu_w,
        gpu0_energy_j=gpu_w * elapsed,
        gpu0_temp_c=70.0,
    )  # fmt: skip
    return replace(run, telemetry=telemetry, meta={**run.meta, "run_id": run_id})


def multi_gpu(run_id: str, utils: list[float], watts: list[float], uuids: list[str] | None) -> RunData:
    """The reference GPU run on a host with len(utils) GPUs; training.json names `uuids` (None: none)."""
    run = reference_gpu(run_id)
    samples = len(run.telemetry)
    telemetry = run.telemetry.drop(columns=[c for c in run.telemetry if c.startswith("gpu0_")])
    for index, (util, w) in enumerate(zip(utils, watts, strict=True)):
        telemetry[f"gpu{index}_util_pct"] = np.where(np.arange(samples) < 5, 0.0, util)  # idle before S
        telemetry[f"gpu{index}_power_w"] = w
        telemetry[f"gpu{index}_energy_j"] = w * np.arange(samples)
    run = replace(run, telemetry=telemetry, meta=meta(run_id, "gpu", GPU_TRAIN_START - 5, gpus=len(utils)))
    return with_info(run, gpu_uuids=uuids)


def gpu_run(run_id: str, gpu_name: str, step_s: float, watts: float, batch_size: int = 2) -> RunData:
    """A GPU run of the reference workload on `gpu_name`: 200 steps (the first 20 s, then step_s each)."""
    start = GPU_TRAIN_START
    training = training_frame(
        start, [20.0] + [step_s] * 199, [4 - 0.02 * k for k in range(1, 201)], batch_size
    )
    end = 20.0 + 199 * step_s
    samples = int(end) + 11
    telemetry = telemetry_frame(
        start - 5, samples, cpu_util_pct=30.0, cpu_freq_mhz=3000.0, cpu_energy_j=50.0 * np.arange(samples),
        gpu0_util_pct=np.where(np.arange(samples) < 5, 0.0, 95.0), gpu0_power_w=watts,
        gpu0_energy_j=watts * np.arange(samples),
    )  # fmt: skip
    base = reference_gpu(run_id)
    run_meta = meta(run_id, "gpu", start - 5, gpus=1)
    run_meta["system"]["gpus"][0]["name"] = gpu_name
    phases = base.phases.assign(end_unix=start + end)
    info = {**base.training_info, "gpu_names": [gpu_name], "batch_size": batch_size}
    return replace(base, meta=run_meta, training_info=info, telemetry=telemetry, training=training,
                   phases=phases)  # fmt: skip


def serving_cell(batch_size: int, images_per_s: float, start: float, end: float) -> dict:
    calls = round(images_per_s * (end - start) / batch_size)
    return {
        "batch_size": batch_size, "start_unix": start, "end_unix": end, "calls": calls,
        "images": calls * batch_size, "latency_ms_p50": 10.0, "latency_ms_p99": 12.0,
        "ms_per_image_p99": 12.0 / batch_size, "images_per_s": images_per_s,
    }  # fmt: skip


def write_serving_run(parent: Path, run: RunData, device: str, cells: list[dict]) -> Path:
    """The run as a directory with an inference.json of one runtime and these cells."""
    run_dir = write_run(parent, run)
    runtimes = [{"runtime": "tf-savedmodel", "available": True, "cells": cells}]
    (run_dir / "inference.json").write_text(
        json.dumps({"format_version": 1, "device": device, "runtimes": runtimes}), encoding="utf-8"
    )
    return run_dir


__all__ = ["GPU_NAME", "GPU_TRAIN_START", "fine_gpu", "gpu_run", "multi_gpu", "serving_cell",
           "write_serving_run"]  # fmt: skip
