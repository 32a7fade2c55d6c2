"""The scaling verdict (sizing/analysis/scaling.py, sections_scaling.py) on a crafted 1/2/4-GPU sweep with
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
from sizing.analysis.scaling import count_text
from sizing.model import RunData

START = 1_795_100_000.0
RATES = {1: 20.0, 2: 36.0, 4: 64.0}  # examples/s at per-device batch 2: efficiency 1, 0.9, 0.8
GPU_W, CPU_W = 300.0, 50.0
PRICES = Prices(tariff_per_kwh=0.15, gpu_price=30_000.0, cpu_price=10_000.0, amortise_years=3.0,
                value_per_hour=100.0)  # fmt: skip


def gpu_sweep_run(
    count: int, per_device_batch: int = 2, run_id: str | None = None, rate: float | None = None
) -> RunData:
    """200 steps (the first 20 s, the rest at `rate`, else RATES[count], examples/s); every GPU draws
    300 W, the CPU 50 W."""
    run_id = run_id or f"sweep-gpu{count}"
    start = START + 1000.0 * count + 10.0 * per_device_batch
    batch = per_device_batch * count
    step = batch / (rate or RATES[count]) * (per_device_batch / 2)
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


def failed(run: RunData, why: str = "NCCL timeout") -> RunData:
    """The run as a training that failed (training.json status, run.json end_reason)."""
    info = {**run.training_info, "status": "failed", "error": why}
    return replace(run, meta={**run.meta, "end_reason": "failed", "exit_code": 1}, training_info=info)


def _scaling(runs: list[RunData], prices: Prices = PRICES, include: bool = False):  # type: ignore[no-untyped-def]
    report = build_report(runs, ReportSettings(prices=prices, include_incomplete=include))
    return next(s for s in report.sections if s.key == "scaling")


@pytest.mark.parametrize("failed_rate", [30.0, 100.0])  # slower than 2 GPUs (would stop there), or faster
def test_a_failed_4_gpu_run_neither_sets_nor_stops_the_verdict(failed_rate: float) -> None:
    runs = [gpu_sweep_run(1), gpu_sweep_run(2), failed(gpu_sweep_run(4, rate=failed_rate))]
    section = _scaling(runs)
    (series,) = section.data["series"]
    assert [row["count"] for row in series["rows"]] == [1, 2]  # left out by default
    assert series["largest_count_paying_back"] == 2 and series["stopped_at_count"] is None
    assert series["left_out_incomplete"] == ["4 GPUs: sweep-gpu4 (training failed: NCCL timeout)"]
    assert series["verdict"] == (
        "Largest count whose every step pays back within the 3-year life at 100% use: 2 GPUs, the largest "
        "count measured by a complete run (left out as incomplete: 4 GPUs: sweep-gpu4 (training failed: "
        "NCCL timeout))"
    )
    (left,) = [t for t in section.tables if t.title == "Scaling: runs left out as incomplete"]
    assert left.rows == (("sweep-gpu4 (4 GPUs)", "left out of the scaling series, training failed: NCCL "
                          "timeout (--include-incomplete includes it, marked)"),)  # fmt: skip

    included = _scaling(runs, include=True)
    (series,) = included.data["series"]
    rows = {row["count"]: row for row in series["rows"]}
    assert rows[4]["judged"] is False and rows[4]["complete"] is False
    assert rows[4]["incomplete_runs"] == ["sweep-gpu4: training failed: NCCL timeout"]
    assert rows[4]["payback_hours"] is None and rows[4]["pays_back_within_life"] is None
    assert rows[2]["judged"] is True and rows[2]["complete"] is True
    assert series["largest_count_paying_back"] == 2 and series["stopped_at_count"] is None
    assert "not judged (incomplete runs only): 4 GPUs" in series["verdict"]
    table = next(t for t in included.tables if t.title.startswith("Scaling: Crafted"))
    assert table.rows[2][:2] == (
        "4 (incomplete runs only: not judged)", "sweep-gpu4 (INCOMPLETE: training failed: NCCL timeout)"
    )  # fmt: skip
    assert table.rows[2][-1] == "not judged: measured only by incomplete runs"


def test_a_count_measured_only_by_a_failed_run_is_stepped_over() -> None:
    """1 → (2 failed) → 4: the step to 4 GPUs is judged against 1 GPU; a complete repeat makes 2 count."""
    runs = [gpu_sweep_run(1), failed(gpu_sweep_run(2, rate=21.0)), gpu_sweep_run(4)]
    (series,) = _scaling(runs, include=True).data["series"]
    rows = {row["count"]: row for row in series["rows"]}
    assert rows[2]["judged"] is False and rows[4]["step_from_count"] == 1
    energy = 64 * 3.6 * (17_500 - 1250 * 1000 / 64) * 0.15 / 3.6e6  # $ per hour (negative: more J)
    saving = (64 / 20 - 1) * 100 + energy  # 3 GPUs added against 1 GPU's rate
    assert rows[4]["payback_hours"] == pytest.approx(3 * 30_000 / saving, rel=1e-2)
    assert series["largest_count_paying_back"] == 4
    repeat = gpu_sweep_run(2, run_id="sweep-gpu2-again")
    (series,) = _scaling([*runs, repeat], include=True).data["series"]
    rows = {row["count"]: row for row in series["rows"]}
    assert rows[2]["judged"] is True and rows[2]["complete"] is False and rows[4]["step_from_count"] == 2
    only_one = _scaling([failed(gpu_sweep_run(1)), gpu_sweep_run(2)], include=True).data["series"][0]
    assert only_one["largest_count_paying_back"] is None
    assert (
        only_one["rows"][0]["scaling_efficiency"] is None
        and only_one["rows"][1]["scaling_efficiency"] is None
    )
    assert only_one["verdict"].startswith(
        "Largest count that pays back: cannot tell (fewer than two counts measured by complete runs)"
    )


NO_VALUE = replace(PRICES, value_per_hour=None)


def test_without_a_value_per_hour_a_faster_second_gpu_cannot_be_told() -> None:
    """1.70× with the second GPU, energy per example up (650 W / 34 vs 350 W / 20): only time could pay."""
    section = _scaling([gpu_sweep_run(1), gpu_sweep_run(2, rate=34.0)], NO_VALUE)
    (series,) = section.data["series"]
    two = series["rows"][1]
    assert two["payback_verdict"] == "cannot tell" and two["pays_back_within_life"] is None
    assert two["never_pays_back"] is False and two["payback_hours"] is None
    assert series["largest_count_paying_back"] is None and series["stopped_at_count"] == 2
    assert series["verdict"] == (
        "Largest count that pays back: time saved not valued: cannot tell at the step from 1 GPU to 2 GPUs "
        "(the energy alone saves nothing; --value-per-hour would tell)"
    )
    (table,) = section.tables
    assert table.rows[1][-1] == (
        "time saved not valued: cannot tell (the energy alone saves nothing; --value-per-hour would tell)"
    )
    text = " ".join([*section.lines, table.note, *(cell for row in table.rows for cell in row)])
    assert "never" not in text and "it saves nothing" not in text
    assert "1 GPUs" not in text and "GPUs of one node" in table.note


def test_without_a_value_per_hour_the_energy_alone_may_pay_back_at_most_that_soon() -> None:
    """2 GPUs at 40 examples/s: 16,250 J per 1,000 examples against 17,500; $0.0075 saved per hour."""
    cheap = replace(NO_VALUE, gpu_price=100.0)
    (series,) = _scaling([gpu_sweep_run(1), gpu_sweep_run(2, rate=40.0)], cheap).data["series"]
    two = series["rows"][1]
    saving = 40 * 3.6 * (17_500 - 16_250) * 0.15 / 3.6e6  # $ per hour of 2-GPU training
    assert two["payback_hours"] == pytest.approx(100 / saving, rel=1e-2)
    assert two["payback_bound"] == "at most" and two["pays_back_within_life"] is True
    assert series["largest_count_paying_back"] == 2
    (table,) = _scaling([gpu_sweep_run(1), gpu_sweep_run(2, rate=40.0)], cheap).tables
    assert table.rows[1][-1].startswith("at most 13,")
    assert table.rows[1][-1].endswith(
        "(within the 3-year life at 100% use, on the energy alone: time saved not valued)"
    )
    dear = _scaling([gpu_sweep_run(1), gpu_sweep_run(2, rate=40.0)], NO_VALUE).data["series"][0]  # $30,000
    assert dear["largest_count_paying_back"] is None
    assert "the energy alone pays back after 4,000,000 h, beyond the 26,280 h of the life" in dear["verdict"]


@pytest.mark.parametrize(
    ("value", "pays"),
    [(100.0, True), (1.7, True), (1.6, False)],  # 30,000 / (0.7 × v + energy) against 26,280 h
)
def test_with_a_value_per_hour_the_second_gpu_pays_back_or_not(value: float, pays: bool) -> None:
    runs = [gpu_sweep_run(1), gpu_sweep_run(2, rate=34.0)]
    section = _scaling(runs, replace(PRICES, value_per_hour=value))
    (series,) = section.data["series"]
    two = series["rows"][1]
    energy = 34 * 3.6 * (17_500 - 650 * 1000 / 34) * 0.15 / 3.6e6  # negative: more J per example
    assert two["payback_hours"] == pytest.approx(30_000 / (0.7 * value + energy), rel=1e-2)
    assert two["pays_back_within_life"] is pays and series["largest_count_paying_back"] == (2 if pays else 1)
    if not pays:
        assert series["verdict"] == (
            "Largest count whose every step pays back within the 3-year life at 100% use: 1 GPU; the step to "
            "2 GPUs does not pay back within it (tariff $0.15/kWh; 1 GPU added for $30,000.00; an hour "
            "saved worth $1.60)"
        )


def test_a_step_that_saves_nothing_never_pays_back_and_says_on_what() -> None:
    (series,) = _scaling([gpu_sweep_run(1), gpu_sweep_run(2, rate=19.0)]).data["series"]
    assert series["rows"][1]["never_pays_back"] is True and series["largest_count_paying_back"] == 1
    assert series["verdict"].endswith(
        "1 GPU; the step to 2 GPUs never pays back (it saves nothing: tariff $0.15/kWh; 1 GPU added for "
        "$30,000.00; an hour saved worth $100.00; 3-year life at 100% use)"
    )


def test_counts_are_named_in_the_singular_and_plural() -> None:
    assert [count_text(n, d) for n, d in ((1, "GPUs"), (2, "GPUs"), (1, "processes"), (3, "processes"))] == [
        "1 GPU", "2 GPUs", "1 process", "3 processes"
    ]  # fmt: skip
