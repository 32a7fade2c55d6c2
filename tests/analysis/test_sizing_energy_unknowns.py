"""Energy attribution on multi-GPU hosts, what each energy figure covers, and honest unknowns."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from sizingfixtures import GPU_TRAIN_START, meta, reference_cpu, reference_gpu, telemetry_frame, with_info

from sizing import ReportSettings, RunData, build_report, to_json
from sizing.analysis.run import analyse_run
from sizing.analysis.throughput import FROM_TOTALS, NO_WORK_COUNTER
from sizing.model import Prices, Thresholds
from sizing.output.render import render_markdown


def four_gpu_host(busy_index: int, uuids: list[str] | None) -> RunData:
    """The reference GPU run on a 4-GPU host: GPU `busy_index` trains (300 W), the others idle at 60 W."""
    run = reference_gpu("multi")
    samples = len(run.telemetry)
    telemetry = run.telemetry.drop(columns=[c for c in run.telemetry if c.startswith("gpu0_")])
    for index in range(4):
        watts = 300.0 if index == busy_index else 60.0
        busy = np.where(np.arange(samples) < 5, 0.0, 95.0)  # idle before the train phase (S−5 … S−1)
        telemetry[f"gpu{index}_util_pct"] = busy if index == busy_index else 0.0
        telemetry[f"gpu{index}_power_w"] = watts
        telemetry[f"gpu{index}_energy_j"] = watts * np.arange(samples)
    run = replace(run, telemetry=telemetry, meta=meta("multi", "gpu", GPU_TRAIN_START - 5, gpus=4))
    return with_info(run, gpu_uuids=uuids)


def test_only_the_gpu_the_training_used_is_charged() -> None:
    result = analyse_run(four_gpu_host(2, ["GPU-2"]), Prices(), Thresholds())
    assert result.charged_gpus == (2,)
    assert result.j_per_1k_examples == pytest.approx(17_500.0)  # (300 + 50) W at 20 examples/s
    assert dict(result.steady_energy.idle_gpus_w) == {0: pytest.approx(60.0), 1: pytest.approx(60.0),
                                                       3: pytest.approx(60.0)}  # fmt: skip
    assert result.verdict.numbers["gpu_util_pct"] == pytest.approx(95.0)


def test_without_uuids_the_gpus_that_did_work_are_charged_and_said() -> None:
    result = analyse_run(four_gpu_host(2, None), Prices(), Thresholds())
    assert result.charged_gpus == (2,)
    assert result.j_per_1k_examples == pytest.approx((300 + 50) * 1000 / 20)
    assert any("the 1 of 4 GPUs that did work (gpu0, gpu1, gpu3 under 1 % busy" in w for w in result.warnings)


def test_energy_says_what_it_covers_and_marks_estimates() -> None:
    gpu = analyse_run(reference_gpu(), Prices(), Thresholds())
    assert gpu.steady_energy.covers == "GPU board (NVML energy counter) + CPU package (RAPL)"
    cpu = reference_cpu()
    no_rapl = replace(cpu, telemetry=cpu.telemetry.drop(columns=["cpu_energy_j"]))
    estimated = analyse_run(no_rapl, Prices(cpu_tdp_by_host=(("craftbox", 100.0),)), Thresholds())
    assert estimated.energy_is_estimate
    assert estimated.j_per_1k_examples == pytest.approx(100 * (0.3 + 0.7 * 0.9) * 1000 / 1.0)
    report = build_report(
        [no_rapl, reference_gpu()], ReportSettings(Prices(cpu_tdp_w=100.0, gpu_price=2000.0))
    )
    assert "ESTIMATE" in report.headline[0]  # the baseline's energy is an estimate
    assert "ESTIMATE" in report.headline[1]  # and so is the break-even that uses it
    comparison = next(s for s in report.sections if s.key == "comparison").tables[0]
    assert "(ESTIMATE)" in comparison.rows[0][comparison.headers.index("J per 1,000 examples")]
    assert to_json(report)["runs"][0]["energy_is_estimate"] is True


def test_one_cpu_run_without_prices_is_never_zero_dollars() -> None:
    cpu = reference_cpu()
    no_rapl = replace(cpu, telemetry=cpu.telemetry.drop(columns=["cpu_energy_j"]))
    text = render_markdown(build_report([no_rapl], ReportSettings()))
    assert "$0.00" not in text and "$0 " not in text
    assert "no price given" in text and "not measured" in text
    data = to_json(build_report([no_rapl], ReportSettings()))
    assert data["runs"][0]["energy_j_per_1k_examples"] is None


def test_no_step_log_uses_training_json_totals() -> None:
    run = replace(reference_cpu(), training=pd.DataFrame())
    run = with_info(
        run, steady_steps_per_s=0.5, end_unix=run.training_info["start_unix"] + 68.0, first_step_s=10.0
    )
    result = analyse_run(run, Prices(), Thresholds())
    assert result.throughput.source == FROM_TOTALS
    assert result.throughput.examples_per_s == pytest.approx(1.0)
    assert result.j_per_1k_examples == pytest.approx(40_000.0)  # window S+10..S+68 from the totals
    text = render_markdown(build_report([run], ReportSettings()))
    assert "from totals" in text


def test_a_foreign_recording_still_gets_utilization_thermal_and_verdict() -> None:
    """Another tool's run: only CPU util/temp, memory, disk util and GPU temp; no run.json, no training."""
    telemetry = telemetry_frame(
        1_800_000_000.0, 60, cpu_util_pct=97.0, cpu_temp_c=np.linspace(60, 92, 60), mem_used_bytes=1e9,
        disk_util_pct=5.0, gpu0_temp_c=70.0,
    )  # fmt: skip
    run = RunData("foreign", {}, {}, {}, telemetry, pd.DataFrame(), pd.DataFrame())
    report = build_report([run], ReportSettings())
    result = report.analyses[0]
    assert result.throughput.source == NO_WORK_COUNTER
    assert result.verdict.primary == "CPU-bound"
    assert {t.sensor: t.peak_c for t in result.thermal} == {"cpu": 92.0, "gpu0": 70.0}
    text = render_markdown(report)
    assert NO_WORK_COUNTER in text and "| foreign | cpu | 92.0 |" in text
    assert to_json(report)["runs"][0]["examples_per_s"] is None


def test_measured_energy_without_examples_is_unknown_per_example_not_unmeasured() -> None:
    """A GPU run recorded without its step log or training record (telemetry only): its board's energy
    was measured, there is just nothing to divide it by; and no price would give a break-even."""
    telemetry_only = replace(reference_gpu(), training=pd.DataFrame(), training_info={})
    report = build_report([reference_cpu(), telemetry_only], ReportSettings())
    (line,) = [o.line for o in report.decision.options]
    assert "speedup unknown; energy unknown and cost unknown per 1,000 examples" in line
    assert "break-even not computed (speedup unknown)" in line and "--gpu-price" not in line
    assert "energy unknown (no work counter: examples/s unknown)" in render_markdown(report)
    assert "energy not measured" not in line
