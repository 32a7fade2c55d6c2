"""inference.json files written to docs/run-format.md for the dashboard tests."""

from __future__ import annotations

import json
from pathlib import Path


def _cell(batch_size: int, p50: float, images_per_s: float) -> dict:
    return {
        "batch_size": batch_size,
        "warmup_calls": 2,
        "warmup_s": 1.5,
        "first_call_ms": p50 * 3,
        "start_unix": 1.0,
        "end_unix": 3.0,
        "calls": 10,
        "images": 10 * batch_size,
        "latency_ms_p50": p50,
        "latency_ms_p90": p50 * 1.1,
        "latency_ms_p99": p50 * 1.3,
        "latency_ms_max": p50 * 1.4,
        "latency_ms_mean": p50 * 1.05,
        "images_per_s": images_per_s,
        "ms_per_image_p99": p50 * 1.3 / batch_size,
        "rss_peak_bytes": 2**31,
    }


def write_inference(run_dir: Path, device: str, scale: float) -> None:
    """An inference.json (docs/run-format.md): two runtimes measured, one batch size out of memory, one
    runtime refused; `scale` multiplies latencies (a GPU run gets a small one)."""
    gpu = {"gpu_mem_peak_bytes": 3 * 2**30} if device == "gpu" else {"gpu_mem_peak_note": "n/a on the CPU"}
    summary = {
        "format_version": 1,
        "device": device,
        "framework": "tensorflow",
        "status": "completed",
        "batch_sizes": [1, 4],
        "duration_per_cell_s": 2.0,
        "warmup_calls": 2,
        "input": {"height": 256, "width": 256},
        "model": {"parameters": 15_541_465, "flops_per_image": 8.1e9, "flops_note": "counted"},
        "runtimes": [
            {
                "runtime": "tf-savedmodel",
                "available": True,
                "cells": [
                    {**_cell(1, 90 * scale, 11 / scale), **gpu},
                    {**_cell(4, 250 * scale, 16 / scale), **gpu},
                ],
            },
            {
                "runtime": "onnxruntime",
                "available": True,
                "cells": [
                    {**_cell(1, 150 * scale, 6 / scale), **gpu},
                    {"batch_size": 4, "error": "out of memory"},
                ],
            },
            {"runtime": "torchscript", "available": False, "reason": "no TorchScript model at model/x.pt"},
        ],
    }
    (run_dir / "inference.json").write_text(json.dumps(summary))
