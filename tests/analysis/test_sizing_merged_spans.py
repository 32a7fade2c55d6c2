"""Runs merged from recordings of different spans and intervals (a sysstat day file and the job's nvidia-smi
log): judged over the span their CPU and GPU columns share, the span said, each source covered at its own
interval, an assumed UTC offset a caveat."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sizingfixtures import CPU_TRAIN_START, meta, reference_gpu, telemetry_frame

from sizing import ReportSettings, build_report, to_json
from sizing.analysis import bottleneck, spans
from sizing.analysis import coverage as cov
from sizing.analysis import energy as en
from sizing.analysis.run import analyse_run
from sizing.model import Prices, RunData, Thresholds

H = 3600.0
S = CPU_TRAIN_START
JOB = (S + 2 * H, S + 3 * H)  # the job's hour inside a six-hour sysstat file
ASSUMED = "assumed: this machine's time zone (CET); nvidia-smi writes local time without a zone, give ..."


def merged_run(
    cpu_every_s: float = 600.0,
    cpu_hours: tuple[float, float] = (0.0, 6.0),
    gpu: tuple[float, float] = JOB,
    gpu_every_s: float = 5.0,
    offset_from: str = "--utc-offset",
    run_id: str = "merged",
) -> RunData:
    """sysstat CPU rows every cpu_every_s (95 % busy in the job's hour, 5 % else), merged with an
    nvidia-smi log of the GPU at 40 % and 300 W every gpu_every_s; no step log, no phases."""
    cpu_times = S + np.arange(cpu_hours[0] * H, cpu_hours[1] * H + 1, cpu_every_s)
    busy = (cpu_times >= JOB[0]) & (cpu_times <= JOB[1])
    cpu = pd.DataFrame({"time_unix": cpu_times, "cpu_util_pct": np.where(busy, 95.0, 5.0),
                        "cpu_iowait_pct": 0.5})  # fmt: skip
    gpu_times = np.arange(gpu[0], gpu[1] + 0.1, gpu_every_s)
    log = pd.DataFrame({"time_unix": gpu_times, "gpu0_util_pct": 40.0, "gpu0_power_w": 300.0})
    telemetry = pd.merge(cpu, log, on="time_unix", how="outer").sort_values("time_unix", ignore_index=True)
    telemetry.insert(1, "elapsed_s", telemetry["time_unix"] - S)
    run_meta = {
        **meta(run_id, "gpu", S, gpus=1),
        "interval_s": cpu_every_s,
        "imported_from": {"tool": "sysstat", "file": "/var/log/sysstat/sa23"},
        "merged_from": [
            {
                "tool": "nvidia-smi",
                "file": "/tmp/gpu.csv",
                "interval_s": gpu_every_s,
                "utc_offset": "+01:00",
                "utc_offset_from": offset_from,
            }
        ],
    }
    empty = pd.DataFrame()
    return RunData(run_id, run_meta, {}, {}, telemetry, empty, empty)


def analyse(run: RunData):
    return analyse_run(run, Prices(), Thresholds())


def test_a_sysstat_day_merged_with_the_jobs_gpu_log_is_judged_over_the_hour_both_saw() -> None:
    run = merged_run()
    over_six_hours = bottleneck.verdict("gpu", run.telemetry, [0], [], Thresholds())
    assert over_six_hours.primary == bottleneck.GPU_UNDERUSED  # the mismatched windows' wrong answer
    a = analyse(run)
    assert a.verdict.primary == bottleneck.HOST_BOUND
    assert a.verdict.numbers["cpu_util_pct"] == pytest.approx(95.0)
    span = a.measurement_span
    assert span is not None and span.shared == JOB and span.fraction == pytest.approx(1 / 6)
    assert [(f.family, f.source, f.interval_s) for f in span.families] == [
        ("CPU", "sysstat", 600.0),
        ("GPU", "nvidia-smi", 5.0),
    ]
    (said,) = [w for w in a.warnings if "verdict judged over" in w]
    assert said in a.caveats
    assert "CPU (sysstat, every 600 s" in said and "GPU (nvidia-smi, every 5 s" in said
    assert "1.0 h, 16% of the 6.0 h window" in said
    # The training window is the span both saw, so the GPU's energy covers it (not "covers 17 %").
    assert a.training_energy is not None and a.training_energy.window_s == pytest.approx(H)
    assert a.training_energy.gpu_j == pytest.approx(300.0 * H)


def test_the_report_says_the_span_and_its_sources() -> None:
    data = to_json(build_report([merged_run()], ReportSettings()))
    assert any("verdict judged over" in w and "nvidia-smi" in w for w in data["warnings"])
    (run,) = data["runs"]
    assert run["verdict"] == bottleneck.HOST_BOUND


def test_recordings_that_do_not_overlap_leave_the_host_unknown_not_idle() -> None:
    run = merged_run(cpu_hours=(0.0, 1.0))  # sysstat ended an hour before the job
    a = analyse(run)
    assert a.measurement_span is not None and a.measurement_span.shared is None
    assert a.verdict.numbers["cpu_util_pct"] is None
    assert a.verdict.primary == bottleneck.GPU_UNDERUSED
    assert "not recorded" in " ".join(a.verdict.evidence)
    assert any("do not overlap" in c for c in a.caveats)


def test_one_recording_or_one_span_changes_nothing() -> None:
    a = analyse(reference_gpu())  # the collector's CPU and GPU columns in every row
    assert a.measurement_span is not None and not a.measurement_span.merged
    assert not a.measurement_span.short and a.caveats == ()
    assert not any("verdict judged over" in w for w in a.warnings)
    gpu_only = merged_run()
    gpu_only = RunData("smi", {**gpu_only.meta, "merged_from": []}, {}, {},
                       gpu_only.telemetry.drop(columns=["cpu_util_pct", "cpu_iowait_pct"]),
                       gpu_only.training, gpu_only.phases)  # fmt: skip
    assert analyse(gpu_only).measurement_span is None  # a GPU log alone: one family


def test_a_short_shared_span_is_a_caveat_below_ninety_percent_of_the_window() -> None:
    families = (spans.FamilySpan("CPU", "a", 0.0, 100.0, 1.0), spans.FamilySpan("GPU", "a", 0.0, 100.0, 1.0))
    at = spans.MeasurementSpan(families, (0.0, 100.0), (0.0, 100.0 * spans.SHORT_SPAN_FRACTION))
    below = spans.MeasurementSpan(families, (0.0, 100.0), (0.0, 100.0 * spans.SHORT_SPAN_FRACTION - 0.1))
    assert spans.SHORT_SPAN_FRACTION == 0.9
    assert spans.span_warnings("r", at) == ([], [])  # one source, 90 %: nothing to say
    said, caveats = spans.span_warnings("r", below)
    assert said == caveats and len(said) == 1 and "89% of the" in said[0]
    merged = spans.MeasurementSpan((families[0], spans.FamilySpan("GPU", "b", 0.0, 100.0, 5.0)),
                                   (0.0, 100.0), (0.0, 100.0))  # fmt: skip
    said, caveats = spans.span_warnings("r", merged)
    assert len(said) == 1 and caveats == []  # a merged run says its span, a full one is no caveat


def test_an_assumed_utc_offset_is_a_caveat_a_given_one_is_not() -> None:
    a = analyse(merged_run(offset_from=ASSUMED, cpu_hours=(2.0, 3.0)))
    (caveat,) = a.caveats
    assert caveat.startswith(
        f"merged: {spans.ASSUMED_OFFSET}: the nvidia-smi log gpu.csv was read as UTC+01:00"
    )
    assert caveat in a.warnings
    assert analyse(merged_run(cpu_hours=(2.0, 3.0))).caveats == ()
    alone = {"imported_from": {"tool": "nvidia-smi", "utc_offset": "-05:00", "utc_offset_from": ASSUMED}}
    assert len(spans.time_caveats("x", alone)) == 1
    assert spans.time_caveats("x", {"merged_from": "not a list", "imported_from": 3}) == []


def test_a_5_s_log_merged_into_a_1_s_run_covers_the_run() -> None:
    """1 s CPU rows; GPU power every 5 s: 3 of the log's own intervals, not of the run's rows."""
    frame = telemetry_frame(S, 601, 1.0, cpu_util_pct=50.0)
    frame["gpu0_power_w"] = np.where(np.arange(601) % 5 == 0, 300.0, np.nan)
    energy = en.energy_in(frame, (S, S + 600.0), [0], None, 0.3, True, 1.0)
    assert energy is not None and energy.gpu_missing is None and en.GPU_NOT_REPORTED not in energy.covers
    assert energy.gpu_j == pytest.approx(300.0 * 600.0)
    run = RunData("one-second", {**meta("one-second", "gpu", S, gpus=1)}, {}, {}, frame, pd.DataFrame(),
                  pd.DataFrame())  # fmt: skip
    assert analyse(run).training_energy.gpu_missing is None


@pytest.mark.parametrize(("hole_s", "covered"), [(15.0, True), (15.5, False)])
def test_the_gap_limit_is_three_of_the_sources_own_intervals(hole_s: float, covered: bool) -> None:
    """GPU power every 5 s with one longer hole, inside 1 s CPU rows: a hole up to 3 × 5 s is covered."""
    power_times = np.concatenate([np.arange(0.0, 100.1, 5.0), 100.0 + hole_s + np.arange(0.0, 100.1, 5.0)])
    cpu_times = np.arange(0.0, power_times[-1] + 0.1, 1.0)
    times = np.union1d(cpu_times, power_times)
    frame = pd.DataFrame({"time_unix": S + times, "cpu_util_pct": 50.0,
                          "gpu0_power_w": np.where(np.isin(times, power_times), 200.0, np.nan)})  # fmt: skip
    window = (S, S + float(power_times[-1]))
    energy = en.energy_in(frame, window, [0], None, 0.3, True, 1.0)
    (_, source) = energy.gpus[0]
    assert source.covered_s == pytest.approx(window[1] - window[0] - (0.0 if covered else hole_s))
    assert cov.max_gap_s(S + power_times, 1.0) == cov.MAX_GAP_INTERVALS * 5.0 == 15.0


def test_max_gap_follows_the_readings_and_falls_back_to_the_nominal_interval() -> None:
    assert cov.max_gap_s(np.array([0.0, 2.0, 4.0, 6.0]), 1.0) == 6.0  # its own 2 s, not the run's 1 s
    assert cov.max_gap_s(np.array([0.0, 0.5, 1.0]), 5.0) == 1.5  # a faster log keeps its 0.5 s
    assert cov.max_gap_s(np.array([7.0]), 5.0) == 15.0  # one reading: the nominal interval
    assert cov.max_gap_s(np.array([7.0]), None) == 3.0
    times, values = np.arange(10.0), np.where(np.arange(10) % 3 == 0, 1.0, np.nan)
    assert cov.source_max_gap_s(times, values, 1.0) == 9.0  # only the rows with a reading
