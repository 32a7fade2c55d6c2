"""Gaps in telemetry: a counter measures across them; a log whose sampling interval changed is not a gap.
Unit cases on coverage, then copies of the H100 run and its 16-CPU baseline (data/examples)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_sizing_imperfect_runs import GPU_RUN, decision_of, report_of, rewrite

from sizing.analysis import coverage as cov


def test_a_changed_interval_keeps_each_parts_limit_and_a_lone_gap_stands_out() -> None:
    assert cov.LOCAL_SPACINGS == 21 and cov.MAX_GAP_INTERVALS == 3.0
    fine, coarse = np.arange(0.0, 30.0, 0.1), np.arange(30.0, 90.0, 1.0)
    limits = cov.gap_limits(np.concatenate((fine, coarse)), 0.3)
    assert limits[:280] == pytest.approx(0.3) and limits[-40:] == pytest.approx(3.0)
    lone = np.concatenate((np.arange(0.0, 10.0, 0.1), np.arange(20.0, 30.0, 0.1)))
    steps, limits = np.diff(lone), cov.gap_limits(lone, 0.3)
    assert (steps > limits).sum() == 1


def test_power_sampled_every_second_after_a_tenth_is_covered() -> None:
    """Before: the 1 s part read as gaps (3 × the file's 0.1 s median): 'covers 50 %', no figure."""
    times = np.concatenate((np.arange(0.0, 60.0, 0.1), np.arange(60.0, 120.001, 1.0)))
    energy = cov.power_source("gpu0", "power", times, np.full(times.size, 300.0), (0.0, 120.0), 0.3)
    assert energy.complete and energy.joules == pytest.approx(300.0 * 120.0)


def _counter(times: np.ndarray, watts: float) -> np.ndarray:
    return 1e6 + watts * times


def test_a_counter_measures_across_a_gap_inside_the_window() -> None:
    """Before: the 10 s the collector paused were not covered ('covers 83 %'): no figure, though the
    counter read either side of the gap holds exactly what the board drew in it."""
    times = np.concatenate((np.arange(0.0, 20.0, 0.1), np.arange(30.0, 60.0, 0.1)))
    energy = cov.counter_source("gpu0", "counter", times, _counter(times, 250.0), (0.0, 59.9), 0.3)
    assert energy.bridged == 1 and energy.complete
    assert energy.joules == pytest.approx(250.0 * 59.9) and energy.covered_s == pytest.approx(59.9)


@pytest.mark.parametrize(
    ("gap_watts", "bridged"),
    [(250.0 * 0.49, False), (250.0 * 0.51, True), (250.0 * 1.49, True), (400.0, False)],
)
def test_a_gap_whose_mean_power_is_out_of_the_counters_range_is_not_bridged(
    gap_watts: float, bridged: bool
) -> None:
    """A reset in the gap (the counter climbing back from 0) or a misread shows as a mean power the
    counter's other spans never had: BRIDGE_POWER_RANGE of their 5th and 95th percentiles."""
    assert cov.BRIDGE_POWER_RANGE == (0.5, 1.5)
    before, after = np.arange(0.0, 20.0, 0.1), np.arange(30.0, 60.0, 0.1)
    counter = np.concatenate(
        (_counter(before, 250.0), _counter(after - 10.0, 250.0) + gap_watts * 10.0 - 25.0)
    )
    times = np.concatenate((before, after))
    energy = cov.counter_source("gpu0", "counter", times, counter, (0.0, 59.9), 0.3)
    assert energy.bridged == int(bridged)


def test_a_gap_the_window_cuts_is_not_bridged() -> None:
    times = np.concatenate((np.arange(0.0, 20.0, 0.1), np.arange(30.0, 60.0, 0.1)))
    energy = cov.counter_source("gpu0", "counter", times, _counter(times, 250.0), (25.0, 59.9), 0.3)
    assert energy.bridged == 0 and energy.covered_s == pytest.approx(29.9)


def paused(frame: pd.DataFrame) -> pd.DataFrame:
    """The collector stopped three times for 10 s inside the training (rows lost), at a quarter, half and
    three quarters of its telemetry."""
    elapsed = frame["time_unix"] - frame["time_unix"].iloc[0]
    lost = np.zeros(len(frame), dtype=bool)
    for share in (0.25, 0.5, 0.75):
        start = share * elapsed.iloc[-1]
        lost |= ((elapsed > start) & (elapsed < start + 10.0)).to_numpy()
    return frame[~lost]


def rewritten(change) -> Callable[[Path], None]:
    return rewrite("telemetry.csv", change)


def gpu_energy(tmp_path: Path) -> float | None:
    return next(r for r in report_of(tmp_path)["runs"] if r["run_id"] == GPU_RUN)["energy_j_per_1k_examples"]


def test_a_run_whose_collector_paused_keeps_its_counters_energy(tmp_path: Path) -> None:
    decision_of(tmp_path / "a")
    untouched = gpu_energy(tmp_path / "a")
    _, warnings = decision_of(tmp_path / "b", gpu_change=rewritten(paused))
    assert gpu_energy(tmp_path / "b") == pytest.approx(untouched, rel=0.01)
    assert any(f"{GPU_RUN}: gpu0 energy counter measured across 3 gap(s)" in w for w in warnings)
    assert any("telemetry covers" in w and "gap of up to 10 s" in w for w in warnings)  # still said


def test_without_a_counter_the_paused_run_has_no_energy_figure(tmp_path: Path) -> None:
    """The control: power alone says nothing of the paused seconds."""
    _, warnings = decision_of(
        tmp_path, gpu_change=rewritten(lambda f: paused(f.drop(columns=["gpu0_energy_j"])))
    )
    assert gpu_energy(tmp_path) is None
    assert any(f"{GPU_RUN}: energy not measured (gpu0 covers" in w for w in warnings)


def test_a_run_sampled_slower_from_its_middle_reads_as_whole(tmp_path: Path) -> None:
    """Before: every 10th row kept from the middle on read 'telemetry covers 48 % … a gap of up to 1 s' and
    its energy 'not measured'."""

    def slower(frame: pd.DataFrame) -> pd.DataFrame:
        half = len(frame) // 2
        return frame[(frame.index < half) | (frame.index % 10 == 0)]

    decision_of(tmp_path / "a")
    untouched = gpu_energy(tmp_path / "a")
    _, warnings = decision_of(tmp_path / "b", gpu_change=rewritten(slower))
    assert not any("telemetry covers" in w for w in warnings)
    assert gpu_energy(tmp_path / "b") == pytest.approx(untouched, rel=0.02)
