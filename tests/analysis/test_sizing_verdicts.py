"""One crafted case per verdict rule, and the change that flips it: the rules can fail."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sizingfixtures import reference_cpu, telemetry_frame

from sizing import ReportSettings, build_report
from sizing.analysis import bottleneck as b
from sizing.analysis import thermal
from sizing.model import Thresholds

T = Thresholds()


def cores(n: int, busy: dict[int, float], rest: float = 2.0) -> dict[str, float]:
    return {f"cpu{i}_util_pct": busy.get(i, rest) for i in range(n)}


def judge(kind: str, samples: int = 20, **columns: object) -> b.Verdict:
    telemetry = telemetry_frame(0.0, samples, **columns)
    throttles = [*thermal.gpu_throttling(telemetry, 1.0), thermal.cpu_frequency_drops(telemetry, T, 1.0)]
    return b.verdict(kind, telemetry, [], throttles, T)


@pytest.mark.parametrize(("gpu_util", "expected"), [(85.0, b.GPU_BOUND), (75.0, b.UNDETERMINED)])
def test_gpu_bound_flips_at_the_threshold(gpu_util: float, expected: str) -> None:
    assert judge("gpu", gpu0_util_pct=gpu_util, cpu_util_pct=20.0).primary == expected


@pytest.mark.parametrize(("cpu_util", "expected"), [(90.0, b.CPU_BOUND), (80.0, b.UNDETERMINED)])
def test_cpu_bound_flips_at_the_threshold(cpu_util: float, expected: str) -> None:
    assert judge("cpu", cpu_util_pct=cpu_util, **cores(2, {}, rest=cpu_util)).primary == expected


@pytest.mark.parametrize(("iowait", "expected"), [(25.0, b.IO_BOUND), (10.0, b.GPU_UNDERUSED)])
def test_io_bound_from_iowait(iowait: float, expected: str) -> None:
    verdict = judge("gpu", gpu0_util_pct=30.0, cpu_util_pct=40.0, cpu_iowait_pct=iowait, disk_util_pct=20.0)
    assert verdict.primary == expected
    if expected == b.IO_BOUND:
        assert "iowait 25.0 %" in verdict.evidence[0]


def test_io_bound_from_a_busy_disk_on_a_cpu_run() -> None:
    assert judge("cpu", cpu_util_pct=50.0, disk_util_pct=95.0).primary == b.IO_BOUND
    assert judge("cpu", cpu_util_pct=50.0, disk_util_pct=30.0).primary == b.UNDETERMINED


def test_one_saturated_input_thread_on_a_64_core_host_is_host_bound() -> None:
    """The whole-host mean (≈ 3.5 %) hides it; per-core utilization and proc_cpu_pct show it."""
    columns = cores(64, {7: 100.0})
    verdict = judge("gpu", gpu0_util_pct=35.0, cpu_util_pct=3.5, proc_cpu_pct=101.0, **columns)
    assert verdict.primary == b.HOST_BOUND
    assert "1.0 of 64 logical CPUs" in verdict.evidence[0] and "1.0 cores" in verdict.evidence[0]
    # the same saturated core, but the training's processes use a tenth of a core: not the training's
    other = judge("gpu", gpu0_util_pct=35.0, cpu_util_pct=3.5, proc_cpu_pct=10.0, **columns)
    assert other.primary == b.GPU_UNDERUSED


def test_a_cpu_run_with_few_threads_is_host_bound_not_cpu_bound() -> None:
    columns = cores(8, {0: 99.0, 1: 99.0})
    assert judge("cpu", cpu_util_pct=26.0, proc_cpu_pct=198.0, **columns).primary == b.HOST_BOUND
    busy = cores(8, {}, rest=95.0)
    assert judge("cpu", cpu_util_pct=95.0, proc_cpu_pct=760.0, **busy).primary == b.CPU_BOUND


def test_gpu_run_with_every_core_busy_is_host_bound() -> None:
    assert judge("gpu", gpu0_util_pct=40.0, cpu_util_pct=92.0).primary == b.HOST_BOUND
    assert judge("gpu", gpu0_util_pct=40.0, cpu_util_pct=60.0).primary == b.GPU_UNDERUSED


def test_thermal_label_only_from_thermal_bits() -> None:
    thermal_bits = judge("gpu", gpu0_util_pct=90.0, gpu0_throttle_reasons=float(0x20))
    assert thermal_bits.labels == (b.GPU_BOUND, b.THERMALLY_THROTTLED)
    power_cap = judge("gpu", gpu0_util_pct=90.0, gpu0_throttle_reasons=float(0x4))
    assert power_cap.labels == (b.GPU_BOUND,)  # at the power limit is a state, not a fault
    assert any("power limit" in e and "not a fault" in e for e in power_cap.evidence)
    slowdown = judge("gpu", gpu0_util_pct=90.0, gpu0_throttle_reasons=float(0x8))
    assert slowdown.labels == (b.GPU_BOUND, b.HW_SLOWDOWN)


def test_thermal_label_flips_at_five_percent_of_samples() -> None:
    reasons = np.zeros(100)
    reasons[:5] = 0x40
    assert (
        b.THERMALLY_THROTTLED in judge("gpu", 100, gpu0_util_pct=90.0, gpu0_throttle_reasons=reasons).labels
    )
    reasons[4] = 0
    assert (
        b.THERMALLY_THROTTLED
        not in judge("gpu", 100, gpu0_util_pct=90.0, gpu0_throttle_reasons=reasons).labels
    )


def test_idle_cores_are_not_a_frequency_drop() -> None:
    """The false alarm of the all-core mean: one busy core at full clock, seven idle at 1.2 GHz."""
    columns = {**cores(8, {0: 100.0}), **{f"cpu{i}_freq_mhz": 1200.0 for i in range(1, 8)}}
    mean = (3600.0 + 7 * 1200.0) / 8
    freq0 = np.full(40, 3600.0)
    telemetry = telemetry_frame(0.0, 40, cpu_util_pct=12.5, cpu_freq_mhz=mean, cpu0_freq_mhz=freq0, **columns)
    drops = thermal.cpu_frequency_drops(telemetry, T, 1.0)
    assert drops.status == "measured" and drops.flagged_samples == 0
    freq0[10:20] = 2400.0  # the busy core itself slows down: that is a drop
    telemetry = telemetry_frame(0.0, 40, cpu_util_pct=12.5, cpu_freq_mhz=mean, cpu0_freq_mhz=freq0, **columns)
    drops = thermal.cpu_frequency_drops(telemetry, T, 1.0)
    assert (drops.flagged_samples, drops.events) == (10, 1)
    verdict = b.verdict("cpu", telemetry, [], [drops], T)
    assert b.THERMALLY_THROTTLED not in verdict.labels  # no thermal evidence: not "thermal"
    assert b.CPU_CLOCK_BELOW_PEAK in verdict.labels and drops.category == thermal.CPU_BELOW_PEAK


def _one_core_slowed(**columns: object):
    freq0 = np.full(40, 3600.0)
    freq0[10:20] = 2400.0
    return telemetry_frame(0.0, 40, cpu_util_pct=12.5, cpu0_freq_mhz=freq0, **cores(8, {0: 100.0}),
                           **{f"cpu{i}_freq_mhz": 1200.0 for i in range(1, 8)}, **columns)  # fmt: skip


@pytest.mark.parametrize(
    ("columns", "thermal_cause"),
    [
        ({}, ""),
        ({"cpu_temp_c": 70.0}, ""),  # a temperature below the threshold is no evidence
        ({"cpu_core_throttle_count": np.repeat([5.0, 9.0], 20)}, "cpu_core_throttle_count rose by 4"),
        ({"cpu_package_throttle_count": np.full(40, 3.0)}, ""),  # a counter that never rises is none
        ({"cpu_temp_c": np.where(np.arange(40) >= 10, 95.0, 60.0)}, "cpu_temp_c up to 95 °C ≥ 80 °C"),
    ],
)
def test_a_frequency_drop_is_thermal_only_with_thermal_evidence(columns: dict, thermal_cause: str) -> None:
    drops = thermal.cpu_frequency_drops(_one_core_slowed(**columns), T, 1.0)
    assert drops.flagged_samples == 10 and drops.cause == thermal_cause
    verdict = b.verdict("cpu", _one_core_slowed(**columns), [], [drops], T)
    assert (b.THERMALLY_THROTTLED in verdict.labels) == bool(thermal_cause)
    assert (b.CPU_CLOCK_BELOW_PEAK in verdict.labels) != bool(thermal_cause)


def test_fewer_busy_cores_turbo_higher_and_that_is_no_drop() -> None:
    """Turbo bins: 2 busy cores at 3.6 GHz, then 8 busy cores at 3.0 GHz (17 % lower) is like with like."""
    two = np.arange(40) < 20
    util = {f"cpu{i}_util_pct": np.where(two & (i >= 2), 2.0, 100.0) for i in range(8)}
    freq = {f"cpu{i}_freq_mhz": np.where(two, 3600.0, 3000.0) for i in range(8)}
    drops = thermal.cpu_frequency_drops(telemetry_frame(0.0, 40, cpu_util_pct=60.0, **util, **freq), T, 1.0)
    assert drops.status == "measured" and drops.samples == 40 and drops.flagged_samples == 0


def test_constant_frequency_is_cannot_tell_not_zero_events() -> None:
    telemetry = telemetry_frame(0.0, 30, cpu_util_pct=95.0, cpu_freq_mhz=2596.1)
    drops = thermal.cpu_frequency_drops(telemetry, T, 1.0)
    assert drops.status == thermal.CONSTANT_FREQUENCY
    assert drops.fraction is None
    assert thermal.cpu_frequency_drops(telemetry_frame(0.0, 3, cpu_util_pct=95.0), T, 1.0).status == (
        thermal.NO_FREQUENCY
    )


def test_the_report_shows_the_thermal_evidence_or_its_absence() -> None:
    run = reference_cpu()
    freq = np.where(np.arange(len(run.telemetry)) % 10 < 3, 2000.0, 3000.0)  # 30 % of samples 33 % lower
    hot = run.telemetry.assign(cpu_freq_mhz=freq, cpu_temp_c=np.where(freq < 2500, 90.0, 60.0))
    for telemetry, thermal_shown in ((run.telemetry.assign(cpu_freq_mhz=freq), False), (hot, True)):
        report = build_report([replace(run, telemetry=telemetry)], ReportSettings())
        rows = next(s for s in report.sections if s.key == "throttling").data
        (cpu,) = [r for r in rows if r["source"] == "cpu"]
        assert (cpu["thermal_evidence"] is not None) == thermal_shown
        assert (cpu["category"] == thermal.CPU_THERMAL) == thermal_shown
        labels = report.analyses[0].verdict.labels
        assert (b.THERMALLY_THROTTLED in labels) == thermal_shown


def _moving_thread(samples: int, saturated: int) -> dict[str, np.ndarray]:
    """One training thread the kernel moves between 4 CPUs: 95 % of some CPU in `saturated` samples."""
    columns = {f"cpu{i}_util_pct": np.full(samples, 5.0) for i in range(4)}
    for row in range(saturated):
        columns[f"cpu{row % 4}_util_pct"][row] = 95.0
    return columns


@pytest.mark.parametrize(("saturated", "expected"), [(10, b.HOST_BOUND), (9, b.GPU_UNDERUSED)])
def test_one_thread_saturated_in_half_the_samples_is_host_bound_at_the_boundary(
    saturated: int, expected: str
) -> None:
    """The mean count of saturated CPUs (0.5) never reaches 1: the share of samples with one does."""
    verdict = judge("gpu", gpu0_util_pct=30.0, cpu_util_pct=28.0, proc_cpu_pct=110.0,
                    **_moving_thread(20, saturated))  # fmt: skip
    assert verdict.primary == expected
    if expected == b.HOST_BOUND:
        assert "a logical CPU ≥ 90 % busy in 50% of samples (≥ 50%)" in verdict.evidence[0]
    else:
        assert "one saturated thread the kernel moves between CPUs would not show" in verdict.evidence[0]
    assert judge("cpu", cpu_util_pct=28.0, proc_cpu_pct=110.0,
                 **_moving_thread(20, saturated)).primary == b.UNDETERMINED  # fmt: skip


@pytest.mark.parametrize(("busiest", "expected"), [(90.0, b.HOST_BOUND), (89.9, b.GPU_UNDERUSED)])
def test_the_busiest_training_thread_shows_what_per_cpu_utilization_misses(
    busiest: float, expected: str
) -> None:
    """Saturated (≥ 90 %) in half the samples, the other half idle: a mean of 45 %, under the mean rule."""
    rows = [busiest, 0.0] * 10
    verdict = judge("gpu", gpu0_util_pct=25.0, cpu_util_pct=20.0, proc_cpu_pct=330.0,
                    proc_busiest_thread_pct=rows, **cores(16, {}, rest=20.0))  # fmt: skip
    assert verdict.primary == expected
    if expected == b.HOST_BOUND:
        assert "the training's busiest thread ≥ 90 % busy in 50% of samples" in verdict.evidence[0]
        assert "(≥ 50%)" in verdict.evidence[0]
    else:
        assert verdict.evidence[0].endswith("% with no host or I/O cause")


@pytest.mark.parametrize(("mean_pct", "expected"), [(70.0, b.HOST_BOUND), (69.9, b.GPU_UNDERUSED)])
def test_a_thread_busy_most_of_the_time_holds_the_gpu_back(mean_pct: float, expected: str) -> None:
    """Never saturated in a sample, but busy ≥ 70 % on average: the GPU waits on it."""
    rows = [mean_pct - 5.0, mean_pct + 5.0] * 10
    verdict = judge("gpu", gpu0_util_pct=25.0, cpu_util_pct=20.0, proc_cpu_pct=330.0,
                    proc_busiest_thread_pct=rows, **cores(16, {}, rest=20.0))  # fmt: skip
    assert verdict.primary == expected
    if expected == b.HOST_BOUND:
        assert f"{mean_pct:.0f} % busy on average (≥ 70 % on average)" in verdict.evidence[0]


def test_no_host_cause_is_never_claimed_where_the_host_was_not_recorded() -> None:
    verdict = judge("gpu", gpu0_util_pct=25.0)
    assert verdict.primary == b.GPU_UNDERUSED
    assert "and the host not recorded (no CPU columns): cause unknown" in verdict.evidence[0]
    only_mean = judge("gpu", gpu0_util_pct=25.0, cpu_util_pct=20.0)
    assert "per-CPU utilization not recorded" in only_mean.evidence[0]


def test_a_saturated_thread_without_the_gpus_utilization_is_not_called_host_bound() -> None:
    """A thread waiting on the GPU spins busy too (CUDA's synchronisation), so a GPU run's saturated thread
    says host-bound only beside a utilization that is not GPU-bound: the run's own, or a shared board's,
    which bounds the run's from above."""
    host = {"cpu_util_pct": 20.0, "proc_cpu_pct": 110.0, "proc_busiest_thread_pct": 99.0,
            **cores(16, {}, 20.0)}  # fmt: skip
    blind = judge("gpu", **host)
    assert blind.primary == b.UNDETERMINED
    assert blind.evidence[0].startswith("the training's busiest thread ≥ 90 % busy in 100% of samples")
    assert blind.evidence[0].endswith(
        "but the GPU's utilization was not recorded, and a thread waiting on the GPU spins busy too: "
        "host-bound or GPU-bound, not known"
    )
    assert judge("gpu", gpu0_util_pct=40.0, **host).primary == b.HOST_BOUND
    for board_util, host_bound in ((40.0, True), (None, False)):
        columns = {**host, **({"gpu0_util_pct": board_util} if board_util is not None else {})}
        telemetry = telemetry_frame(0.0, 20, **columns)
        shared = b.verdict("gpu", telemetry, [], [], T, gpu_not_attributable="shared")
        assert (b.HOST_BOUND in shared.labels) is host_bound and "shared" in shared.labels
