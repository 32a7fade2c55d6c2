"""The power- and clock-aware GPU rules on collector-style columns: the power limit and the SM clock's max
from run.json when telemetry.csv has no column for them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sizing.analysis import gpu_verdicts as gv
from sizing.model import Thresholds

T = Thresholds()
H100 = {"power_limit_w": 700.0, "sm_clock_max_mhz": 1980.0}


def frame(samples: int = 50, **columns: object) -> pd.DataFrame:
    return pd.DataFrame({"time_unix": 1795000000.0 + np.arange(samples), **columns})


def test_limit_and_max_clock_from_run_json() -> None:
    held = frame(gpu0_util_pct=99.0, gpu0_power_w=690.0, gpu0_sm_clock_mhz=1500.0, gpu0_temp_c=76.0)
    found = gv.power_limited(held, 0, H100, T)
    assert found is not None and found.label == gv.POWER_LIMITED
    assert found.numbers["gpu0 power limit w"] == 700.0 and found.numbers["gpu0 max sm clock mhz"] == 1980.0
    assert "50 within 5% of the limit with the SM clock below its 1980 MHz max" in found.evidence
    assert gv.power_limited(held, 0, {}, T) is None  # no limit known anywhere: no claim


def test_a_column_for_the_limit_wins_and_follows_changes() -> None:
    limits = np.where(
        np.arange(50) < 25, 700.0, 400.0
    )  # the limit was lowered half-way (e.g. nvidia-smi -pl)
    trace = frame(gpu0_util_pct=99.0, gpu0_power_w=395.0, gpu0_power_limit_w=limits, gpu0_sm_clock_mhz=1300.0)
    found = gv.power_limited(trace, 0, H100, T)
    assert found is not None and found.numbers["gpu0 power-limited fraction"] == 0.5


def test_a_rare_cap_is_evidence_without_a_label() -> None:
    reasons = np.zeros(100)
    reasons[:2] = 0x4
    trace = frame(100, gpu0_util_pct=95.0, gpu0_power_w=500.0, gpu0_throttle_reasons=reasons)
    found = gv.power_limited(trace, 0, H100, T)
    assert found is not None and found.label == "" and "in 2% of samples" in found.evidence


def test_busy_but_not_computing_needs_both_high_util_and_low_power() -> None:
    assert gv.busy_not_computing(frame(gpu0_util_pct=97.0, gpu0_power_w=120.0), 0, H100) is not None
    assert gv.busy_not_computing(frame(gpu0_util_pct=97.0, gpu0_power_w=400.0), 0, H100) is None
    assert gv.busy_not_computing(frame(gpu0_util_pct=60.0, gpu0_power_w=120.0), 0, H100) is None
    assert (
        gv.busy_not_computing(frame(gpu0_util_pct=97.0, gpu0_power_w=120.0), 0, {}) is None
    )  # limit unknown


def test_straggler_only_when_one_gpu_lags_busy_peers() -> None:
    lagging = frame(gpu0_util_pct=95.0, gpu1_util_pct=20.0, gpu2_util_pct=93.0)
    found = gv.straggler(lagging, [0, 1, 2], T)
    assert found is not None and found.label == "straggler: gpu1" and found.primary
    two_idle = frame(gpu0_util_pct=95.0, gpu1_util_pct=20.0, gpu2_util_pct=15.0)
    assert gv.straggler(two_idle, [0, 1, 2], T) is None  # not one straggler: those GPUs may be unused
    assert gv.straggler(frame(gpu0_util_pct=95.0), [0], T) is None
