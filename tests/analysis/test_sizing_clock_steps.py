"""A system clock set back mid-run (NTP stepping a VM's clock, a hand setting it): every time written after
the step, in every file, is that much earlier. Sorted by time, the two stretches interleaved: a GPU shared
with itself, an energy counter that seemed to reset, a run.json and training.json of two runs. The run now
reads on one clock and its Decision is the untouched run's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_sizing_imperfect_runs import CPU_RUN, EXAMPLES, GPU_RUN, decision_of
from test_sizing_view import DEFAULTS, all_text

from dashboard import runs as dashboard_runs
from dashboard import sizing_view
from runformat import TELEMETRY_CSV, TRAINING_CSV
from sizing.analysis.clock_steps import (
    MATCH_SHARE,
    MATCH_SLACK_S,
    MAX_CLOCK_STEPS,
    ClockSteps,
    clock_steps,
    on_one_clock,
    phases_on_one_clock,
)
from sizing.analysis.validate import checked_frame


def set_back(seconds: float, at_share: float = 0.5, ends_too: bool = True) -> Callable[[Path], None]:
    """Every time the run wrote after `at_share` of its training on a clock `seconds` behind: both CSVs'
    later rows (time_unix and elapsed_s, which our collector derives from it), the ends in run.json and
    training.json, and phases.csv's later times."""

    def change(run_dir: Path) -> None:
        info = json.loads((run_dir / "training.json").read_text())
        at = info["start_unix"] + at_share * (info["end_unix"] - info["start_unix"])
        for name in ("training.csv", "telemetry.csv"):
            frame = pd.read_csv(run_dir / name)
            later = frame["time_unix"] >= at
            frame.loc[later, ["time_unix", "elapsed_s"]] -= seconds
            frame.to_csv(run_dir / name, index=False)
        phases = pd.read_csv(run_dir / "phases.csv")
        for column in ("start_unix", "end_unix"):
            phases[column] = phases[column].where(phases[column] < at, phases[column] - seconds)
        phases.to_csv(run_dir / "phases.csv", index=False)
        for name in ("run.json", "training.json") if ends_too else ():
            record = json.loads((run_dir / name).read_text())
            record["end_unix"] -= seconds
            (run_dir / name).write_text(json.dumps(record))

    return change


def set_back_without_a_counter(seconds: float) -> Callable[[Path], None]:
    """set_back, on a run whose telemetry has no cumulative counter (a host without a GPU)."""

    def change(run_dir: Path) -> None:
        path = run_dir / "telemetry.csv"
        frame = pd.read_csv(path)
        frame.drop(columns=[c for c in frame.columns if c.endswith("_energy_j")]).to_csv(path, index=False)
        set_back(seconds)(run_dir)

    return change


@pytest.mark.parametrize(
    ("seconds", "at_share"),
    [(5.0, 0.5), (30.0, 0.1), (100.0, 0.5), (3600.0, 0.9), (-3600.0, 0.5), (-45.0, 0.2)],
)
def test_a_clock_stepped_mid_run_gives_the_untouched_runs_decision(
    tmp_path: Path, seconds: float, at_share: float
) -> None:
    """Set back 5 s, the energy per example doubled ('counter and integrated power differ by 53%'); 100 s
    early, the board read 'shared' with no MFU; an hour, run.json and training.json read 'not one run's'.
    Set forward (negative `seconds`), the run read 'resumed or paused' and ran half its steps in budget."""
    decision, warnings = decision_of(tmp_path, gpu_change=set_back(seconds, at_share))
    control, _ = decision_of(tmp_path / "control")
    (option,), (expected,) = decision["options"], control["options"]
    assert option["speedup"] == pytest.approx(expected["speedup"], rel=0.01)
    energy = expected["energy_j_per_1k_examples"]
    assert energy and option["energy_j_per_1k_examples"] == pytest.approx(energy, rel=0.02)
    assert option["mfu"] == pytest.approx(expected["mfu"], rel=0.01)
    assert option["why_not_at_limit"] == expected["why_not_at_limit"]
    assert decision["caveats"] == control["caveats"]
    said = " | ".join(warnings)
    jumps = "goes back" if seconds > 0 else "jumps"
    for file in (TRAINING_CSV, TELEMETRY_CSV):
        assert any(f"{GPU_RUN}: {file}: time_unix {jumps} {abs(seconds) + off:,.1f} s" in said
                   for off in (-0.1, 0.0, 0.1)), said  # fmt: skip
    assert f"system clock was set {'back' if seconds > 0 else 'forward'}" in said
    assert "out of time order" not in said


@pytest.mark.parametrize("seconds", [3600.0, -3600.0])
def test_ends_another_tool_stamped_on_one_clock_stay_as_they_are(tmp_path: Path, seconds: float) -> None:
    """run.json's and training.json's end_unix on the unstepped clock (a tool that times its end by a
    monotonic clock): moved, they fell an hour before the start or after the end ("not one run's")."""
    decision, _ = decision_of(tmp_path, gpu_change=set_back(seconds, ends_too=False))
    control, _ = decision_of(tmp_path / "control")
    assert decision["options"][0]["speedup"] == pytest.approx(control["options"][0]["speedup"], rel=0.01)
    assert decision["caveats"] == control["caveats"]


def paused(seconds: float) -> Callable[[Path], None]:
    """A real pause: every process of the run stopped `seconds` (SIGSTOP) halfway, the collector too, so its
    first tick after came late, the ticks in between skipped."""

    def change(run_dir: Path) -> None:
        set_back(-seconds)(run_dir)
        path = run_dir / "telemetry.csv"
        frame = pd.read_csv(path)
        first_after = int(np.flatnonzero(np.diff(frame["time_unix"].to_numpy()) > seconds / 2)[0]) + 1
        frame.loc[first_after, ["late_ms", "skipped_ticks"]] = [seconds * 1000, seconds / 0.1]
        frame.to_csv(path, index=False)

    return change


def test_a_real_pause_is_not_a_clock_step(tmp_path: Path) -> None:
    """The collector's own clock saw the pause: it stays one, not mended away."""
    decision, warnings = decision_of(tmp_path, gpu_change=paused(600.0))
    assert not any("set forward" in w for w in warnings), warnings
    assert any(f"{GPU_RUN} was resumed or paused (2 sessions)" in c for c in decision["caveats"])


def test_a_baseline_without_an_energy_counter_is_set_back_as_its_step_log_is(tmp_path: Path) -> None:
    """The CPU run's telemetry has no cumulative counter: its step back is the step log's, so it is mended."""
    decision, warnings = decision_of(tmp_path, cpu_change=set_back_without_a_counter(60.0))
    control, _ = decision_of(tmp_path / "control")
    assert decision["options"][0]["speedup"] == pytest.approx(control["options"][0]["speedup"], rel=0.01)
    assert decision["caveats"] == control["caveats"]
    said = " | ".join(warnings)
    assert f"{CPU_RUN}: {TELEMETRY_CSV}: time_unix goes back" in said and "out of time order" not in said


@pytest.mark.parametrize("gpu_seconds", [100.0, -600.0])
def test_the_dashboard_plots_a_stepped_clock_on_one_clock(tmp_path: Path, gpu_seconds: float) -> None:
    """The GPU run's telemetry by its energy counter (set back) or its collector's ticks (set forward); the
    CPU run's, which has no counter, by its step log: each row where it was taken, within a row interval
    and the second the step was measured to."""
    decision_of(tmp_path, gpu_change=set_back(gpu_seconds), cpu_change=set_back_without_a_counter(60.0))
    for name in (GPU_RUN, CPU_RUN):
        run = dashboard_runs.open_run_dir(tmp_path / "runs" / name)
        untouched = dashboard_runs.open_run_dir(EXAMPLES / name)
        for read in (dashboard_runs.read_training, dashboard_runs.read_telemetry):
            times, taken = (read(r)["time_unix"].to_numpy(dtype=float) for r in (run, untouched))
            assert times.shape == taken.shape and np.abs(times - taken).max() < 1.0, (name, read)


def test_the_dashboards_sizing_tab_reads_a_clock_set_back_as_the_report_does(tmp_path: Path) -> None:
    """The tab sized the CSVs the dashboard had checked already, so the run's end_unix stayed on the
    stepped clock: "its run.json and training.json are not one run's" there, not in the report."""
    decision, _ = decision_of(tmp_path, gpu_change=set_back(3600.0, 0.9))
    text = all_text(sizing_view.sizing_content(tmp_path, [CPU_RUN, GPU_RUN], DEFAULTS))
    assert "not one run's" not in text and "system clock was set back" in text
    assert f"{decision['options'][0]['speedup']:.1f}× faster" in text


def frame(times: list[float], **columns: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"time_unix": times, **columns})


def test_a_telemetry_file_kept_twice_is_not_a_clock_step() -> None:
    rows = frame([10.0, 10.1, 10.2, 10.3], gpu0_energy_j=[1.0, 2.0, 3.0, 4.0])
    twice = pd.concat([rows, rows], ignore_index=True)
    assert clock_steps(twice, TELEMETRY_CSV) is None
    checked, said = checked_frame(twice, TELEMETRY_CSV)
    assert checked["time_unix"].tolist() == [10.0, 10.1, 10.2, 10.3]
    assert any("repeat an earlier row's time" in s for s in said)


def test_pieces_saved_out_of_order_are_sorted_not_mended() -> None:
    """Two halves of one record, the later saved first: they join end to end once sorted."""
    later, earlier = [20.0, 20.1, 20.2, 20.3], [19.6, 19.7, 19.8, 19.9]
    pieces = frame(later + earlier, gpu0_energy_j=[5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0])
    assert clock_steps(pieces, TELEMETRY_CSV) is None
    checked, said = checked_frame(pieces, TELEMETRY_CSV)
    assert checked["time_unix"].tolist() == sorted(later + earlier)
    assert any("rows out of time order (1): sorted by time" in s for s in said)


def test_rows_out_of_order_without_a_counter_or_a_step_log_are_not_clock_steps() -> None:
    """Odd rows, then even ones: one step back, its stretches overlapping as a clock's do. Nothing shows the
    order written to be the order taken, so they are sorted."""
    odd_then_even = frame([0.1, 0.3, 0.5, 0.7, 0.0, 0.2, 0.4, 0.6], gpu0_util_pct=[1.0] * 8)
    assert clock_steps(odd_then_even, TELEMETRY_CSV) is None
    shuffled = frame([1.0, 0.5, 2.0, 1.5, 3.0, 2.5, 4.0, 3.5, 5.0, 4.5])
    assert clock_steps(shuffled, TELEMETRY_CSV) is None
    resumed = frame([1.0, 2.0, 3.0, 2.5, 3.5], step=[1.0, 2.0, 3.0, 2.0, 3.0])  # from an earlier checkpoint
    assert clock_steps(resumed, TRAINING_CSV) is None


def test_a_clock_step_moves_later_rows_on_by_the_step_and_one_row_interval() -> None:
    written = frame([100.0, 101.0, 102.0, 2.5, 3.5, 4.5], step=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                    elapsed_s=[0.0, 1.0, 2.0, -97.5, -96.5, -95.5])  # fmt: skip
    steps = clock_steps(written, TRAINING_CSV)
    assert steps is not None and steps.rows == (3,) and steps.total_s == pytest.approx(100.5)
    mended = on_one_clock(written, steps)
    assert mended["time_unix"].tolist() == pytest.approx([100.0, 101.0, 102.0, 103.0, 104.0, 105.0])
    assert mended["elapsed_s"].tolist() == pytest.approx([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    phases = pd.DataFrame({"phase": ["train", "export"], "start_unix": [99.5, 5.0], "end_unix": [4.6, 6.0]})
    on_clock = phases_on_one_clock(phases, written["time_unix"].to_numpy(), steps, earliest_unix=99.0)
    assert on_clock["start_unix"].tolist() == pytest.approx([99.5, 105.5])
    assert on_clock["end_unix"].tolist() == pytest.approx([105.1, 106.5])


def test_most_steps_a_clock_takes_is_max_clock_steps() -> None:
    """A file whose time goes back MAX_CLOCK_STEPS times is on a stepped clock; once more, out of order."""
    for count, stepped in ((MAX_CLOCK_STEPS, True), (MAX_CLOCK_STEPS + 1, False)):
        stretches = [np.arange(10.0) + 1000.0 - 50.0 * k for k in range(count + 1)]  # each 50 s back
        times = np.concatenate(stretches)
        energy = list(np.arange(times.size, dtype=float))  # a counter that goes on in the order written
        found = clock_steps(frame(list(times), gpu0_energy_j=energy), TELEMETRY_CSV)
        assert (found is not None) is stepped, count
        if found is not None:
            assert found.rows == tuple(10 * (k + 1) for k in range(count))
            assert found.moved_s == pytest.approx((60.0,) * count)


@pytest.mark.parametrize("moved_s", [10.0, 100.0])
def test_a_telemetry_step_is_the_step_log_within_the_match_slack(moved_s: float) -> None:
    """A telemetry file with no counter is set back where the step log is, as far within max(MATCH_SLACK_S,
    MATCH_SHARE × the step) plus the step log's row interval; a step further off is not it."""
    step_log = ClockSteps((5,), (moved_s,), usual_s=0.3)
    slack = max(MATCH_SLACK_S, MATCH_SHARE * moved_s) + step_log.usual_s
    for off, same in (
        (slack - 0.01, True),
        (slack + 0.01, False),
        (-slack + 0.01, True),
        (-slack - 0.01, False),
    ):
        times = [1000.0, 1000.1, 1000.2, 1000.3 - moved_s - off, 1000.4 - moved_s - off]  # rows 0.1 s apart
        found = clock_steps(frame(times, cpu_util_pct=[1.0] * 5), TELEMETRY_CSV, step_log)
        assert (found is not None) is same, off
