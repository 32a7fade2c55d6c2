"""The scaling verdict (sizing/scaling.py, sections_scaling.py) on a crafted 1/2/4-GPU sweep with
hand-computable figures, and through `python -m sizing` on the written run directories."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sizingfixtures import GPU_NAME, meta, telemetry_frame, training_frame, training_info, write_run

from sizing import Prices, ReportSettings, build_report
from sizing.model import RunData

START = 1_795_100_000.0
RATES = {1: 20.0, 2: 36.0, 4: 64.0}  # examples/s at per-device batch 2: efficiency 1, 0.9, 0.8
GPU_W, CPU_W = 300.0, 50.0
PRICES = Prices(tariff_per_kwh=0.15, gpu_price=30_000.0, cpu_price=10_000.0, amortise_years=3.0,
                value_per_hour=100.0)  # fmt: skip


def gpu_sweep_run(count: int, per_device_batch: int = 2, run_id: str | None = None) -> RunData:
    """200 steps (the first 20 s, the rest at RATES[count]); every GPU draws 300 W, the CPU 50 W."""
    run_id = run_id or f"sweep-gpu{count}"
    start = START + 1000.0 * count + 10.0 * per_device_batch
    batch = per_device_batch * count
    step = batch / RATES[count] * (per_device_batch / 2)
    training = training_frame(start, [20.0] + [step] * 199, [4 - 0.01 * k for k in range(200)], batch)
    samples = int(20 + 199 * step) + 10
    gpus: dict[str, object] = {}
    for i in range(count):
        gpus |= {f"gpu{i}_util_pct": 95.0, f"gpu{i}_power_w": GPU_W,
                 f"gpu{i}_energy_j": GPU_W * np.arange(samples)}  # fmt: skip
    telemetry = telemetry_frame(start - 5, samples, cpu_util_pct=30.0, cpu_freq_mhz=3000.0,
                                cpu_energy_j=CPU_W * np.arange(samples), **gpus)  # fmt: skip
    info = training_info(GPU_NAME, start, 200, 20, batch_size=batch)
    info |= {"world_size": count, "per_device_batch_size": per_device_batch,
             "gpu_uuids": [f"GPU-{i}" for i in range(count)], "framework": "torch"}  # fmt: skip
    run_meta = meta(run_id, "gpu", start - 5, gpus=4)
    run_meta["sweep"] = {"id": "sweep-x", "devices": "gpus", "counts": [1, 2, 4], "count": count,
                         "position": [1, 2, 4].index(count)}  # fmt: skip
    return RunData(run_id, run_meta, info, {}, telemetry, training, training.iloc[0:0][[]])


def _section(runs: list[RunData], prices: Prices = PRICES) -> dict:
    report = build_report(runs, ReportSettings(prices=prices))
    return next(s for s in report.sections if s.key == "scaling").data


def test_efficiency_energy_cost_and_payback_per_count() -> None:
    data = _section([gpu_sweep_run(n) for n in (1, 2, 4)])
    (series,) = data["series"]
    assert series["devices"] == "GPUs" and series["per_device_batch"] == 2
    assert series["sweep_ids"] == ["sweep-x"]
    rows = {row["count"]: row for row in series["rows"]}
    assert rows[1]["examples_per_s"] == pytest.approx(20.0, rel=1e-3)
    assert rows[2]["scaling_efficiency"] == pytest.approx(0.9, rel=1e-3)
    assert rows[4]["scaling_efficiency"] == pytest.approx(0.8, rel=1e-3)
    for n in (1, 2, 4):  # (N × 300 W + 50 W) × 1,000 / examples/s
        expected = (n * GPU_W + CPU_W) * 1000 / RATES[n]
        assert rows[n]["energy_j_per_1000_examples"] == pytest.approx(expected, rel=1e-2)
    hardware_4 = (10_000 + 4 * 30_000) / (3 * 8760) * (1000 / 64 / 3600)  # host + 4 GPUs, amortised
    assert rows[4]["hardware_usd_per_1000_examples"] == pytest.approx(hardware_4, rel=1e-3)
    energy = {n: rows[n]["energy_usd_per_1000_examples"] for n in rows}
    total = {n: rows[n]["total_usd_per_1000_examples"] for n in rows}
    assert total[2] == pytest.approx(energy[2] + rows[2]["hardware_usd_per_1000_examples"])
    marginal_4 = (total[4] * 64 - total[2] * 36) / (64 - 36)  # extra $ per hour / extra examples per hour
    assert rows[4]["marginal_usd_per_1000_extra_examples"] == pytest.approx(marginal_4, rel=1e-3)
    saving_2 = (36 / 20 - 1) * 100 + 36 * 3.6 * (energy[1] - energy[2])  # $ per hour of 2-GPU training
    assert rows[2]["payback_hours"] == pytest.approx(30_000 / saving_2, rel=1e-3)
    assert rows[2]["pays_back_within_life"] is True and rows[1]["payback_hours"] is None
    assert series["largest_count_paying_back"] == 4


def test_a_step_that_cannot_pay_back_within_the_life_caps_the_count() -> None:
    short_life = replace(PRICES, amortise_years=0.02, value_per_hour=100.0)  # 175 h of life
    (series,) = _section([gpu_sweep_run(n) for n in (1, 2, 4)], short_life)["series"]
    rows = {row["count"]: row for row in series["rows"]}
    assert rows[2]["pays_back_within_life"] is False and series["largest_count_paying_back"] == 1
    (unknown,) = _section([gpu_sweep_run(n) for n in (1, 2)], replace(PRICES, gpu_price=None))["series"]
    assert unknown["largest_count_paying_back"] is None
    assert unknown["rows"][1]["total_usd_per_1000_examples"] is None  # no price given is not $0


def test_only_like_for_like_counts_line_up() -> None:
    other_batch = gpu_sweep_run(2, per_device_batch=4, run_id="sweep-gpu2-b4")
    data = _section([gpu_sweep_run(1), gpu_sweep_run(4), other_batch])
    (series,) = data["series"]
    assert [row["count"] for row in series["rows"]] == [1, 4]
    assert any("sweep-gpu2-b4" in note and "per-device batch 4" in note for note in data["notes"])
    report = build_report([gpu_sweep_run(1), gpu_sweep_run(4), other_batch], ReportSettings(prices=PRICES))
    tables = [t for s in report.sections if s.key == "scaling" for t in s.tables]
    assert tables[-1].title == "Scaling: many-device runs not lined up"
    assert tables[-1].rows[0][0].startswith("sweep-gpu2-b4")
    without_one = _section([gpu_sweep_run(2), gpu_sweep_run(4)])["series"][0]["rows"]
    assert without_one[0]["scaling_efficiency"] is None


def test_python_m_sizing_writes_the_section_plot_and_json_rows(tmp_path: Path) -> None:
    for n in (1, 2, 4):
        write_run(tmp_path / "runs", gpu_sweep_run(n))
    ids = [f"sweep-gpu{n}" for n in (1, 2, 4)]
    common = [sys.executable, "-m", "sizing", *ids, "--data-dir", str(tmp_path), "--gpu-price", "30000",
              "--cpu-price", "10000", "--value-per-hour", "100"]  # fmt: skip
    for out in ("r.json", "r.html", "r.md"):
        done = subprocess.run([*common, "--out", str(tmp_path / out)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    rows = report["sections"]["scaling"]["series"][0]["rows"]
    assert [r["count"] for r in rows] == [1, 2, 4]
    assert rows[2]["scaling_efficiency"] == pytest.approx(0.8, 1e-3)
    assert "Throughput against device count" in (tmp_path / "r.html").read_text()
    markdown = (tmp_path / "r.md").read_text()
    assert "## Scaling:" in markdown and "80 %" in markdown
    assert "Largest count whose every step pays back within the 3-year life at 100% use: 4 GPUs" in markdown


def test_more_processes_on_the_same_cpu_cost_no_extra_hardware() -> None:
    def cpu_run(count: int, rate: float) -> RunData:
        run = gpu_sweep_run(1, run_id=f"cpu{count}")
        info = {**run.training_info, "world_size": count, "batch_size": 2 * count, "device_used": "CPU",
                "gpu_uuids": [], "gpu_names": [], "device_requested": "cpu"}  # fmt: skip
        meta_ = {**run.meta, "device": "cpu", "system": {**run.meta["system"], "gpus": [], "gpu_count": 0}}
        telemetry = run.telemetry.drop(columns=[c for c in run.telemetry if c.startswith("gpu")])
        step = 2 * count / rate
        training = training_frame(START, [20.0] + [step] * 199, [1.0] * 200, 2 * count)
        return replace(run, meta=meta_, training_info=info, telemetry=telemetry, training=training)

    (series,) = _section([cpu_run(1, 1.0), cpu_run(2, 1.5)], replace(PRICES, value_per_hour=None))["series"]
    assert series["devices"] == "processes"
    two = series["rows"][1]
    assert two["scaling_efficiency"] == pytest.approx(0.75, rel=1e-3) and two["payback_hours"] == 0
    report = build_report([cpu_run(1, 1.0), cpu_run(2, 1.5)], ReportSettings(prices=PRICES))
    (table,) = [t for s in report.sections if s.key == "scaling" for t in s.tables]
    assert table.rows[1][-1] == "at once (no extra hardware)"
