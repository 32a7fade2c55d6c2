"""The energy, stability, repeat and payback thresholds of docs/sizing.md on both sides of their boundary
(issue 35, item 3; the inventory of every threshold is test_sizing_thresholds.py's docstring)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from sizingfixtures import GPU_TRAIN_START, reference_gpu, training_frame

from sizing.analysis import coverage, energy, money, runchecks, validate
from sizing.analysis import sessions as ss
from sizing.analysis import speedup as sp
from sizing.analysis.run import analyse_run
from sizing.analysis.throughput import throughput
from sizing.model import Prices, Thresholds

T = Thresholds()
BELOW = 0.01  # the step just past a boundary; the boundary itself is hit exactly


# Energy coverage (sizing.analysis.coverage, sizing.analysis.energy)


def _counter_energy(times: np.ndarray, window: tuple[float, float], watts: float = 100.0, **columns):
    frame = pd.DataFrame({"time_unix": times, "gpu0_energy_j": watts * times, **columns})
    return energy.energy_in(frame, window, [0], None, 0.3, is_gpu_run=True, nominal_interval_s=1.0)


def test_a_source_covering_the_complete_share_gives_a_figure() -> None:
    edge = coverage.COMPLETE_COVERAGE * 100.0
    assert coverage.SourceEnergy("gpu0", "m", edge, edge, 100.0).complete
    assert not coverage.SourceEnergy("gpu0", "m", edge, edge - BELOW, 100.0).complete
    covering = _counter_energy(np.arange(0.0, edge + 1.0), (0.0, 100.0))
    assert covering.gpu_j == pytest.approx(100.0 * 100.0)
    short = _counter_energy(np.append(np.arange(0.0, edge), edge - BELOW), (0.0, 100.0))
    assert short.gpu_j is None and "gpu0 covers 95% of the run" in short.gpu_missing


@pytest.mark.parametrize(
    ("gap", "covered"), [(coverage.MAX_GAP_INTERVALS, True), (coverage.MAX_GAP_INTERVALS + BELOW, False)]
)
def test_a_gap_of_at_most_the_gap_limit_of_the_sources_own_interval_is_covered(
    gap: float, covered: bool
) -> None:
    """Integrated power (a counter measures across a gap: test_sizing_gaps)."""
    times = np.concatenate([np.arange(0.0, 21.0), 20.0 + gap + np.arange(0.0, 30.0)])
    frame = pd.DataFrame({"time_unix": times, "gpu0_power_w": 100.0})
    found = energy.energy_in(
        frame, (0.0, float(times[-1])), [0], None, 0.3, is_gpu_run=True, nominal_interval_s=1.0
    )
    (source,) = found.considered
    assert source.covered_s == pytest.approx(times[-1] if covered else times[-1] - gap)


@pytest.mark.parametrize(
    ("spacing", "estimate"), [(energy.ESTIMATE_SPACING_S, True), (energy.ESTIMATE_SPACING_S - BELOW, False)]
)
def test_integrated_power_is_an_estimate_from_the_estimate_spacing(spacing: float, estimate: bool) -> None:
    frame = pd.DataFrame({"time_unix": np.arange(60) * spacing, "gpu0_power_w": 300.0})
    _, covers = energy.one_gpu_energy_j(frame, 0, 5.0, 40.0)
    assert covers.startswith("ESTIMATE") is estimate


@pytest.mark.parametrize(("power_w", "flagged"), [(90.0, False), (90.0 - BELOW, True)])
def test_counter_and_integrated_power_apart_by_more_than_the_tolerance(power_w: float, flagged: bool) -> None:
    assert energy.CROSS_CHECK_TOLERANCE == (100.0 - 90.0) / 100.0  # the counter reads 100 W
    found = _counter_energy(np.arange(0.0, 101.0), (0.0, 100.0), gpu0_power_w=power_w)
    assert any("differ by" in c for c in found.checks) is flagged


@pytest.mark.parametrize(
    ("watts", "ignored"), [(energy.MIN_VALID_W, False), (energy.MIN_VALID_W - BELOW, True)]
)
def test_a_source_averaging_under_the_minimum_is_ignored(watts: float, ignored: bool) -> None:
    found = _counter_energy(np.arange(0.0, 51.0), (0.0, 50.0), watts=watts)
    assert any("stuck or not supported" in c for c in found.checks) is ignored
    assert (found.gpu_j is None) is ignored


@pytest.mark.parametrize(
    ("watts", "ignored"), [(energy.MAX_BOARD_W, False), (energy.MAX_BOARD_W + BELOW, True)]
)
def test_a_gpu_source_averaging_over_what_any_board_draws_is_ignored(watts: float, ignored: bool) -> None:
    found = _counter_energy(np.arange(0.0, 51.0), (0.0, 50.0), watts=watts)
    assert any("more than any GPU board draws" in c for c in found.checks) is ignored
    assert (found.gpu_j is None) is ignored


@pytest.mark.parametrize(("factor", "ignored"), [(energy.POWER_LIMIT_SLACK, False),
                                                 (energy.POWER_LIMIT_SLACK + BELOW, True)])  # fmt: skip
def test_a_gpu_source_averaging_over_the_slack_times_its_power_limit_is_ignored(
    factor: float, ignored: bool
) -> None:
    found = _counter_energy(np.arange(0.0, 51.0), (0.0, 50.0), watts=400.0 * factor, gpu0_power_limit_w=400.0)
    assert any("1.5 × its 400 W power limit: ignored (a wrong unit?)" in c for c in found.checks) is ignored
    assert (found.gpu_j is None) is ignored


def test_an_energy_counter_in_millijoules_gives_way_to_integrated_power() -> None:
    times = np.arange(0.0, 61.0)
    frame = pd.DataFrame({"time_unix": times, "gpu0_energy_j": 300_000.0 * times, "gpu0_power_w": 300.0,
                          "gpu0_power_limit_w": 700.0})  # fmt: skip
    found = energy.energy_in(frame, (0.0, 60.0), [0], None, 0.3, is_gpu_run=True, nominal_interval_s=1.0)
    assert found.gpu_j == pytest.approx(300.0 * 60.0)
    assert energy.GPU_POWER.split(" (")[1] in found.gpu_covers
    assert not any("differ by" in c for c in found.checks)


# Sessions, stability and the steady rate (sizing.analysis.sessions, sizing.analysis.runchecks)


def _log(intervals_s: list[float], steps: list[float] | None = None) -> pd.DataFrame:
    times = np.cumsum([0.0, *intervals_s])
    step = np.arange(1.0, times.size + 1) if steps is None else np.cumsum([1.0, *steps])
    return pd.DataFrame({"time_unix": 1_795_000_000.0 + times, "step": step})


@pytest.mark.parametrize(
    ("row_s", "pause_s", "resumed"),
    [
        (1.0, ss.GAP_MIN_S, False),  # 20 rows' worth is less than GAP_MIN_S: the minimum decides
        (1.0, ss.GAP_MIN_S + BELOW, True),
        (2.0, ss.GAP_FACTOR * 2.0, False),  # 20 × 2 s is more than GAP_MIN_S: the factor decides
        (2.0, ss.GAP_FACTOR * 2.0 + BELOW, True),
    ],
)
def test_a_pause_starts_a_session_beyond_its_limit(row_s: float, pause_s: float, resumed: bool) -> None:
    rows = _log([row_s] * 20 + [pause_s] + [row_s] * 20)
    assert ss.session_starts(rows) == ([0, 21] if resumed else [0])


@pytest.mark.parametrize(("jump", "resumed"), [(ss.STEP_JUMP_FACTOR, False), (ss.STEP_JUMP_FACTOR + 1, True)])
def test_a_step_jump_starts_a_session_beyond_its_factor(jump: float, resumed: bool) -> None:
    rows = _log([1.0] * 40, [1.0] * 20 + [jump] + [1.0] * 19)
    assert ss.session_starts(rows) == ([0, 21] if resumed else [0])


@pytest.mark.parametrize(
    ("rows", "batches"),
    [(2 * ss.MIN_ROWS_PER_BATCH - 1, 0), (2 * ss.MIN_ROWS_PER_BATCH, 2),
     (ss.BATCHES * ss.MIN_ROWS_PER_BATCH - 1, ss.BATCHES - 1),
     (ss.BATCHES * ss.MIN_ROWS_PER_BATCH, ss.BATCHES), (ss.BATCHES * ss.MIN_ROWS_PER_BATCH * 3, ss.BATCHES)],
)  # fmt: skip
def test_batch_means_need_enough_rows_and_stop_at_the_most_batches(rows: int, batches: int) -> None:
    steady = ss.Steady(np.ones(rows), np.ones(rows), 1, 0.0, None, 0)
    assert len(ss.batch_rates(steady)) == batches


@pytest.mark.parametrize(
    ("slowest_s", "paused"), [(ss.PAUSE_FACTOR, True), (np.nextafter(ss.PAUSE_FACTOR, 0), False)]
)
def test_a_pause_is_a_step_at_least_the_pause_factor_slower_than_the_median(
    slowest_s: float, paused: bool
) -> None:
    durations = np.array([1.0] * 40 + [slowest_s] + [1.0] * 40)
    found = ss.pauses(ss.Steady(durations, np.ones(durations.size), 1, 0.0, None, 0))
    assert (found is not None and found.count == 1) is paused


@pytest.mark.parametrize(("rows", "said"), [(80, True), (81, False)])
def test_pauses_are_said_from_the_pause_share_of_the_steady_time(rows: int, said: bool) -> None:
    """One 10 s step among `rows` of 1 s: it held 9 s past the median pace, of 90 s (exactly the share) or
    91 s."""
    assert ss.PAUSE_SHARE == 0.1 and ss.PAUSE_FACTOR == 10.0
    durations = np.array([1.0] * (rows // 2) + [10.0] + [1.0] * (rows - rows // 2))
    found = ss.pauses(ss.Steady(durations, np.ones(durations.size), 1, 0.0, None, 0))
    assert found is not None and found.said() is said
    assert found.steps_per_s_without == pytest.approx(1.0)  # every step at the median pace of 1 s


def test_a_gpu_runs_loss_read_holds_its_strides_wait_and_is_no_pause() -> None:
    """Rows between two loss reads carry queueing time only and the read's row the wait: per stride, not a
    pause; the same log judged row by row would be nothing but pauses."""
    durations = np.tile([0.001] * 9 + [0.3], 30)
    steady = ss.Steady(durations, np.ones(durations.size), 1, 0.0, None, 0)
    assert ss.pauses(steady, stride=10) is None
    assert ss.pauses(steady).said()


@pytest.fixture(scope="module")
def gpu_rate():
    run = reference_gpu()
    return throughput(run.training, run.training_info)


@pytest.mark.parametrize(
    ("last", "warned"), [(21.0, False), (19.0, False), (np.nextafter(21.0, np.inf), True)]
)
def test_drift_beyond_the_warning_fraction_is_warned(gpu_rate, last: float, warned: bool) -> None:
    assert ss.DRIFT_WARN_FRACTION == 1.0 / 20.0  # the first third at 20 steps/s, the last at 21 or 19
    rate = replace(gpu_rate, first_third_steps_per_s=20.0, last_third_steps_per_s=last)
    assert any("not stationary" in w for w in runchecks.rate_problems("r", rate, {})) is warned


@pytest.mark.parametrize(("steps_per_s", "warned"), [(21.0, False), (np.nextafter(21.0, np.inf), True)])
def test_a_rate_beyond_the_mismatch_fraction_of_training_json_is_warned(
    gpu_rate, steps_per_s: float, warned: bool
) -> None:
    assert runchecks.RATE_MISMATCH_FRACTION == 1.0 / 20.0  # training.json says 20 steps/s
    rate = replace(gpu_rate, steps_per_s=steps_per_s, first_third_steps_per_s=None)
    found = runchecks.rate_problems("r", rate, {"steady_steps_per_s": 20.0})
    assert any("differs from training.json" in w for w in found) is warned


# Repeats that disagree (sizing.analysis.speedup)


@pytest.fixture(scope="module")
def gpu_analysis():
    return analyse_run(reference_gpu(), Prices(), T)


def _repeat(a, run_id: str, rate: float, ci: tuple[float, float] | None = None):
    found = replace(a.throughput, examples_per_s=rate, steps_per_s=rate, steps_per_s_ci95=ci)
    return replace(a, run_id=run_id, throughput=found)


def test_repeats_disagree_beyond_the_fraction_or_when_their_intervals_part(gpu_analysis) -> None:
    edge = 10.0 * (1 + sp.REPEATS_DISAGREE_FRACTION)
    assert sp.repeats_disagree([_repeat(gpu_analysis, "a", 10.0), _repeat(gpu_analysis, "b", edge)]) == ""
    apart = [_repeat(gpu_analysis, "a", 10.0), _repeat(gpu_analysis, "b", np.nextafter(edge, np.inf))]
    assert sp.repeats_disagree(apart).startswith("repeats disagree: not the same conditions")
    touching = [_repeat(gpu_analysis, "a", 9.5, (9.0, 10.0)), _repeat(gpu_analysis, "b", 10.5, (10.0, 11.0))]
    assert sp.repeats_disagree(touching) == ""
    parted = [_repeat(gpu_analysis, "a", 9.5, (9.0, 10.0)),
              _repeat(gpu_analysis, "b", 10.5, (np.nextafter(10.0, np.inf), 11.0))]  # fmt: skip
    assert "intervals that do not overlap" in sp.repeats_disagree(parted)


# Break-even and scaling payback (sizing.analysis.money, sizing.analysis.scaling)

LIFE_H = 3 * 8760.0


@pytest.mark.parametrize(
    ("amount", "speedup", "energy_saving", "value", "verdict"),
    [
        (LIFE_H, 2.0, 0.0, 1.0, money.PAYS_BACK),  # exactly the life's hours
        (np.nextafter(LIFE_H, np.inf), 2.0, 0.0, 1.0, money.BEYOND_LIFE),
        (1000.0, 1.0, 0.0, 1.0, money.NEVER),  # saves exactly nothing
        (1000.0, 1.0, 1e-6, 1.0, money.BEYOND_LIFE),  # saves a little
        (0.0, 1.0, 1e-6, 1.0, money.PAYS_BACK),  # costs nothing extra and saves
        (0.0, 1.0, 0.0, 1.0, money.NEVER),  # costs nothing extra, saves nothing
        (1000.0, 1.0, -1.0, None, money.NEVER),  # no value of time: as fast, costs more energy
        (1000.0, np.nextafter(1.0, np.inf), -1.0, None, money.CANNOT_TELL),  # faster: time not valued
        (1000.0, 2.0, None, None, money.CANNOT_TELL),  # neither a value of time nor energy
    ],
)
def test_a_payback_at_each_boundary(
    amount: float, speedup: float, energy_saving: float | None, value: float | None, verdict: str
) -> None:
    assert money.payback(amount, speedup, energy_saving, value, LIFE_H).verdict == verdict


def test_a_step_that_costs_nothing_extra_pays_back_at_once_bound_or_not() -> None:
    """Without a value of time the hours are a bound ("at most"), except at no extra price: at once."""
    assert money.payback(0.0, 2.0, 1.0, None, LIFE_H) == money.Payback(0.0, money.PAYS_BACK)
    assert money.payback(1.0, 2.0, 1.0, None, LIFE_H) == money.Payback(1.0, money.PAYS_BACK, "at most")


def test_break_even_within_the_life_is_at_most_the_lifes_hours() -> None:
    gpu, cpu = money.HardwarePrice(None, LIFE_H, ()), money.HardwarePrice(None, 0.0, ())
    prices = Prices(value_per_hour=1.0, amortise_years=3.0)
    assert money.break_even(2.0, gpu, cpu, "cpu", 0.0, prices).hours == LIFE_H
    dearer = money.HardwarePrice(None, np.nextafter(LIFE_H, np.inf), ())
    beyond = money.break_even(2.0, dearer, cpu, "cpu", 0.0, prices)
    assert beyond.hours is None and beyond.reason.startswith("does not pay back within the 3-year life")


def test_without_a_value_of_time_a_faster_step_is_never_called_never() -> None:
    """Issue 35: a 1.8× second GPU that costs more energy per example, with no --value-per-hour."""
    from test_sizing_scaling import PRICES, gpu_sweep_run

    from sizing import ReportSettings, build_report

    for value, verdict in ((None, money.CANNOT_TELL), (0.0, money.NEVER)):
        report = build_report([gpu_sweep_run(1), gpu_sweep_run(2)],
                              ReportSettings(prices=replace(PRICES, value_per_hour=value)))  # fmt: skip
        (series,) = next(s for s in report.sections if s.key == "scaling").data["series"]
        step = series["rows"][1]
        assert step["payback_verdict"] == verdict and step["never_pays_back"] is (verdict == money.NEVER)
        assert series["largest_count_paying_back"] == (None if value is None else 1)


# A loss that rose (sizing.analysis.runchecks) and cells no reading can hold (sizing.analysis.validate)


@pytest.mark.parametrize(("last", "rose"), [(1.25, False), (np.nextafter(1.25, np.inf), True)])
def test_a_loss_that_rose_past_the_factor_is_a_caveat(last: float, rose: bool) -> None:
    assert runchecks.LOSS_ROSE_FACTOR == 1.25  # the first 20 reads at 1.0, the last 20 at 1.25 or just above
    frame = training_frame(0.0, [0.1] * 40, [1.0] * 20 + [last] * 20)
    found = runchecks.loss_rose(frame)
    assert (found is not None) is rose
    if rose:
        assert found.startswith("its loss rose: the last 20 loss reads average 1.25, more than 1.25×")


def test_a_loss_rose_compares_tenths_and_never_a_loss_that_can_be_negative() -> None:
    falling = np.linspace(2.0, 0.5, 400)
    assert runchecks.loss_rose(training_frame(0.0, [0.1] * 400, list(falling))) is None
    rising = training_frame(0.0, [0.1] * 400, list(falling[::-1]))
    assert "the last 40 loss reads" in runchecks.loss_rose(rising)  # a tenth of 400
    negative = [-1.0] * 20 + [5.0] * 20  # a log-likelihood: no ratio compares it
    assert runchecks.loss_rose(training_frame(0.0, [0.1] * 40, negative)) is None
    assert runchecks.loss_rose(training_frame(0.0, [0.1] * 39, [1.0] * 19 + [9.0] * 20)) is None  # too few


def test_cells_no_reading_can_hold_read_as_empty_at_their_bounds() -> None:
    assert validate.GPU_PCT_MAX == 101.0
    total = 80 * 2**30
    frame = pd.DataFrame({
        "time_unix": [1.0, 2.0, 3.0],
        "gpu0_util_pct": [101.0, np.nextafter(101.0, np.inf), -1.0],
        "gpu0_mem_used_bytes": [float(total), total + 1.0, 2.0**64 - 1],
        "proc_cpu_pct": [1599.0, 250.0, -0.5],  # a process's share of every core may pass 100
        "gpu0_temp_c": [-5.0, 40.0, 40.0],  # not a unit that cannot go below 0
    })  # fmt: skip
    cleaned, warning = validate.impossible_cells(frame, {0: float(total)})
    assert cleaned["gpu0_util_pct"].tolist()[0] == 101.0 and cleaned["gpu0_util_pct"].isna().tolist()[1:] == [
        True, True
    ]  # fmt: skip
    assert cleaned["gpu0_mem_used_bytes"].isna().tolist() == [False, True, True]
    assert cleaned["proc_cpu_pct"].isna().tolist() == [False, False, True]
    assert cleaned["gpu0_temp_c"].tolist() == [-5.0, 40.0, 40.0]
    assert warning == (
        "telemetry.csv: cells no reading can hold read as empty (gpu0_util_pct: 1 below 0, 1 above 101 %; "
        "gpu0_mem_used_bytes: 2 above the GPU's 80 GiB; proc_cpu_pct: 1 below 0)"
    )
    same, none = validate.impossible_cells(cleaned, {0: float(total)})
    assert none is None and same is cleaned
    unknown_total, _ = validate.impossible_cells(frame[["time_unix", "gpu0_mem_used_bytes"]], {})
    assert unknown_total["gpu0_mem_used_bytes"].isna().tolist() == [False, False, True]  # 2^64 − 1: a blank


def test_a_counters_blank_value_reads_as_empty_at_two_to_the_47() -> None:
    """DCGM's blank FP64 is 2^47 and its blank INT64 near 2^63; a reading just below 2^47 is kept."""
    assert validate.BLANK_MIN == 2.0**47
    frame = pd.DataFrame({
        "time_unix": [1.0, 2.0, 3.0],
        "gpu0_power_w": [np.nextafter(2.0**47, 0.0), 2.0**47, 9.223372036854775e18],
        "load1": [2.0**47, 1.0, 1.0],
    })  # fmt: skip
    cleaned, warning = validate.impossible_cells(frame, {})
    assert cleaned["gpu0_power_w"].isna().tolist() == [False, True, True]
    assert cleaned["load1"].isna().tolist() == [True, False, False]
    assert "gpu0_power_w: 2 at a counter's blank value (≥ 2^47)" in warning


def test_a_clock_or_temperature_past_what_any_can_read_is_an_int32_blank() -> None:
    """DCGM's INT32 blank (2^31 − 16) in a clock; a temperature in kelvin (313) or millidegrees (40,000,
    Linux hwmon's unit). 100 GHz and 150 °C are kept."""
    assert [u[:2] for u in validate.UNIT_CEILINGS] == [("_mhz", 1e5), ("_c", 150.0)]
    frame = pd.DataFrame({
        "time_unix": [1.0, 2.0, 3.0],
        "gpu0_sm_clock_mhz": [1e5, 2147483632.0, 1980.0],
        "gpu0_temp_c": [150.0, np.nextafter(150.0, np.inf), 313.15],
        "cpu_temp_c": [40.0, 40000.0, 41.0],
    })  # fmt: skip
    cleaned, warning = validate.impossible_cells(frame, {})
    assert cleaned["gpu0_sm_clock_mhz"].isna().tolist() == [False, True, False]
    assert cleaned["gpu0_temp_c"].isna().tolist() == [False, True, True]
    assert cleaned["cpu_temp_c"].isna().tolist() == [False, True, False]
    assert "gpu0_sm_clock_mhz: 1 above 100,000" in warning
    assert "gpu0_temp_c: 2 above 150 °C: kelvin or millidegrees?" in warning


@pytest.mark.parametrize(("kept", "said"), [(5, False), (4, True), (1, True)])
def test_a_verdict_on_too_few_samples_is_a_guess(kept: int, said: bool) -> None:
    """reference_gpu's steady window (S+21.9 … S+39.9) keeps `kept` of its 18 one-second samples."""
    assert runchecks.MIN_VERDICT_SAMPLES == 5
    run = reference_gpu()
    times = run.telemetry["time_unix"] - GPU_TRAIN_START
    inside = np.flatnonzero((times >= 21.9) & (times <= 39.9))
    dropped = run.telemetry.drop(run.telemetry.index[inside[kept:]])
    a = analyse_run(replace(run, telemetry=dropped.reset_index(drop=True)), Prices(), Thresholds())
    found = [c for c in a.caveats if "its verdict rests on" in c]
    assert bool(found) is said
    if said:
        assert found == [f"ref-gpu: its verdict rests on {kept} telemetry sample{'s' * (kept != 1)} in the "
                         "measurement window, fewer than 5: what limited it is a guess"]  # fmt: skip


@pytest.mark.parametrize(("late", "said"), [(0.0, False), (BELOW, True)])
def test_telemetry_covering_less_than_the_complete_share_of_the_window_is_a_caveat(
    late: float, said: bool
) -> None:
    """1 s samples over (0, 100) with 41-44 missing: 40 → 45 is 5 s, past 3 intervals, so 95 s are covered."""
    assert coverage.COMPLETE_COVERAGE == 0.95
    times = np.array([t for t in range(101) if not 41 <= t <= 44], dtype=float)
    times[times == 45.0] += late  # the gap just past 5 s: 94.99 s covered
    found = runchecks.telemetry_gaps(times, (0.0, 100.0), 1.0)
    assert (found is not None) is said
    if said:
        assert found == ("telemetry covers 95% of its measurement window (a gap of up to 5 s: the collector "
                         "paused, or rows were lost): its verdict reads the rest")  # fmt: skip
    assert runchecks.telemetry_gaps(np.arange(0.0, 101.0), (0.0, 100.0), 1.0) is None
    assert runchecks.telemetry_gaps(times[:4], (0.0, 100.0), 1.0) is None  # too few: few_samples says it


def test_a_gap_in_a_runs_telemetry_is_a_caveat_of_its_verdict() -> None:
    run = reference_gpu()
    times = run.telemetry["time_unix"] - GPU_TRAIN_START
    paused = run.telemetry[~((times > 25) & (times < 32))].reset_index(drop=True)
    a = analyse_run(replace(run, telemetry=paused), Prices(), Thresholds())
    assert [c for c in a.caveats if "telemetry covers" in c] == [
        "ref-gpu: telemetry covers 61% of its measurement window (a gap of up to 7 s: the collector paused, "
        "or rows were lost): its verdict reads the rest"
    ]
    assert not [c for c in analyse_run(run, Prices(), Thresholds()).caveats if "telemetry covers" in c]
