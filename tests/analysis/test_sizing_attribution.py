"""Multi-GPU attribution everywhere (issue 18, item 6) and one model under training and serving (item 8)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from energyfixtures import multi_gpu, serving_cell, write_serving_run
from sizingfixtures import GPU_TRAIN_START, reference_cpu, reference_gpu, telemetry_frame, with_info

from sizing import Prices, ReportSettings, build_report, to_json
from sizing.analysis.load import load_run_dir
from sizing.analysis.run import analyse_run
from sizing.cli import main as sizing_main
from sizing.model import Thresholds

UNSAID = "the run does not say which GPUs trained"


def test_a_run_that_does_not_say_which_gpus_trained_is_warned_in_the_headline() -> None:
    """Every GPU busy: every GPU charged; some idle: the ones that did work (idle neighbours were charged,
    priced and named too: a 1-GPU job on a 4-GPU host read '4 × ...')."""
    run = multi_gpu("multi", [90.0, 92.0, 95.0, 93.0], [300.0, 300.0, 300.0, 300.0], None)
    report = build_report([reference_cpu(), run], ReportSettings(Prices(gpu_price=2000.0, cpu_price=1000.0)))
    assert f"energy and price charged for all 4 GPUs: {UNSAID}" in report.headline[1]
    data = to_json(report)
    assert data["runs"][1]["hardware_price_usd"] == 1000.0 + 4 * 2000.0  # --gpu-price USD is each GPU
    assert data["runs"][1]["gpu_attribution_known"] is False
    assert data["runs"][1]["charged_gpus"] == [0, 1, 2, 3]
    run = multi_gpu("multi", [0.0, 0.0, 95.0, 0.0], [60.0, 60.0, 300.0, 60.0], None)
    report = build_report([reference_cpu(), run], ReportSettings(Prices(gpu_price=2000.0, cpu_price=1000.0)))
    assert f"energy and price charged for the 1 of 4 GPUs that did work: {UNSAID}" in report.headline[1]
    data = to_json(report)
    assert data["runs"][1]["hardware_price_usd"] == 1000.0 + 2000.0
    assert data["runs"][1]["gpu_attribution_known"] is False and data["runs"][1]["charged_gpus"] == [2]
    named = build_report([reference_cpu(), with_info(run, gpu_uuids=["GPU-2"])], ReportSettings())
    assert UNSAID not in named.headline[1]
    assert to_json(named)["runs"][1]["charged_gpus"] == [2]


def test_gpu_columns_without_a_gpu_list_in_run_json_are_warned_too() -> None:
    run = multi_gpu("bare", [95.0, 95.0], [300.0, 300.0], None)
    run = replace(run, meta={**run.meta, "system": {**run.meta["system"], "gpus": []}})
    report = build_report([reference_cpu(), run], ReportSettings())
    assert f"charged for all 2 GPU columns: {UNSAID}" in report.headline[1]


def test_the_least_busy_gpu_limits_data_parallel_training() -> None:
    run = multi_gpu("ddp", [95.0, 40.0], [300.0, 150.0], ["GPU-0", "GPU-1"])
    result = analyse_run(run, Prices(), Thresholds())
    assert result.verdict.numbers["gpu_util_pct"] == pytest.approx(40.0)
    assert result.verdict.primary != "GPU-bound"  # one GPU waits on the other more than half the time
    balanced = analyse_run(multi_gpu("even", [95.0, 92.0], [300.0, 290.0], ["GPU-0", "GPU-1"]), Prices(),
                           Thresholds())  # fmt: skip
    assert balanced.verdict.primary == "GPU-bound"


def test_idle_neighbours_of_an_unattributed_run_do_not_read_as_underused() -> None:
    run = multi_gpu("multi", [0.0, 0.0, 95.0, 0.0], [60.0, 60.0, 300.0, 60.0], None)
    assert analyse_run(run, Prices(), Thresholds()).verdict.primary == "GPU-bound"


def test_an_idle_neighbour_of_an_unattributed_run_is_no_straggler() -> None:
    run = multi_gpu("pair", [95.0, 0.0], [300.0, 60.0], None)  # a one-GPU job on a two-GPU host
    result = analyse_run(run, Prices(), Thresholds())
    assert result.verdict.primary == "GPU-bound"
    assert not any("straggler" in label for label in result.verdict.labels)
    named = analyse_run(with_info(run, gpu_uuids=["GPU-0", "GPU-1"]), Prices(), Thresholds())
    assert named.verdict.primary == "straggler: gpu1"  # both said to train: the idle one holds the job


def _two_gpu_serving_run(tmp_path: Path, uuids: list[str]) -> Path:
    """Serving on gpu1 (300 W) of a 2-GPU host whose gpu0 idles at 60 W; RAPL 50 W; 400 images/s."""
    run = multi_gpu("serve", [0.0, 95.0], [60.0, 300.0], uuids)
    return write_serving_run(
        tmp_path / "runs", run, "gpu", [serving_cell(8, 400.0, GPU_TRAIN_START + 41, GPU_TRAIN_START + 43)]
    )


def test_serving_charges_the_gpus_the_training_used(tmp_path: Path) -> None:
    _two_gpu_serving_run(tmp_path, ["GPU-1"])
    out = tmp_path / "r.json"
    assert sizing_main(["serve", "--data-dir", str(tmp_path), "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text(encoding="utf-8"))["sections"]["serving"]["rows"]
    # (300 W of gpu1 + 50 W RAPL) × 2 s / 800 images; not the idle gpu0's 60 W as well
    assert row["joules_per_1000_images"] == pytest.approx(875.0)
    assert row["energy_method"] == "GPU board (NVML energy counter) + CPU package (RAPL)"


def test_serving_without_attribution_charges_the_gpu_that_worked_and_says_so(tmp_path: Path) -> None:
    """Training's rule: gpu0 idled through the cell, so only gpu1 is charged; the row says the run does not
    name it."""
    _two_gpu_serving_run(tmp_path, [])
    report = build_report([load_run_dir(tmp_path / "runs" / "serve")], ReportSettings())
    (row,) = to_json(report)["sections"]["serving"]["rows"]
    assert row["joules_per_1000_images"] == pytest.approx((300.0 + 50.0) * 2 / 800 * 1000)
    assert row["energy_method"].endswith(
        "charged for the 1 of 2 GPUs that did work: the run does not say which GPUs it used"
    )


def test_serving_reads_the_loaded_telemetry_of_a_run_without_time_unix(tmp_path: Path) -> None:
    """Another tool's telemetry with elapsed_s only: sizing.analysis.load places it at run.json's start_unix;
    serving must use that same telemetry, not a second reader that finds no time column."""
    cpu = reference_cpu("elapsed-only")
    start = cpu.meta["start_unix"]
    telemetry = telemetry_frame(start, 81, cpu_util_pct=90.0, cpu_energy_j=40.0 * np.arange(81),
                                proc_cpu_pct=200.0).drop(columns=["time_unix"])  # fmt: skip
    run_dir = write_serving_run(tmp_path / "runs", replace(cpu, telemetry=telemetry), "cpu",
                                [serving_cell(4, 5.0, start + 2, start + 6)])  # fmt: skip
    assert "time_unix" not in (run_dir / "telemetry.csv").read_text().splitlines()[0]
    out = tmp_path / "r.json"
    assert sizing_main(["elapsed-only", "--data-dir", str(tmp_path), "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text(encoding="utf-8"))["sections"]["serving"]["rows"]
    assert row["joules_per_1000_images"] == pytest.approx(40.0 * 4 / 20 * 1000)  # 40 W × 4 s / 20 images
    assert row["cpu_cores_used"] == pytest.approx(2.0)


def test_serving_estimate_and_prices_follow_the_training_model(tmp_path: Path) -> None:
    cpu = reference_cpu("est")
    start = cpu.meta["start_unix"]
    no_rapl = replace(cpu, telemetry=cpu.telemetry.drop(columns=["cpu_energy_j"]).assign(proc_cpu_pct=100.0))
    write_serving_run(tmp_path / "runs", no_rapl, "cpu", [serving_cell(4, 5.0, start + 10, start + 14)])
    prices = Prices(cpu_tdp_w=100.0, idle_fraction=0.2, cpu_price=1000.0, utilisation=0.5)
    report = build_report([load_run_dir(tmp_path / "runs" / "est")], ReportSettings(prices))
    (row,) = to_json(report)["sections"]["serving"]["rows"]
    watts = 100.0 * (0.2 + 0.8 * 0.9)  # the same idle floor as the training's estimate
    assert row["joules_per_1000_images"] == pytest.approx(watts * 4 / 20 * 1000)
    assert row["energy_is_estimate"] is True
    hardware = 1000.0 / (3 * 8760 * 0.5 * 3600) * 1e6 / 5.0  # the same year, life and utilisation
    energy = watts * 4 / 20 * 1e6 / 3.6e6 * 0.15
    assert row["usd_per_million_images"] == pytest.approx(hardware + energy)


def test_cpu_cores_one_gpu_replaces_is_marked_when_not_like_for_like(tmp_path: Path) -> None:
    cpu = with_info(reference_cpu("cpu-serve"), batch_size=2)
    start = cpu.meta["start_unix"]
    cpu = replace(cpu, telemetry=cpu.telemetry.assign(proc_cpu_pct=200.0))
    write_serving_run(tmp_path / "runs", cpu, "cpu", [serving_cell(4, 5.0, start + 2, start + 6)])
    gpu = with_info(reference_gpu("gpu-serve"), batch_size=8)
    write_serving_run(tmp_path / "runs", gpu, "gpu",
                      [serving_cell(8, 100.0, GPU_TRAIN_START + 41, GPU_TRAIN_START + 43)])  # fmt: skip
    out = tmp_path / "r.json"
    assert sizing_main(["cpu-serve", "gpu-serve", "--data-dir", str(tmp_path), "--out", str(out)]) == 0
    serving = json.loads(out.read_text(encoding="utf-8"))["sections"]["serving"]
    assert serving["cpu_cores_replaced"] == pytest.approx(40.0)
    assert serving["cpu_cores_note"].startswith("NOT like-for-like (batch_size 8 vs 2)")


@pytest.mark.parametrize(
    ("uuids", "warned"),
    [(["GPU-elsewhere"], True), (["GPU-0"], False), (["MIG-0c3f"], False), ([], False)],
)
def test_uuids_that_name_no_recorded_gpu_say_the_gpu_measured_may_not_be_the_one_that_trained(
    uuids: list[str], warned: bool
) -> None:
    """reference_gpu's one GPU is GPU-0: a training that names another trained on a GPU the collector did
    not see (another node, another container's view), so the one measured may not be its own. A MIG
    slice's UUID names no board (gpu_state says so), and no UUID at all is a single GPU host's own."""
    report = build_report([reference_cpu(), with_info(reference_gpu(), gpu_uuids=uuids)], ReportSettings())
    said = (
        "ref-gpu: training.json gpu_uuids (GPU-elsewhere) name no GPU the collector recorded: the GPU "
        "measured (the host's only GPU) may not be the one that trained"
    )
    assert (said in report.warnings) is warned
    assert any(c.startswith(said) for c in report.decision.caveats) is warned
    assert to_json(report)["runs"][1]["gpu_attribution_known"] is not warned
