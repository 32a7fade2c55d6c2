"""Imported nvidia-smi traces through the sizing report: which energy source, and GPU verdicts that read
power and clocks (at the power limit, busy but not computing, straggler), each with its numbers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from nvsmifixtures import BASIC_FIELDS, FULL_FIELDS, Gpu, capped, four_gpus, query_gpu_log, stalled

from collect.importers import nvsmi
from sizing import Prices, ReportSettings, Thresholds, build_report, load_run_dir, to_json
from sizing.analysis import bottleneck as b
from sizing.analysis import gpu_verdicts as gv
from sizing.analysis.run import RunAnalysis, analyse_run


def analysed(tmp_path: Path, text: str, *args: str) -> RunAnalysis:
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "gpu.csv"
    log.write_text(text, encoding="utf-8")
    assert (
        nvsmi.run_cli([str(log), "--data-dir", str(tmp_path / "data"), "--utc-offset", "+00:00", *args]) == 0
    )
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    return analyse_run(load_run_dir(run_dir), Prices(), Thresholds())


def test_a_healthy_trace_is_gpu_bound_and_nothing_more(tmp_path: Path) -> None:
    result = analysed(tmp_path, query_gpu_log([Gpu()], samples=60))
    assert result.verdict.labels == (b.GPU_BOUND,)


def test_a_cap_limited_trace_is_at_its_power_limit_not_thermally_throttled(tmp_path: Path) -> None:
    result = analysed(tmp_path, query_gpu_log([capped()], samples=60))
    v = result.verdict
    assert v.labels == (b.GPU_BOUND, gv.POWER_LIMITED) and b.THERMALLY_THROTTLED not in v.labels
    (why,) = [e for e in v.evidence if "at its power limit" in e]
    assert "gpu0 at its power limit in 100% of samples" in why and "peak 77 °C" in why
    assert "SM clock 1425 MHz" in why and "1980 MHz max" in why and "not thermally throttled" in why
    assert v.numbers["gpu0 power-limited fraction"] == 1.0
    assert v.numbers["gpu0 power-limited mean power w"] == pytest.approx(697.0, abs=0.1)


def test_power_within_five_percent_with_a_low_clock_counts_without_the_bit(tmp_path: Path) -> None:
    fields = [
        "timestamp",
        "utilization.gpu",
        "power.draw",
        "enforced.power.limit",
        "clocks.sm",
        "clocks.max.sm",
    ]
    held = analysed(tmp_path / "held", query_gpu_log([capped()], fields, samples=40))
    assert gv.POWER_LIMITED in held.verdict.labels
    assert any("0 with the SW power cap bit" not in e and "40 within 5% of the limit" in e
               for e in held.verdict.evidence)  # fmt: skip
    boosting = replace(capped(), sm_mhz=lambda k: 1980.0)  # at the limit but at full clock: not held back
    free = analysed(tmp_path / "free", query_gpu_log([boosting], fields, samples=40))
    assert gv.POWER_LIMITED not in free.verdict.labels


def test_a_stalled_collective_trace_is_busy_but_not_computing(tmp_path: Path) -> None:
    result = analysed(tmp_path, query_gpu_log([stalled(0), stalled(1)], samples=60))
    v = result.verdict
    assert v.primary == gv.BUSY_NOT_COMPUTING and b.GPU_BOUND not in v.labels
    (why, *_) = [e for e in v.evidence if "not computing" in e]
    assert "gpu0 mean util 100.0 % ≥ 80 % at a mean 97 W, 14% of its 700 W limit" in why
    assert v.numbers["gpu0 power of limit fraction"] == pytest.approx(97.0 / 700.0)


def test_a_straggler_is_named_with_its_numbers(tmp_path: Path) -> None:
    result = analysed(
        tmp_path, query_gpu_log(four_gpus(straggler=2), BASIC_FIELDS, samples=40), "--gpus", "4"
    )
    v = result.verdict
    assert v.primary == "straggler: gpu2"
    (why,) = [e for e in v.evidence if "straggler" in e or "wait for it" in e]
    assert why.startswith("gpu2 mean util 23.0 %") and "gpu0 97 %, gpu1 97 %, gpu3 97 %" in why
    assert result.gpu_attribution == "all 4 GPUs: which trained is not recorded (imported log)"
    assert any("which trained is not recorded" in w for w in result.warnings)
    even = analysed(tmp_path / "even", query_gpu_log(four_gpus(), BASIC_FIELDS, samples=40), "--gpus", "4")
    assert not any(label.startswith("straggler") for label in even.verdict.labels)


def test_energy_comes_from_instant_power_marked_estimate_at_one_second(tmp_path: Path) -> None:
    result = analysed(tmp_path, query_gpu_log([Gpu()], FULL_FIELDS, samples=30))
    energy = result.training_energy
    assert energy is not None and energy.gpu_covers == (
        "ESTIMATE: GPU board (integrated NVML instant power), readings 1 s apart"
    )
    assert result.energy_is_estimate
    report = to_json(
        build_report([load_run_dir(next((tmp_path / "data" / "runs").iterdir()))], ReportSettings())
    )
    assert report["runs"][0]["energy_covers"].startswith(
        "ESTIMATE: GPU board (integrated NVML instant power)"
    )


def test_energy_from_a_10_ms_log_of_average_power_is_no_estimate(tmp_path: Path) -> None:
    result = analysed(tmp_path, query_gpu_log([Gpu()], BASIC_FIELDS, samples=400, interval_s=0.01))
    assert result.training_energy is not None
    assert result.training_energy.gpu_covers == "GPU board (integrated NVML average power)"
    assert not result.energy_is_estimate
    joules = result.training_energy.gpu_j
    assert joules is not None and 500 * 3.9 < joules < 550 * 4.0
