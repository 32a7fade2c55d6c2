"""Which reading a GPU's energy comes from: the board's counter, else instant power, else average power;
anything integrated from readings a second or more apart is an ESTIMATE."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sizing.analysis import energy as en

T0 = 1795000000.0


def telemetry(step_s: float, seconds: float = 10.0, **columns: object) -> pd.DataFrame:
    times = T0 + np.arange(0.0, seconds + step_s / 2, step_s)
    return pd.DataFrame(
        {"time_unix": times, **{k: np.broadcast_to(v, times.shape) for k, v in columns.items()}}
    )


def test_the_counter_wins_over_any_power_reading() -> None:
    frame = telemetry(1.0, gpu0_power_w=300.0, gpu0_power_instant_w=350.0)
    frame["gpu0_energy_j"] = 400.0 * (frame["time_unix"] - T0)
    joules, covers = en.one_gpu_energy_j(frame, 0, T0 + 2, T0 + 8)
    assert joules == pytest.approx(2400.0) and covers == en.GPU_COUNTER


def test_instant_power_before_the_average_and_estimate_at_one_second() -> None:
    frame = telemetry(1.0, gpu0_power_w=300.0, gpu0_power_instant_w=350.0)
    joules, covers = en.one_gpu_energy_j(frame, 0, T0 + 2, T0 + 8)
    assert joules == pytest.approx(2100.0)
    assert covers == f"ESTIMATE: {en.GPU_INSTANT_POWER}, readings 1 s apart"


def test_an_empty_instant_column_falls_back_to_the_average_and_fast_readings_are_no_estimate() -> None:
    frame = telemetry(0.1, gpu0_power_w=300.0, gpu0_power_instant_w=np.nan)
    joules, covers = en.one_gpu_energy_j(frame, 0, T0 + 2, T0 + 8)
    assert joules == pytest.approx(1800.0) and covers == en.GPU_POWER
    assert en.one_gpu_energy_j(telemetry(1.0, gpu0_temp_c=50.0), 0, T0, T0 + 5) == (None, "")
