"""Energy coverage and validity (issue 18, item 1): a source that does not cover the run gives no figure,
a counter that resets is integrated piecewise, a GPU run without GPU energy is never the CPU alone."""

from __future__ import annotations

import csv
import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from energyfixtures import STEADY, fine_gpu
from sizingfixtures import CPU_TRAIN_START, reference_cpu, reference_gpu, write_run

from sizing import Prices, ReportSettings, build_report, to_json
from sizing.cli import main as sizing_main

NOT_REPORTED = "energy not measured (GPU board not reported)"


def report_json(runs: list, prices: Prices | None = None) -> tuple[list[str], dict]:
    report = build_report(runs, ReportSettings(prices or Prices()))
    return list(report.headline), to_json(report)


def by_id(data: dict, key: str = "runs") -> dict[str, dict]:
    return {r["run_id"]: r for r in data[key]}


def test_a_gpu_board_nvml_does_not_report_is_not_the_cpu_package_alone() -> None:
    gpu = reference_gpu()
    blank = gpu.telemetry.assign(gpu0_power_w=np.nan, gpu0_energy_j=np.nan)  # NVML: not supported
    gpu = replace(gpu, telemetry=blank)
    headline, data = report_json([reference_cpu(), gpu], Prices(gpu_price=2000.0, cpu_price=1000.0))
    run = by_id(data)["ref-gpu"]
    assert run["energy_j_per_1k_examples"] is None  # not 2,500 J: the RAPL package alone
    assert run["energy_not_measured_reason"] == "GPU board not reported" and not run["energy_complete"]
    assert run["energy_usd_per_1k_examples"] is None and run["total_usd_per_1k_examples"] is None
    assert NOT_REPORTED in headline[1]
    (comparison,) = data["comparisons"]
    assert comparison["break_even_hours"] is None  # no break-even from an energy that is not there
    assert "energy measured on both sides" in comparison["break_even_reason"]
    assert "break-even: not computed" in headline[1]


def test_one_of_two_charged_gpus_unreported_gives_no_gpu_figure() -> None:
    from energyfixtures import multi_gpu

    run = multi_gpu("two", [95.0, 95.0], [300.0, 300.0], ["GPU-0", "GPU-1"])
    run = replace(run, telemetry=run.telemetry.assign(gpu1_power_w=np.nan, gpu1_energy_j=np.nan))
    headline, data = report_json([reference_cpu(), run])
    assert by_id(data)["two"]["energy_j_per_1k_examples"] is None
    assert "gpu1 board not reported" in headline[1]


def test_a_counter_that_resets_is_integrated_piecewise_and_said() -> None:
    run = fine_gpu()
    elapsed = run.telemetry["elapsed_s"].to_numpy()
    reload_at = 30.0  # S+25: a driver reload in the middle of the steady state restarts the counter at 0
    counter = np.where(elapsed < reload_at, 300.0 * elapsed, 300.0 * (elapsed - reload_at) + 0.1)
    run = replace(run, telemetry=run.telemetry.assign(gpu0_energy_j=counter))
    _, data = report_json([reference_cpu(), run])
    gpu = by_id(data)["fine-gpu"]
    assert gpu["energy_j_per_1k_examples"] == pytest.approx(17_500.0, rel=1e-3)  # (300 + 50) W / 20 ex/s
    assert gpu["energy_resets"] == 1 and gpu["energy_complete"]
    assert any("gpu0 energy counter reset 1 time(s)" in w for w in data["warnings"])
    energy = by_id(data["sections"], "energy")["fine-gpu"]
    source = next(s for s in energy["steady"]["sources"] if s["method"].startswith("GPU board (NVML energy"))
    assert source["resets"] == 1 and 0.95 <= source["coverage"] < 1.0
    assert "reset" in next(r for r in build_report([run], ReportSettings()).sections if r.key == "energy"
                           ).tables[0].rows[0][1]  # fmt: skip


def test_rapl_missing_for_most_of_the_run_is_not_measured_not_smaller() -> None:
    cpu = reference_cpu()
    times = cpu.telemetry["time_unix"].to_numpy()
    steady_start, steady_end = CPU_TRAIN_START + 18, CPU_TRAIN_START + 68
    partial = cpu.telemetry["cpu_energy_j"].where(times <= CPU_TRAIN_START + 38)  # RAPL gone after 40 %
    cpu = replace(cpu, telemetry=cpu.telemetry.assign(cpu_energy_j=partial))
    headline, data = report_json([cpu, reference_gpu()])
    run = by_id(data)["ref-cpu"]
    assert run["energy_j_per_1k_examples"] is None  # not 16,000 J (20 s of energy over a 50 s window)
    assert run["energy_coverage"] == pytest.approx(20 / (steady_end - steady_start), abs=0.03)
    assert "energy not measured (CPU package (RAPL) covers 40% of the run)" in headline[0]
    # with a TDP the estimate covers the run: a figure again, marked ESTIMATE in the same line
    headline, data = report_json([cpu, reference_gpu()], Prices(cpu_tdp_w=100.0))
    assert by_id(data)["ref-cpu"]["energy_j_per_1k_examples"] == pytest.approx(100 * (0.3 + 0.7 * 0.9) * 1000)
    assert "ESTIMATE" in headline[0]


def test_a_gpu_run_without_rapl_says_gpu_board_only_in_the_headline() -> None:
    gpu = reference_gpu()
    gpu = replace(gpu, telemetry=gpu.telemetry.drop(columns=["cpu_energy_j"]))
    headline, data = report_json([reference_cpu(), gpu])
    assert data["runs"][1]["energy_j_per_1k_examples"] == pytest.approx(15_000.0)
    assert data["runs"][1]["energy_complete"] is False
    assert "15,000 J (GPU board only: CPU not measured)" in headline[1]


def test_counter_and_power_that_disagree_are_flagged_in_the_headline() -> None:
    run = fine_gpu()
    run = replace(run, telemetry=run.telemetry.assign(gpu0_power_w=200.0))  # the counter says 300 W
    headline, data = report_json([reference_cpu(), run])
    assert (
        "energy doubtful: gpu0 energy counter (300.0 W) and integrated power (200.0 W) differ by 33%"
        in (headline[1])
    )
    assert any("differ by 33%" in w for w in data["warnings"])
    (option,) = data["decision"]["options"]  # the Decision's figure carries the same doubt
    assert (
        "J (doubtful: gpu0 energy counter (300.0 W) and integrated power (200.0 W) differ by 33%)"
        in (option["line"])
    )
    agreeing, data = report_json([reference_cpu(), fine_gpu()])
    assert "doubtful" not in agreeing[1]
    assert "doubtful" not in data["decision"]["options"][0]["line"]


def test_a_counter_that_only_goes_down_never_gives_negative_joules() -> None:
    run = fine_gpu()
    run = replace(run, telemetry=run.telemetry.assign(gpu0_energy_j=1e6 - run.telemetry["gpu0_energy_j"],
                                                      gpu0_power_w=np.nan))  # fmt: skip
    _, data = report_json([reference_cpu(), run])
    gpu = by_id(data)["fine-gpu"]
    assert gpu["energy_j_per_1k_examples"] is None and gpu["energy_resets"] > 0


def _raw_rows(path: Path) -> list[dict[str, float]]:
    with path.open(encoding="utf-8") as handle:
        return [
            {k: float(v) if v else float("nan") for k, v in row.items()} for row in csv.DictReader(handle)
        ]


def test_gpu_energy_matches_the_raw_files_whatever_the_interpolation(tmp_path: Path) -> None:
    """A GPU drawing a ramp (200 → 400 W) with a counter reset: J per 1,000 examples from the raw CSV
    text (counter steps between rows inside the steady window, over the time they span), not from
    sizing's own integration, agrees within 1 %."""
    run = fine_gpu("raw-gpu")
    elapsed = run.telemetry["elapsed_s"].to_numpy()
    watts = 200.0 + 4.0 * elapsed
    energy = 200.0 * elapsed + 2.0 * elapsed**2
    energy = np.where(elapsed < 35.0, energy, energy - energy[elapsed >= 35.0][0] + 5.0)  # a reload
    run = replace(run, telemetry=run.telemetry.assign(gpu0_power_w=watts, gpu0_energy_j=energy))
    run_dir = write_run(tmp_path / "runs", run)
    out = tmp_path / "r.json"
    assert sizing_main(["raw-gpu", "--data-dir", str(tmp_path), "--out", str(out)]) == 0
    reported = json.loads(out.read_text(encoding="utf-8"))["runs"][0]["energy_j_per_1k_examples"]

    steps = _raw_rows(run_dir / "training.csv")
    first, last = steps[19], steps[-1]  # warm-up 20 steps, as training.json states
    examples_per_s = (last["step"] - first["step"]) * 2 / (last["time_unix"] - first["time_unix"])
    rows = [r for r in _raw_rows(run_dir / "telemetry.csv") if STEADY[0] <= r["time_unix"] <= STEADY[1]]
    mean_w = 0.0
    for column in ("gpu0_energy_j", "cpu_energy_j"):  # each counter's mean power over its valid steps
        pairs = list(itertools.pairwise(rows))
        valid = [(a, b) for a, b in pairs if b[column] >= a[column]]
        joules = sum(b[column] - a[column] for a, b in valid)
        mean_w += joules / sum(b["time_unix"] - a["time_unix"] for a, b in valid)
    gpu_and_cpu_w = mean_w
    assert reported == pytest.approx(gpu_and_cpu_w * 1000 / examples_per_s, rel=0.01)


def test_a_stuck_counter_is_not_zero_watts_and_power_takes_over() -> None:
    run = fine_gpu()
    run = replace(run, telemetry=run.telemetry.assign(gpu0_energy_j=12_345.0))  # never advances
    headline, data = report_json([reference_cpu(), run])
    assert data["runs"][1]["energy_j_per_1k_examples"] == pytest.approx(17_500.0, rel=1e-3)  # from power
    assert data["runs"][1]["energy_covers"].startswith("GPU board (integrated NVML average power)")
    assert any("reads 0.0 W (stuck or not supported): ignored" in w for w in data["warnings"])
    assert "doubtful" not in headline[1]
    alone = replace(run, telemetry=run.telemetry.assign(gpu0_power_w=np.nan))
    headline, data = report_json([reference_cpu(), alone])
    assert data["runs"][1]["energy_j_per_1k_examples"] is None  # not 2,500 J of RAPL alone, not 0 W
    assert NOT_REPORTED in headline[1]
