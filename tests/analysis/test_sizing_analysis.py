"""dashboard.analysis on crafted DataFrames: every figure against a hand computation, every verdict rule."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sizingfixtures import (
    CPU_TRAIN_START,
    reference_cpu,
    reference_gpu,
    telemetry_frame,
    training_frame,
    training_info,
)

from dashboard import analysis as a
from dashboard.analysis import Prices, RunData, Thresholds, ThrottleSummary

PRICES = Prices(
    tariff_per_kwh=0.15, cpu_price=1000.0, gpu_price=2000.0, amortise_years=3.0, value_per_hour=10.0
)


@pytest.fixture(scope="module")
def cpu() -> a.RunAnalysis:
    return a.analyse_run(reference_cpu(), PRICES, Thresholds())


@pytest.fixture(scope="module")
def gpu() -> a.RunAnalysis:
    return a.analyse_run(reference_gpu(), PRICES, Thresholds())


# --- warm-up and throughput ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "info", "expected"),
    [
        (1000, {}, 20),  # 20 steps from 60 steps on
        (60, {}, 20),
        (59, {}, 19),  # a third of a short run
        (50, {}, 16),
        (2, {}, 1),  # never less than the first step
        (1, {}, 0),  # nothing to exclude from a single step
        (100, {"warmup_steps_excluded": 7}, 7),  # training.json wins
        (100, {"warmup_steps_excluded": 0}, 1),  # the traced first step is always out
        (10, {"warmup_steps_excluded": 20}, 9),  # leaves one steady step
    ],
)
def test_warmup_rule(steps: int, info: dict, expected: int) -> None:
    assert a.warmup_steps(steps, info) == expected


def test_steady_throughput_by_hand(cpu: a.RunAnalysis, gpu: a.RunAnalysis) -> None:
    # CPU: rows 5..30 end at S+18 and S+68: 25 steps in 50 s.
    t = cpu.throughput
    assert (t.steps_total, t.warmup_steps, t.steady_steps) == (30, 5, 25)
    assert t.steady_start_unix == pytest.approx(CPU_TRAIN_START + 18)
    assert t.steady_end_unix == pytest.approx(CPU_TRAIN_START + 68)
    assert t.steps_per_s == pytest.approx(0.5)
    assert t.examples_per_s == pytest.approx(1.0)
    assert t.first_step_s == pytest.approx(10.0)
    # budget 60 s: step k ends at 10 + 2(k−1) ≤ 60 → k ≤ 26
    assert (t.budget_s, t.steps_in_budget) == (60.0, 26)
    # GPU: rows 20..200, 180 steps in 18 s.
    assert gpu.throughput.steps_per_s == pytest.approx(10.0)
    assert gpu.throughput.examples_per_s == pytest.approx(20.0)
    assert gpu.throughput.steps_in_budget is None


def test_throughput_without_training_json_uses_default_warmup_and_derived_batch() -> None:
    # 50 steps of 1 s after a 5 s first step; no training.json: warm-up = a third of 50 = 16 steps.
    frame = training_frame(100.0, [5.0] + [1.0] * 49, [1.0] * 50, batch_size=4)
    t = a.throughput(frame, {})
    assert t.warmup_steps == 16
    assert t.steady_steps == 34
    assert t.steps_per_s == pytest.approx(1.0)
    assert t.batch_size == 4.0
    assert t.examples_per_s == pytest.approx(4.0)


def test_throughput_of_a_single_step_has_no_rate() -> None:
    t = a.throughput(training_frame(0.0, [3.0], [1.0]), {})
    assert (t.steps_total, t.steps_per_s, t.examples_per_s) == (1, None, None)


def test_speedup_is_a_ratio_of_examples_per_second(cpu: a.RunAnalysis, gpu: a.RunAnalysis) -> None:
    assert a.speedup(gpu.throughput.examples_per_s, cpu.throughput.examples_per_s) == pytest.approx(20.0)
    assert a.speedup(None, 1.0) is None


def test_repeats_give_mean_and_sample_spread() -> None:
    s = a.spread([1.0, 2.0, 3.0, None])
    assert (s.mean, s.minimum, s.maximum, s.count) == (2.0, 1.0, 3.0, 3)
    assert s.std == pytest.approx(1.0)  # sqrt(((1-2)² + 0 + (3-2)²) / (3-1))
    assert a.spread([5.0]).std is None
    assert a.spread([None]).mean is None


def test_compare_averages_repeats_before_the_speedup() -> None:
    fast = reference_cpu("cpu-fast")
    slow_training = training_frame(CPU_TRAIN_START, [10.0] + [4.0] * 29, [1.0] * 30)  # 0.25 steps/s
    slow = RunData("cpu-slow", fast.meta, fast.training_info, {}, fast.telemetry, slow_training, fast.phases)
    runs = [a.analyse_run(r, PRICES, Thresholds()) for r in (fast, slow, reference_gpu())]
    groups = a.compare(runs, PRICES)
    assert [g.run_ids for g in groups] == [("cpu-fast", "cpu-slow"), ("ref-gpu",)]
    assert groups[0].examples_per_s.mean == pytest.approx(0.75)  # (1.0 + 0.5) / 2
    assert groups[0].examples_per_s.std == pytest.approx(math.sqrt(0.125))
    assert groups[1].speedup == pytest.approx(20.0 / 0.75)


# --- time to N steps, time to a loss --------------------------------------------------------------------


def test_time_to_steps_measured_and_projected() -> None:
    gpu = reference_gpu()
    # step 100 ends at 20 + 99 × 0.1 = 29.9 s
    reached = a.time_to_steps(gpu.training, gpu.training_info, 100, 10.0)
    assert (reached.seconds, reached.projected) == (pytest.approx(29.9), False)
    # step 1000: 39.9 s for 200 steps, then 800 more at 10 steps/s
    projected = a.time_to_steps(gpu.training, gpu.training_info, 1000, 10.0)
    assert (projected.seconds, projected.projected) == (pytest.approx(119.9), True)
    cpu = reference_cpu()
    assert a.time_to_steps(cpu.training, cpu.training_info, 1000, 0.5).seconds == pytest.approx(
        68 + 970 / 0.5
    )
    assert a.time_to_steps(cpu.training, cpu.training_info, 1000, None).seconds is None


def test_time_to_loss_uses_the_trailing_mean() -> None:
    # CPU loss 4 − 0.1k: trailing 20-step mean 4 − 0.1(k − 9.5) ≤ 2.0 first at k = 30 (1.95), at 68 s.
    cpu = reference_cpu()
    hit = a.time_to_loss(cpu.training, cpu.training_info, 2.0)
    assert (hit.seconds, hit.step) == (pytest.approx(68.0), 30)
    # GPU loss 4 − 0.02k: mean ≤ 2.0 first at k = 110, which ends at 20 + 109 × 0.1 = 30.9 s.
    gpu = reference_gpu()
    hit = a.time_to_loss(gpu.training, gpu.training_info, 2.0)
    assert (hit.seconds, hit.step) == (pytest.approx(30.9), 110)
    assert a.time_to_loss(cpu.training, cpu.training_info, 1.0).seconds is None


def test_common_target_loss_is_the_highest_minimum(cpu: a.RunAnalysis, gpu: a.RunAnalysis) -> None:
    assert cpu.min_smoothed_loss == pytest.approx(1.95)  # 4 − 0.1 × 20.5
    assert gpu.min_smoothed_loss == pytest.approx(0.19)  # 4 − 0.02 × 190.5
    assert a.common_target_loss([cpu.min_smoothed_loss, gpu.min_smoothed_loss, None]) == cpu.min_smoothed_loss


def test_short_runs_smooth_over_the_whole_run() -> None:
    frame = training_frame(0.0, [1.0] * 4, [4.0, 2.0, 3.0, 1.0])
    assert a.smoothed_loss(frame).iloc[-1] == pytest.approx(2.5)
    assert a.min_smoothed_loss(frame) == pytest.approx(2.5)


# --- energy and cost --------------------------------------------------------------------------------------


def test_counter_and_integrated_energy_by_hand() -> None:
    times = np.array([0.0, 1.0, 2.0, 3.0])
    assert a.counter_energy_j(times, np.array([0.0, 10.0, 30.0, 60.0]), 0.5, 2.5) == pytest.approx(40.0)
    # power 10, 20, 30, 40 W: trapezoids 15 + 25 + 35; from 0.5 to 2.5 by interpolation of the integral
    power = np.array([10.0, 20.0, 30.0, 40.0])
    assert a.integrated_energy_j(times, power, 0.0, 3.0) == pytest.approx(75.0)
    assert a.integrated_energy_j(times, power, 0.5, 2.5) == pytest.approx((15 + 25 + 35 / 2) - 15 / 2)
    assert a.counter_energy_j(times[:1], power[:1], 0.0, 1.0) is None


def test_energy_per_1000_steps_by_hand(cpu: a.RunAnalysis, gpu: a.RunAnalysis) -> None:
    # CPU: RAPL 40 W; 1,000 steps take 2,000 s at 0.5 steps/s → 80,000 J
    assert cpu.steady_energy.cpu_method == "RAPL"
    assert cpu.steady_energy.window_s == pytest.approx(50.0)
    assert cpu.steady_energy.cpu_j == pytest.approx(2000.0)
    assert (cpu.cpu_j_per_1000_steps, cpu.gpu_j_per_1000_steps) == (pytest.approx(80_000.0), None)
    assert cpu.j_per_1000_steps == pytest.approx(80_000.0)
    # GPU: 300 W NVML + 50 W RAPL; 1,000 steps take 100 s
    assert gpu.steady_energy.gpu_method == "NVML energy counter"
    assert gpu.gpu_j_per_1000_steps == pytest.approx(30_000.0)
    assert gpu.cpu_j_per_1000_steps == pytest.approx(5_000.0)
    assert gpu.j_per_1000_steps == pytest.approx(35_000.0)
    # training window (train phase S..S+40): 40 s × 350 W
    assert gpu.training_energy.total_j == pytest.approx(14_000.0)


def test_gpu_energy_falls_back_to_integrated_power() -> None:
    run = reference_gpu()
    telemetry = run.telemetry.drop(columns=["gpu0_energy_j"])
    joules, method = a.gpu_energy_j(
        telemetry, run.telemetry["time_unix"].iloc[5], run.telemetry["time_unix"].iloc[15]
    )
    assert (joules, method) == (pytest.approx(3000.0), "integrated NVML power")


def test_cpu_energy_estimate_only_with_a_tdp_and_marked() -> None:
    telemetry = telemetry_frame(0.0, 11, cpu_util_pct=50.0)
    assert a.cpu_energy_j(telemetry, 0.0, 10.0, None) == (None, None)
    joules, method = a.cpu_energy_j(telemetry, 0.0, 10.0, 100.0)
    assert joules == pytest.approx(500.0)  # 100 W × 50 % × 10 s
    assert method.startswith("ESTIMATE")
    energy = a.energy_in(telemetry, (0.0, 10.0), 100.0)
    assert energy.cpu_is_estimate


def test_cost_per_1000_steps_by_hand(cpu: a.RunAnalysis, gpu: a.RunAnalysis) -> None:
    # CPU: 80,000 J = 0.02222 kWh × $0.15; $1,000 over 3 × 8,760 h, 1,000 steps = 0.5556 h
    assert cpu.cost_per_1000_steps.energy_usd == pytest.approx(80_000 / 3.6e6 * 0.15)
    assert cpu.cost_per_1000_steps.hardware_usd == pytest.approx(1000 / 26_280 * (2000 / 3600))
    assert cpu.cost_per_1000_steps.total_usd == pytest.approx(0.0033333 + 0.0211399, abs=1e-6)
    # GPU: 35,000 J; host + GPU = $3,000; 1,000 steps = 100 s
    assert gpu.cost_per_1000_steps.energy_usd == pytest.approx(35_000 / 3.6e6 * 0.15)
    assert gpu.cost_per_1000_steps.hardware_usd == pytest.approx(3000 / 26_280 * (100 / 3600))
    assert gpu.cost_per_1000_steps.total_usd == pytest.approx(0.0014583 + 0.0031710, abs=1e-6)


def test_prices_not_given_count_as_already_owned() -> None:
    cost = a.cost_per_1000_steps(None, 1.0, a.hardware_price("cpu", Prices()), Prices())
    assert (cost.energy_usd, cost.hardware_usd, cost.total_usd) == (None, 0.0, 0.0)
    assert a.hardware_price("gpu", Prices(gpu_price=500.0)) == 500.0
    assert a.hardware_price("cpu", Prices(gpu_price=500.0)) == 0.0


def test_break_even_by_hand(cpu: a.RunAnalysis, gpu: a.RunAnalysis) -> None:
    groups = a.compare([cpu, gpu], PRICES)
    gpu_group = groups[1]
    # 36,000 steps per GPU hour × ($0.0033333 − $0.0014583) per 1,000 steps = $0.0675
    assert gpu_group.energy_saving_per_gpu_hour == pytest.approx(36 * (0.15 / 3.6e6) * (80_000 - 35_000))
    # $2,000 / ((20 − 1) × $10 + $0.0675)
    assert gpu_group.break_even_gpu_hours == pytest.approx(2000 / (190 + 0.0675))
    assert groups[0].is_baseline and groups[0].break_even_gpu_hours is None


def test_break_even_edge_cases() -> None:
    assert a.break_even_hours(1.0, 2000.0, 10.0, 0.0) == math.inf
    assert a.break_even_hours(0.5, 2000.0, 10.0, None) == math.inf
    assert a.break_even_hours(3.0, None, 10.0, None) is None
    assert a.break_even_hours(3.0, 2000.0, None, None) is None
    assert a.break_even_hours(3.0, 2000.0, None, 4.0) == pytest.approx(500.0)


def test_bad_prices_are_reported() -> None:
    assert Prices(tariff_per_kwh=-0.1).problems() == ["tariff must be a number ≥ 0, got -0.1"]
    assert Prices(amortise_years=0).problems()
    assert Prices(tariff_per_kwh=float("nan")).problems()
    assert Prices(gpu_price=0.0).problems() == []


# --- thermal and throttling ---------------------------------------------------------------------------------


def test_thermal_by_hand(gpu: a.RunAnalysis, cpu: a.RunAnalysis) -> None:
    (gpu0,) = gpu.thermal
    assert (gpu0.sensor, gpu0.peak_c, gpu0.time_above_s) == ("gpu0", 85.0, pytest.approx(10.0))
    (cpu_sensor,) = cpu.thermal
    assert (cpu_sensor.peak_c, cpu_sensor.time_above_s) == (60.0, 0.0)


def test_time_above_counts_each_sample_interval() -> None:
    telemetry = pd.DataFrame({"time_unix": [0.0, 1.0, 3.0, 4.0], "cpu_temp_c": [81.0, 70.0, 90.0, 80.0]})
    (summary,) = a.temperature_summaries(telemetry, 80.0, 1.0)
    # first sample stands for the nominal 1 s, the third for the 2 s gap before it, the last for 1 s
    assert summary.time_above_s == pytest.approx(4.0)
    assert summary.peak_c == 90.0


def test_throttle_events_by_hand(gpu: a.RunAnalysis) -> None:
    gpu0 = next(t for t in gpu.throttling if t.source == "gpu0")
    # train phase S..S+40 = samples 5..45: 0x20 in samples 30–32 and 40–41; 0x1 and 0x2 are not throttling
    assert (gpu0.samples, gpu0.throttled_samples, gpu0.events) == (41, 5, 2)
    assert gpu0.throttled_s == pytest.approx(5.0)


@pytest.mark.parametrize(
    ("bits", "throttled"),
    [
        (0x1, False),
        (0x2, False),
        (0x10, False),
        (0x100, False),
        (0x4, True),
        (0x8, True),
        (0x20, True),
        (0x40, True),
        (0x80, True),
        (0x1 | 0x40, True),
    ],
)
def test_which_nvml_reasons_count_as_throttling(bits: int, throttled: bool) -> None:
    telemetry = telemetry_frame(0.0, 3, gpu0_throttle_reasons=float(bits))
    (summary,) = a.gpu_throttling(telemetry, 1.0)
    assert summary.throttled_samples == (3 if throttled else 0)


def test_cpu_frequency_drop_under_load() -> None:
    # baseline 3000 MHz; busy samples at 2550 (15 % below) count, idle samples at 1200 do not
    freq = [3000.0] * 10 + [2550.0] * 3 + [3000.0] * 5 + [1200.0] * 2
    util = [90.0] * 18 + [5.0] * 2
    telemetry = telemetry_frame(0.0, 20, cpu_freq_mhz=freq, cpu_util_pct=util)
    drops = a.cpu_frequency_drops(telemetry, Thresholds(), 1.0, baseline_mhz=3000.0)
    assert (drops.samples, drops.throttled_samples, drops.events) == (18, 3, 1)
    assert a.cpu_frequency_baseline(telemetry, Thresholds()) == 3000.0


def test_count_events() -> None:
    assert a.count_events(np.array([True, True, False, True, False, False, True])) == 3
    assert a.count_events(np.array([], dtype=bool)) == 0


# --- verdict rules ------------------------------------------------------------------------------------------


def _means(gpu: float | None, cpu: float | None, disk: float | None) -> dict[str, float | None]:
    return {"gpu_util_pct": gpu, "cpu_util_pct": cpu, "disk_util_pct": disk}


@pytest.mark.parametrize(
    ("kind", "gpu", "cpu", "disk", "primary"),
    [
        ("gpu", 80.0, 20.0, 1.0, a.GPU_BOUND),  # GPU-bound at the threshold
        ("gpu", 79.9, 20.0, 1.0, a.UNDETERMINED),
        ("gpu", 49.9, 85.0, 1.0, a.INPUT_BOUND),  # input-bound: GPU idle, CPU saturated
        ("gpu", 49.9, 50.0, 80.0, a.INPUT_BOUND),  # input-bound: GPU idle, disk saturated
        ("gpu", 50.0, 95.0, 95.0, a.UNDETERMINED),  # GPU not idle enough
        ("gpu", 30.0, 84.9, 79.9, a.UNDETERMINED),  # nothing saturated
        ("cpu", None, 85.0, 1.0, a.CPU_BOUND),  # CPU-bound at the threshold
        ("cpu", None, 84.9, 1.0, a.UNDETERMINED),
        ("cpu", None, 40.0, 80.0, a.INPUT_BOUND),  # CPU run waiting on the disk
        ("gpu", None, 95.0, 1.0, a.UNDETERMINED),  # a GPU run without NVML never reads as CPU-bound
    ],
)
def test_bottleneck_rules(
    kind: str, gpu: float | None, cpu: float | None, disk: float | None, primary: str
) -> None:
    result = a.verdict(kind, _means(gpu, cpu, disk), [], Thresholds())
    assert result.primary == primary
    assert result.evidence  # the numbers that led to it are always there
    if gpu is not None:
        assert f"{gpu:.1f} %" in result.evidence[0]


@pytest.mark.parametrize(
    ("throttled", "samples", "expected"), [(5, 100, True), (4, 100, False), (1, 20, True)]
)
def test_thermal_throttling_rule(throttled: int, samples: int, expected: bool) -> None:
    throttle = ThrottleSummary("gpu0", samples, throttled, 1, float(throttled))
    result = a.verdict("gpu", _means(90.0, 10.0, 1.0), [throttle], Thresholds())
    assert (a.THERMALLY_THROTTLED in result.labels) is expected
    assert result.primary == a.GPU_BOUND
    if expected:
        assert f"{throttled}/{samples}" in " ".join(result.evidence)


def test_throttling_is_primary_when_no_bottleneck_rule_matches() -> None:
    drops = ThrottleSummary("cpu frequency", 40, 10, 2, 10.0)
    result = a.verdict("cpu", _means(None, 60.0, 1.0), [drops], Thresholds())
    assert result.labels == (a.THERMALLY_THROTTLED,)


def test_verdicts_of_the_reference_runs(cpu: a.RunAnalysis, gpu: a.RunAnalysis) -> None:
    assert cpu.verdict.labels == (a.CPU_BOUND,)
    assert cpu.verdict.numbers["cpu_util_pct"] == pytest.approx(90.0)
    # measurement window S+21.9..S+39.9 holds samples S+22..S+39 (18); 5 of them throttled
    assert gpu.verdict.labels == (a.GPU_BOUND, a.THERMALLY_THROTTLED)
    assert gpu.verdict.numbers["gpu0 throttled fraction"] == pytest.approx(5 / 18)


def test_input_bound_gpu_run_end_to_end() -> None:
    run = reference_gpu("starved")
    telemetry = run.telemetry.assign(gpu0_util_pct=20.0, cpu_util_pct=97.0, gpu0_throttle_reasons=0.0)
    result = a.analyse_run(
        RunData(run.run_id, run.meta, run.training_info, {}, telemetry, run.training, run.phases),
        PRICES,
        Thresholds(),
    )
    assert result.verdict.labels == (a.INPUT_BOUND,)
    assert "20.0 %" in result.verdict.evidence[0] and "97.0 %" in result.verdict.evidence[0]


def test_thermally_throttled_cpu_run_end_to_end() -> None:
    run = reference_cpu("hot")
    freq = np.full(len(run.telemetry), 3000.0)
    freq[40:60] = 2000.0  # a third of the steady window, busy, 33 % below the baseline
    telemetry = run.telemetry.assign(cpu_freq_mhz=freq)
    result = a.analyse_run(
        RunData(run.run_id, run.meta, run.training_info, {}, telemetry, run.training, run.phases),
        PRICES,
        Thresholds(),
    )
    assert result.verdict.labels == (a.CPU_BOUND, a.THERMALLY_THROTTLED)
    drops = next(t for t in result.throttling if t.source == "cpu frequency")
    assert (drops.throttled_samples, drops.events) == (20, 1)


# --- windows and identity -----------------------------------------------------------------------------------


def test_train_window_from_phases_else_telemetry() -> None:
    run = reference_cpu()
    assert a.train_windows(run.phases, run.telemetry) == [(CPU_TRAIN_START, CPU_TRAIN_START + 70)]
    no_phases = pd.DataFrame(columns=["phase", "start_unix", "end_unix", "status"])
    assert a.train_windows(no_phases, run.telemetry) == [(CPU_TRAIN_START - 5, CPU_TRAIN_START + 75)]


def test_energy_window_without_phases_is_the_whole_telemetry() -> None:
    run = reference_cpu()
    empty = pd.DataFrame(columns=["phase", "start_unix", "end_unix", "status"])
    result = a.analyse_run(
        RunData(run.run_id, run.meta, run.training_info, {}, run.telemetry, run.training, empty),
        PRICES,
        Thresholds(),
    )
    assert result.training_energy.window_s == pytest.approx(80.0)
    assert result.training_energy.cpu_j == pytest.approx(3200.0)
    assert result.j_per_1000_steps == pytest.approx(80_000.0)  # the steady state is inside either way


def test_no_telemetry_gives_warnings_not_errors() -> None:
    run = reference_cpu()
    result = a.analyse_run(
        RunData(run.run_id, run.meta, run.training_info, {}, pd.DataFrame(), run.training, pd.DataFrame()),
        PRICES,
        Thresholds(),
    )
    assert result.j_per_1000_steps is None
    assert result.throughput.steps_per_s == pytest.approx(0.5)
    assert result.verdict.primary == a.UNDETERMINED
    assert any("CPU energy not measured" in w for w in result.warnings)


def test_device_kind_and_config() -> None:
    assert a.device_kind({}, {"device_used": "CPU"}) == "cpu"
    assert a.device_kind({"device": "gpu"}, {"device_used": "CPU"}) == "cpu"  # what training actually used
    assert a.device_kind({"device": "gpu"}, {}) == "gpu"
    assert a.device_kind({}, {}) == "cpu"
    info = training_info("CPU", 0.0, 1, None)
    assert a.config_name(info) == "small/resnet18/256px/batch 2/float32"
    assert a.config_name({**info, "framework": "tensorflow"}) == "small/resnet18/256px/batch 2/float32"
    assert a.config_name({**info, "framework": "torch"}) == "torch/small/resnet18/256px/batch 2/float32"


def test_gpu_util_is_the_busiest_gpus() -> None:
    telemetry = telemetry_frame(
        0.0, 4, gpu0_util_pct=[90.0, 92.0, 94.0, 96.0], gpu1_util_pct=0.0, cpu_util_pct=20.0
    )
    means = a.utilization_means(telemetry)
    assert means["gpu_util_pct"] == pytest.approx(93.0)  # gpu0; the idle gpu1 does not hide it
    assert a.verdict("gpu", means, [], Thresholds()).primary == a.GPU_BOUND


def test_a_cpu_run_on_a_gpu_host_counts_no_gpu_energy() -> None:
    gpu = reference_gpu()
    cpu = reference_cpu("cpu-on-gpu-host")
    telemetry = cpu.telemetry.assign(gpu0_util_pct=0.0, gpu0_energy_j=60.0 * np.arange(len(cpu.telemetry)))
    result = a.analyse_run(
        RunData(cpu.run_id, gpu.meta, cpu.training_info, {}, telemetry, cpu.training, cpu.phases),
        PRICES,
        Thresholds(),
    )
    assert result.kind == "cpu"
    assert result.gpu_j_per_1000_steps is None
    assert result.j_per_1000_steps == pytest.approx(80_000.0)
    assert result.verdict.primary == a.CPU_BOUND
