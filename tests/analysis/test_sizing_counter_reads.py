"""A counter read less often than rows are written (NVML's energy counter, once a second at a 10 ms tick):
its energy is spread between its reads, so a short window gets its share, not a whole step or none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sizing.analysis import coverage as cov

TICK_S = 0.01


def _held_counter(seconds: float, watts: float, read_every_s: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Rows every 10 ms; the counter (joules) read every read_every_s and repeated in between."""
    times = np.arange(0.0, seconds + TICK_S / 2, TICK_S)
    read_at = np.floor(times / read_every_s + 1e-9) * read_every_s
    read_at[-1] = times[-1]  # the run's last row reads it anew
    return times, watts * read_at


@pytest.mark.parametrize("window", [(1.23, 3.23), (2.0, 2.2), (0.0, 10.0), (9.61, 9.99)])
def test_a_window_gets_its_share_of_a_held_counter(window: tuple[float, float]) -> None:
    times, counter = _held_counter(10.0, 200.0)
    energy = cov.counter_source("gpu0", "counter", times, counter, window, 3 * TICK_S)
    assert energy.coverage == 1.0 and energy.resets == 0
    assert energy.joules == pytest.approx(200.0 * (window[1] - window[0]), rel=1e-6)


def test_a_counter_read_every_row_is_left_as_it_is() -> None:
    times = np.arange(0.0, 5.0, 1.0)
    counter = np.array([0.0, 10.0, 30.0, 60.0, 100.0])
    assert np.array_equal(cov.spread_between_reads(times, counter, 3.0), counter)


def test_repeats_no_later_read_bounds_are_unknown_not_zero() -> None:
    times = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 5.0, 5.1, 5.2, 5.3])
    counter = np.array([50.0, 50.0, 50.0, 2.0, 2.0, 9.0, 9.0, 12.0, 12.0])
    spread = cov.spread_between_reads(times, counter, 0.3)
    # unknown: before the reset (50 → 2), before the 4.6 s gap (2 → 9), after the last read; 9 → 12 spreads
    np.testing.assert_allclose(spread, [50, np.nan, np.nan, 2, np.nan, 9, 10.5, 12, np.nan])
    energy = cov.counter_source("gpu0", "counter", times, counter, (0.0, 5.3), 0.3)
    assert energy.resets == 1 and energy.joules == pytest.approx(3.0)
    assert energy.covered_s == pytest.approx(0.2)  # 5.0 → 5.2 only


def test_an_exporter_that_stopped_is_not_a_complete_figure() -> None:
    """An import repeats a counter's last scrape until its lookback ends: when dcgm-exporter died halfway,
    those minutes are not covered (not zero joules in a complete run)."""
    times = np.arange(0.0, 601.0, 1.0)
    scraped = np.floor(np.minimum(times, 300.0) / 15.0) * 15.0  # a scrape every 15 s until 300 s
    energy = cov.counter_source("gpu0", "counter", times, 250.0 * scraped, (0.0, 600.0), 3.0)
    assert energy.coverage == pytest.approx(0.5) and not energy.complete
    assert energy.mean_w == pytest.approx(250.0)


def test_a_counter_that_never_moves_stays_as_it_is_for_the_stuck_check() -> None:
    times = np.arange(0.0, 10.0, 1.0)
    energy = cov.counter_source("gpu0", "counter", times, np.full(10, 42.0), (0.0, 9.0), 3.0)
    assert energy.coverage == 1.0 and energy.mean_w == 0.0  # analysis.energy calls it stuck, and ignores it


def test_the_shipped_h100_runs_phases_agree_with_its_integrated_instant_power() -> None:
    """A real run whose counter was read every ~0.5 s at a 100 ms tick (data/examples, docs/gpu-evidence.md):
    each phase of 1 to 5 s gets within 2 % of the instant power integrated row by row. Left as steps, the
    detect phase read 9 % low and the inference phase 3 % high."""
    import pandas as pd

    run = Path(__file__).resolve().parents[2] / "data" / "examples" / "20261126T151203Z-gpu-vm"
    telemetry = pd.read_csv(run / "telemetry.csv")
    times = telemetry["time_unix"].to_numpy(float)
    counter = telemetry["gpu0_energy_j"].to_numpy(float)
    instant = telemetry["gpu0_power_instant_w"].to_numpy(float)
    phases = pd.read_csv(run / "phases.csv")
    assert list(phases["phase"]) == ["train", "export", "evaluate", "detect", "infer"]
    for phase in phases.itertuples():
        window = (phase.start_unix, phase.end_unix)
        counted = cov.counter_source("gpu0", "counter", times, counter, window, 0.3)
        integrated = cov.power_source("gpu0", "instant", times, instant, window, 0.3)
        assert counted.coverage == 1.0, phase.phase
        assert counted.joules == pytest.approx(integrated.joules, rel=0.02), phase.phase
