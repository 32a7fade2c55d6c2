"""A GPU's utilization written as a 0–1 fraction (a ratio such as DCGM's GR_ENGINE_ACTIVE, by a hand-made
converter) read as percent made a board that worked read as one that "did no work": the Decision's GPU
option said its rate was the host's. Such columns now read as unknown where the board's power says it
worked; NVML's whole percents and an idle board are left as they are."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_sizing_imperfect_runs import GPU_RUN, decision_of, telemetry

from sizing.analysis.validate import WORKING_POWER_FACTOR, fractions_for_percent


def board(util: list[float], watts: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {"time_unix": np.arange(len(util), dtype=float), "gpu0_util_pct": util, "gpu0_power_w": watts}
    )


@pytest.mark.parametrize(
    ("high_w", "unknown"), [(70.0 * WORKING_POWER_FACTOR, True), (70.0 * WORKING_POWER_FACTOR - 1, False)]
)
def test_fractions_read_as_unknown_where_the_power_rose_by_the_working_factor(
    high_w: float, unknown: bool
) -> None:
    frame = board([0.0] * 10 + [0.25] * 30, [70.0] * 10 + [high_w] * 30)
    cleaned, note = fractions_for_percent(frame)
    assert (note is not None) is unknown
    assert bool(cleaned["gpu0_util_pct"].isna().all()) is unknown
    assert WORKING_POWER_FACTOR == 1.5


@pytest.mark.parametrize(
    ("util", "watts"),
    [
        ([0.0] * 10 + [1.0] * 30, [70.0] * 10 + [300.0] * 30),  # whole percents: 1 % busy is NVML's
        ([0.0] * 10 + [25.0] * 30, [70.0] * 10 + [300.0] * 30),  # percents
        ([0.4] * 40, [70.0] * 40),  # an averaged idle board: its power never rose
        ([0.0] * 40, [20.0] * 10 + [60.0] * 30),  # a context opened, no work: whole zeros
    ],
)
def test_percents_and_an_idle_board_are_left_as_they_are(util: list[float], watts: list[float]) -> None:
    frame = board(util, watts)
    cleaned, note = fractions_for_percent(frame)
    assert note is None and cleaned is frame


def as_fraction(frame: pd.DataFrame) -> None:
    for column in ("gpu0_util_pct", "gpu0_mem_util_pct"):
        frame[column] = frame[column] / 100


def test_a_board_whose_utilization_is_a_fraction_did_not_do_no_work(tmp_path: Path) -> None:
    decision, warnings = decision_of(tmp_path, gpu_change=telemetry(as_fraction))
    option = decision["options"][0]
    assert "did no work" not in option["line"]
    assert not any("did no work" in c for c in decision["caveats"])
    assert any(
        w.startswith(f"{GPU_RUN}: telemetry.csv: gpu0_util_pct, gpu0_mem_util_pct never above 1")
        for w in warnings
    )
