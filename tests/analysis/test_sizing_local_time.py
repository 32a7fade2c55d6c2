"""A step log stamped in local time without an `elapsed_s` column: moved into the training its
training.json bounds where one whole number of quarter hours alone fits. Copies of the H100 run and its
16-CPU baseline (data/examples) through the report and the dashboard."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_sizing_imperfect_runs import GPU_RUN, decision_of

from dashboard import runs as dashboard_runs
from sizing.analysis import coarse_times


def _without_elapsed(shift_s: float):
    def change(run_dir: Path) -> None:
        path = run_dir / "training.csv"
        frame = pd.read_csv(path)
        frame["time_unix"] += shift_s
        frame.drop(columns=["elapsed_s"]).to_csv(path, index=False)

    return change


@pytest.mark.parametrize("shift_s", [3600.0, -5 * 3600.0, 5.5 * 3600.0])
def test_a_step_log_in_local_time_without_elapsed_s_is_moved_into_its_training(
    tmp_path: Path, shift_s: float
) -> None:
    """Before: "training.csv's steady steps fall 3,303 s after the training the collector recorded: their
    clocks disagree", and no energy for the steps."""
    untouched, _ = decision_of(tmp_path / "a")
    decision, warnings = decision_of(tmp_path / "b", gpu_change=_without_elapsed(shift_s))
    assert [o["line"] for o in decision["options"]] == [o["line"] for o in untouched["options"]]
    way = "back" if shift_s > 0 else "on"
    assert any(
        f"{GPU_RUN}: training.csv: every time_unix lies {abs(shift_s) / 3600:g} h " in w
        and f"moved {way} {abs(shift_s):,.0f} s" in w
        for w in warnings
    )


@pytest.mark.parametrize("shift_s", [3600.0 + 300.0, 15 * 3600.0])
def test_a_step_log_no_whole_zone_places_is_left_where_it_is(tmp_path: Path, shift_s: float) -> None:
    """The controls: 65 minutes off (no quarter hour fits both ends) and 15 h off (no zone is that far)."""
    _, warnings = decision_of(tmp_path, gpu_change=_without_elapsed(shift_s))
    assert not any("every time_unix lies" in w for w in warnings)
    assert any(f"{GPU_RUN}: training.csv's steady steps fall" in w for w in warnings)


def test_the_dashboard_moves_the_step_log_as_the_report_does(tmp_path: Path) -> None:
    assert coarse_times.ZONE_FIT_SLACK_S == 60.0
    decision_of(tmp_path, gpu_change=_without_elapsed(3600.0))
    run = dashboard_runs.open_run_dir(tmp_path / "runs" / GPU_RUN)
    moved = dashboard_runs.read_training(run)
    written = pd.read_csv(tmp_path / "runs" / GPU_RUN / "training.csv")
    assert moved["time_unix"].to_numpy() == pytest.approx(written["time_unix"].to_numpy() - 3600.0)
    assert any("moved back 3,600 s" in w for w in dashboard_runs.run_warnings(run))


@pytest.mark.parametrize(("past_s", "moved"), [(60.0, True), (60.01, False)])
def test_a_step_log_fits_its_training_within_the_zone_fit_slack(past_s: float, moved: bool) -> None:
    start, end = 1_795_000_000.0, 1_795_000_300.0
    log = pd.DataFrame({"time_unix": np.linspace(start, end, 31) + 3600.0 + past_s, "step": range(1, 32)})
    found, note = coarse_times.step_log_in_another_zone(log, {"start_unix": start, "end_unix": end})
    assert (note is not None) is moved
    assert found["time_unix"].iloc[-1] == pytest.approx(end + past_s if moved else end + 3600.0 + past_s)
