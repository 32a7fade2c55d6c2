"""Each figure of the sizing analysis against a hand computation on the crafted reference runs."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from sizingfixtures import reference_cpu, reference_gpu, telemetry_frame, training_frame

from sizing.analysis import compare as cmp
from sizing.analysis import coverage as cov
from sizing.analysis import energy as en
from sizing.analysis import money, thermal
from sizing.analysis import throughput as tp
from sizing.analysis.run import RunAnalysis, analyse_run
from sizing.analysis.stats import ratio_ci95, spread, t95
from sizing.model import Prices, Thresholds, count_events, times_of, train_windows

PRICES = Prices(
    tariff_per_kwh=0.15, cpu_price=1000.0, gpu_price=2000.0, amortise_years=3.0, value_per_hour=10.0
)


@pytest.fixture(scope="module")
def cpu() -> RunAnalysis:
    return analyse_run(reference_cpu(), PRICES, Thresholds())


@pytest.fixture(scope="module")
def gpu() -> RunAnalysis:
    return analyse_run(reference_gpu(), PRICES, Thresholds())


@pytest.mark.parametrize(
    ("steps", "info", "expected"),
    [
        (1000, {}, 20),
        (60, {}, 20),
        (59, {}, 19),
        (2, {}, 1),
        (1, {}, 0),
        (100, {"warmup_steps_excluded": 7}, 7),
        (100, {"warmup_steps_excluded": 0}, 1),
        (10, {"warmup_steps_excluded": 20}, 9),
    ],
)
def test_warmup_rule(steps: int, info: dict, expected: int) -> None:
    assert tp.warmup_steps(steps, info) == expected


def test_steady_throughput_by_hand(cpu: RunAnalysis, gpu: RunAnalysis) -> None:
    t = cpu.throughput  # rows 5..30 end at S+18 and S+68: 25 steps in 50 s
    assert (t.source, t.steps_total, t.warmup_steps, t.steady_steps) == ("step log", 30, 5, 25)
    assert (t.steps_per_s, t.examples_per_s) == (pytest.approx(0.5), pytest.approx(1.0))
    assert t.steps_in_budget == 26  # elapsed ≤ 60 s: 10 + 2k ≤ 60
    g = gpu.throughput  # 180 steps in 18 s
    assert (g.steps_per_s, g.examples_per_s) == (pytest.approx(10.0), pytest.approx(20.0))


def test_energy_per_1000_examples_by_hand(cpu: RunAnalysis, gpu: RunAnalysis) -> None:
    # CPU: RAPL 40 W at 1 example/s → 40,000 J per 1,000 examples; per step (batch 2): 80,000 J
    assert cpu.steady_energy.cpu_covers == en.CPU_RAPL
    assert cpu.j_per_1k_examples == pytest.approx(40_000.0)
    assert cpu.j_per_1k_steps == pytest.approx(80_000.0)
    # GPU: 300 W board + 50 W package at 20 examples/s → 17,500 J
    assert gpu.steady_energy.gpu_covers == en.GPU_COUNTER
    assert gpu.j_per_1k_examples == pytest.approx(17_500.0)
    assert gpu.training_energy.total_j == pytest.approx(14_000.0)  # train phase: 40 s × 350 W
    assert not gpu.energy_is_estimate


def test_counter_and_integrated_energy_by_hand() -> None:
    times = np.array([0.0, 1.0, 2.0, 3.0])
    counter = cov.counter_source(
        "cpu", en.CPU_RAPL, times, np.array([0.0, 10.0, 30.0, 60.0]), (0.5, 2.5), 3.0
    )
    assert counter.joules == pytest.approx(40.0) and counter.coverage == 1.0 and counter.resets == 0
    power = np.array([10.0, 20.0, 30.0, 40.0])
    integrated = cov.power_source("gpu0", en.GPU_POWER, times, power, (0.0, 3.0), 3.0)
    assert integrated.joules == pytest.approx(75.0) and integrated.window_j == pytest.approx(75.0)
    assert cov.counter_source("cpu", en.CPU_RAPL, times[:1], power[:1], (0.0, 1.0), 3.0) is None


def test_cpu_estimate_has_an_idle_floor_and_is_marked() -> None:
    telemetry = telemetry_frame(0.0, 11, cpu_util_pct=50.0)
    assert en.energy_in(telemetry, (0.0, 10.0), [], None, 0.3).cpu_j is None
    energy = en.energy_in(telemetry, (0.0, 10.0), [], 100.0, 0.3)
    assert energy.cpu_j == pytest.approx(100.0 * (0.3 + 0.7 * 0.5) * 10)  # 650 J, not 500: idle draw counts
    assert energy.cpu_is_estimate and energy.cpu_covers.startswith("ESTIMATE")
    idle = telemetry_frame(0.0, 11, cpu_util_pct=0.0)
    assert en.energy_in(idle, (0.0, 10.0), [], 100.0, 0.3).cpu_j == pytest.approx(300.0)  # never 0 W at idle


def test_cost_per_1000_examples_by_hand(cpu: RunAnalysis, gpu: RunAnalysis) -> None:
    assert cpu.energy_usd_per_1k_examples == pytest.approx(40_000 / 3.6e6 * 0.15)
    assert cpu.hardware_usd_per_1k_examples == pytest.approx(1000 / 26_280 * (1000 / 3600))
    assert gpu.hardware_usd_per_1k_examples == pytest.approx(3000 / 26_280 * (50 / 3600))
    assert gpu.total_usd_per_1k_examples == pytest.approx(17_500 / 3.6e6 * 0.15 + 3000 / 26_280 * (50 / 3600))


def test_no_price_is_unknown_not_zero() -> None:
    plain = analyse_run(reference_cpu(), Prices(), Thresholds())
    assert plain.hardware_usd_per_1k_examples is None
    assert plain.total_usd_per_1k_examples is None
    hardware = {"host": "box", "cpu_model": "Xeon", "gpus": ["H100"]}
    assert (
        money.hardware_price("gpu", hardware, Prices(gpu_price=500.0)).usd is None
    )  # the host is not priced
    assert money.hardware_price("gpu", hardware, Prices(gpu_price=500.0)).gpu_usd == 500.0
    assert money.hardware_price("cpu", hardware, Prices(gpu_price=500.0)).usd is None
    assert money.hardware_price("cpu", hardware, Prices(cpu_price=0.0)).usd == 0.0  # given as 0 is 0
    assert en.energy_usd(1000.0, Prices(tariff_per_kwh=None)) is None


def test_break_even_by_hand(cpu: RunAnalysis, gpu: RunAnalysis) -> None:
    groups = cmp.group_runs([cpu, gpu])
    base = cmp.pick_baseline(groups)
    assert base is groups[0]
    comparison = cmp.compare(groups, base, PRICES)[1]
    # 72,000 examples per GPU hour × ($0.0016667 − $0.00072917) per 1,000 examples
    saving = 72 * (0.15 / 3.6e6) * (40_000 - 17_500)
    assert comparison.energy_saving_per_gpu_hour == pytest.approx(saving)
    assert comparison.break_even_hours == pytest.approx(2000 / (19 * 10 + saving))
    assert comparison.like_for_like and comparison.batches_match
    assert comparison.speedup == pytest.approx(20.0)
    assert comparison.speedup_ci95 is None  # one run per side


def test_break_even_edge_cases() -> None:
    gpu = money.HardwarePrice(None, 2000.0, ())
    cpu = money.HardwarePrice(None, 0.0, ())
    prices = Prices(value_per_hour=10.0)
    never = money.break_even(1.0, gpu, cpu, "cpu", 0.0, prices)
    assert never.hours is None and never.reason.startswith("never pays back")
    unpriced = money.break_even(3.0, money.HardwarePrice(None, None, ("GPU H100",)), cpu, "cpu", None, prices)
    assert unpriced.hours is None and "GPU not priced (H100)" in unpriced.reason
    no_value = money.break_even(3.0, gpu, cpu, "cpu", None, Prices())
    assert no_value.hours is None and "--value-per-hour" in no_value.reason
    assert money.break_even(3.0, gpu, cpu, "cpu", 4.0, Prices()).hours == pytest.approx(500.0)


def test_bad_prices_are_reported() -> None:
    assert Prices(tariff_per_kwh=-0.1).problems() == ["tariff must be a number ≥ 0, got -0.1"]
    assert Prices(amortise_years=0).problems()
    assert Prices(idle_fraction=1.0).problems()
    assert Prices(cpu_tdp_by_host=(("box", -5.0),)).problems()
    assert Prices(gpu_price=0.0).problems() == []


def test_spread_and_t_interval_by_hand() -> None:
    s = spread([1.0, 2.0, 3.0])
    assert (s.mean, s.std, s.count) == (2.0, 1.0, 3)
    assert (t95(1), t95(2), t95(30), t95(45), t95(5000)) == (12.706, 4.303, 2.042, 2.021, 1.96)
    gpu, base = spread([20.0, 22.0]), spread([1.0, 1.0 + 1e-12])
    low, high = ratio_ci95(gpu, base)
    # relative se² = (√2)² / (2 × 21²) + ~0; df = 1 → t 12.706
    half = 12.706 * math.sqrt(2 / (2 * 21**2))
    assert (low, high) == (
        pytest.approx(21 * math.exp(-half), rel=1e-6),
        pytest.approx(21 * math.exp(half), rel=1e-6),
    )
    assert ratio_ci95(spread([20.0]), base) is None


def test_thermal_by_hand(gpu: RunAnalysis, cpu: RunAnalysis) -> None:
    (gpu0,) = gpu.thermal
    assert (gpu0.sensor, gpu0.peak_c, gpu0.time_above_s) == ("gpu0", 85.0, pytest.approx(10.0))
    (cpu_sensor,) = cpu.thermal
    assert (cpu_sensor.peak_c, cpu_sensor.time_above_s) == (60.0, 0.0)


def test_gpu_reasons_decoded_by_category(gpu: RunAnalysis) -> None:
    found = {t.category: t for t in gpu.throttling if t.source == "gpu0"}
    # train phase = samples 5..45: 0x20 in samples 30–32 and 40–41; 0x2 (clock setting) is no category
    assert set(found) == {"thermal (SW)"}
    assert (found["thermal (SW)"].flagged_samples, found["thermal (SW)"].events) == (5, 2)


@pytest.mark.parametrize(
    ("bits", "categories"),
    [
        (0x1, {"idle"}),
        (0x2, {"none"}),
        (0x4, {"at power limit (SW power cap)"}),
        (0x8, {"HW slowdown"}),
        (0x10, {"sync boost"}),
        (0x20, {"thermal (SW)"}),
        (0x40, {"thermal (HW)"}),
        (0x80, {"HW power brake"}),
        (0x4 | 0x40, {"at power limit (SW power cap)", "thermal (HW)"}),
    ],
)
def test_each_nvml_reason_has_its_category(bits: int, categories: set[str]) -> None:
    telemetry = telemetry_frame(0.0, 3, gpu0_throttle_reasons=float(bits))
    assert {t.category for t in thermal.gpu_throttling(telemetry, 1.0)} == categories


def test_times_fit_their_frame_even_without_a_time_column() -> None:
    """A mask made from a frame's times always fits the frame (an empty array indexed nothing)."""
    timeless = pd.DataFrame({"gpu0_util_pct": [10.0, 20.0, 30.0]})
    assert times_of(timeless).shape == (3,) and np.isnan(times_of(timeless)).all()
    assert timeless[times_of(timeless) < 5.0].empty
    assert thermal.temperature_summaries(timeless, 80.0, 1.0) == []
    assert thermal.gpu_throttling(timeless, 1.0) == []


def test_count_events_and_windows() -> None:
    assert count_events(np.array([True, True, False, True, False, False, True])) == 3
    phases = pd.DataFrame({"phase": ["train", "evaluate"], "start_unix": [5.0, 9.0], "end_unix": [8.0, 10.0]})
    assert train_windows(phases, pd.DataFrame()) == [(5.0, 8.0)]
    assert train_windows(pd.DataFrame(), telemetry_frame(0.0, 4)) == [(0.0, 3.0)]


def test_time_to_steps_and_loss() -> None:
    training = training_frame(0.0, [1.0] * 10, [5.0 - 0.1 * k for k in range(10)])
    assert tp.time_to_steps(training, {}, 5, 1.0).seconds == pytest.approx(5.0)
    projected = tp.time_to_steps(training, {}, 20, 1.0)
    assert projected.projected and projected.seconds == pytest.approx(20.0)
    assert tp.common_target_loss([3.0, None, 2.0]) == 3.0


def test_one_node_of_a_multi_node_slurm_job_is_sized_alone_and_says_so() -> None:
    run = reference_cpu()
    slurm = {"job_id": "4711", "nnodes": 2, "node_rank": 1}
    run = replace(run, meta={**run.meta, "system": {**run.meta.get("system", {}), "slurm": slurm}})
    warnings = analyse_run(run, PRICES, Thresholds()).warnings
    assert (
        "ref-cpu: node 1 of 2 of Slurm job 4711: sized as this node alone (the other nodes' work and energy "
        "not counted)"
    ) in warnings
    alone = replace(run, meta={**run.meta, "system": {"slurm": {**slurm, "nnodes": 1}}})
    assert not [w for w in analyse_run(alone, PRICES, Thresholds()).warnings if "Slurm" in w]


@pytest.mark.parametrize(
    ("node_rank", "says"),
    [
        (0, "node 0 of 2 of data-parallel training 4711: throughput is all nodes', energy and hardware "
            "this node's alone (others uncounted)"),
        (1, "node 1 of 2 of data-parallel training 4711: sized as this node alone; the step log is in node "
            "0's run (node rank 0 of rendezvous 4711)"),
    ],
)  # fmt: skip
def test_one_node_of_a_multi_node_training_says_what_it_counts(node_rank: int, says: str) -> None:
    run = reference_cpu()
    step_log = "this run directory" if node_rank == 0 else "node rank 0 of rendezvous 4711"
    nodes = {"nnodes": 2, "node_rank": node_rank, "rdzv_id": "4711", "world_size": 2, "step_log": step_log}
    slurm = {"job_id": "4711", "nnodes": 2, "node_rank": node_rank}
    meta = {**run.meta, "nodes": nodes, "system": {**run.meta.get("system", {}), "slurm": slurm}}
    warnings = analyse_run(replace(run, meta=meta), PRICES, Thresholds()).warnings
    assert f"ref-cpu: {says}" in warnings
    assert not [w for w in warnings if "Slurm job" in w]  # one warning per node, not two
