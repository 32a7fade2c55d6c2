"""sizing.analysis.serving: serving figures from inference.json and telemetry.csv of run directories."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from sizing import RunData
from sizing.analysis.load import load_run_dir
from sizing.analysis.serving import cost_cell, markdown, serving_section
from sizing.model import Prices
from sizing.text import NO_PRICE

T0 = 1_795_000_000.0


def _cell(batch_size: int, images_per_s: float, start: float, end: float, p99_ms: float) -> dict:
    calls = round(images_per_s * (end - start) / batch_size)
    return {
        "batch_size": batch_size,
        "start_unix": start,
        "end_unix": end,
        "calls": calls,
        "images": calls * batch_size,
        "latency_ms_p50": p99_ms * 0.8,
        "latency_ms_p99": p99_ms,
        "ms_per_image_p99": p99_ms / batch_size,
        "images_per_s": images_per_s,
    }


def _write_run(
    root: Path, name: str, device: str, cells: list[dict], telemetry: list[dict], refused: bool = True
) -> RunData:
    run_dir = root / name
    run_dir.mkdir()
    runtimes = [{"runtime": "tf-savedmodel", "available": True, "cells": cells}]
    if refused:
        runtimes.append({"runtime": "torchscript", "available": False, "reason": "no TorchScript model"})
    (run_dir / "inference.json").write_text(
        json.dumps({"format_version": 1, "device": device, "runtimes": runtimes})
    )
    with (run_dir / "telemetry.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(telemetry[0]))
        writer.writeheader()
        writer.writerows(telemetry)
    return load_run_dir(run_dir)


def _telemetry(seconds: int, **per_second) -> list[dict]:
    """One row a second; a value ending in _j grows by that many joules a second, others are constant."""
    return [
        {"time_unix": T0 + i, **{k: (v * i if k.endswith("_j") else v) for k, v in per_second.items()}}
        for i in range(seconds + 1)
    ]


def test_cpu_run_with_rapl_gives_joules_per_1000_images(tmp_path: Path) -> None:
    # 50 W of RAPL over a 4 s cell at 5 images/s: 200 J for 20 images = 10,000 J per 1,000 images
    run = _write_run(
        tmp_path,
        "cpu",
        "cpu",
        [_cell(4, 5.0, T0 + 2, T0 + 6, 900.0)],
        _telemetry(10, cpu_energy_j=50.0, cpu_util_pct=100.0, proc_cpu_pct=200.0),
    )
    section = serving_section([run])
    (row,) = section.rows
    assert row.joules_per_1000_images == pytest.approx(10_000.0)
    assert row.energy_method == "CPU package (RAPL)"
    assert row.ms_per_image_p99 == pytest.approx(225.0) and row.images_per_s == 5.0
    assert row.cpu_cores_used == pytest.approx(2.0)
    # the default tariff prices the energy; no hardware price given: energy only, and says so
    assert row.usd_per_million_images == pytest.approx(10_000.0 * 1000 / 3.6e6 * 0.15)
    assert row.cost_note == "energy only (host not priced)"
    assert cost_cell(row) == "$0.4167, energy only (host not priced)"  # in its own cell, not a bare $
    (bare,) = serving_section([run], Prices(tariff_per_kwh=None)).rows
    assert bare.usd_per_million_images is None and bare.cost_note == NO_PRICE and cost_cell(bare) == NO_PRICE
    assert section.unavailable == [("cpu", "torchscript", "no TorchScript model")]


def test_without_rapl_energy_is_not_measured_or_an_estimate_marked_as_such(tmp_path: Path) -> None:
    run = _write_run(
        tmp_path, "cpu", "cpu", [_cell(1, 2.0, T0 + 1, T0 + 5, 600.0)], _telemetry(8, cpu_util_pct=50.0)
    )
    (row,) = serving_section([run]).rows
    assert row.joules_per_1000_images is None and row.energy_method.startswith("not measured")
    (row,) = serving_section([run], Prices(cpu_tdp_w=100.0)).rows
    # 100 W × (30 % idle floor + 70 % × 50 %) over 4 s = 260 J for 8 images, as in training
    assert row.joules_per_1000_images == pytest.approx(32_500.0)
    assert row.energy_method.startswith("ESTIMATE")


def test_gpu_run_counts_gpu_and_cpu_energy_and_prices(tmp_path: Path) -> None:
    run = _write_run(
        tmp_path,
        "gpu",
        "gpu",
        [_cell(8, 400.0, T0 + 1, T0 + 3, 40.0)],
        _telemetry(5, gpu0_energy_j=250.0, cpu_energy_j=50.0, proc_cpu_pct=100.0),
    )
    prices = Prices(tariff_per_kwh=0.36, gpu_price=10_000.0, cpu_price=2_000.0, amortise_years=3)
    (row,) = serving_section([run], prices).rows
    # 300 W over 2 s = 600 J for 800 images = 750 J per 1,000 images
    assert row.joules_per_1000_images == pytest.approx(750.0)
    assert row.energy_method == "GPU board (NVML energy counter) + CPU package (RAPL)"
    energy_usd = 750.0 * 1000 / 3.6e6 * 0.36  # per million images
    hardware_usd = 12_000.0 / (3 * 8760 * 3600) * (1e6 / 400.0)  # the same 8,760-hour year as training
    assert row.usd_per_million_images == pytest.approx(energy_usd + hardware_usd)
    assert "energy at $0.36/kWh" in row.cost_note and "$12,000 hardware over a 3-year life" in row.cost_note


def test_cpu_cores_one_gpu_replaces(tmp_path: Path) -> None:
    cpu = _write_run(
        tmp_path,
        "cpu",
        "cpu",
        [_cell(1, 4.0, T0 + 1, T0 + 4, 300.0), _cell(4, 5.0, T0 + 5, T0 + 9, 900.0)],
        _telemetry(10, proc_cpu_pct=200.0),
    )
    gpu = _write_run(
        tmp_path, "gpu", "gpu", [_cell(8, 100.0, T0 + 1, T0 + 3, 90.0)], _telemetry(4, gpu0_power_w=200.0)
    )
    section = serving_section([cpu, gpu])
    # best CPU: 5 images/s on 2 cores = 2.5 per core; the GPU's 100 images/s = 40 cores
    assert section.cpu_cores_replaced == pytest.approx(40.0)
    assert "tf-savedmodel batch 4 on the CPU" in section.cpu_cores_note
    gpu_row = next(r for r in section.rows if r.device == "gpu")
    # GPU power but no CPU energy: shown as the GPU board only, as in training
    assert gpu_row.energy_method.startswith("ESTIMATE: GPU board (integrated NVML average power)")
    assert "only; CPU not measured" in gpu_row.energy_method and gpu_row.energy_is_estimate
    text = markdown(section)
    assert "CPU cores one GPU replaces for this model: 40.0" in text
    assert "cannot take this model: no TorchScript model" in text


def test_one_device_only_and_missing_files_are_said(tmp_path: Path) -> None:
    cpu = _write_run(tmp_path, "cpu", "cpu", [_cell(1, 4.0, T0 + 1, T0 + 4, 300.0)], _telemetry(5, load1=1.0))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "telemetry.csv").write_text("time_unix,cpu_util_pct\n1,5\n2,5\n")
    section = serving_section([cpu, load_run_dir(empty)])
    assert section.cpu_cores_replaced is None
    assert section.cpu_cores_note.startswith(
        "not measured: needs an inference cell measured on a CPU and one on a GPU"
    )
    assert section.warnings == ["empty: no inference.json (the run skipped or lost it)"]
    assert section.rows[0].cpu_cores_used is None


def test_a_tiny_known_cost_keeps_two_significant_figures_never_zero() -> None:
    """Seen on an H100: 1,132 J per 1,000 examples costs $0.000047 of energy; `$0.0000` read as free."""
    from sizing.text import fmt_usd

    assert fmt_usd(4.72e-5) == "$0.000047"
    assert fmt_usd(0.0001234) == "$0.00012"
    assert fmt_usd(0.05) == "$0.0500" and fmt_usd(1234.5) == "$1,234.50"
    assert fmt_usd(None) != "$0.0000"
