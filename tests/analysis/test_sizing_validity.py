"""Issue 18 items 3, 4 and 5: one crafted case per rule, each failing on the code before the rule, each
with a control that shows the assertion can go the other way."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from sizingfixtures import (
    GPU_TRAIN_START,
    reference_cpu,
    reference_gpu,
    renamed,
    repeat_of,
    training_frame,
    with_info,
    with_system,
    write_run,
)

from sizing import ReportSettings, build_report, to_json
from sizing.analysis.throughput import throughput, time_to_steps
from sizing.cli import main


def report_of(*runs, **settings):
    return build_report(list(runs), ReportSettings(**settings))


def gpu_line(report) -> str:
    return next(line for line in report.headline if line.startswith("GPU "))


# Item 3: like-for-like, honestly unknown.


def test_a_field_unknown_on_both_sides_is_not_like_for_like() -> None:
    """Neither run records its backbone: unknown never equals unknown."""
    report = report_of(with_info(reference_cpu(), backbone=None), with_info(reference_gpu(), backbone=None))
    (comparison,) = to_json(report)["comparisons"]
    assert comparison["like_for_like"] is False and comparison["like_for_like_status"] == "unknown"
    assert comparison["unknown_workload_fields"] == "backbone"
    assert "not known to be like-for-like (backbone unknown)" in gpu_line(report)
    assert "20.00×" in gpu_line(report)  # the speedup is still shown, marked in the same line
    assert any("not known to be like-for-like" in w for w in report.warnings)
    control = report_of(reference_cpu(), reference_gpu())
    assert to_json(control)["comparisons"][0]["like_for_like_status"] == "yes"
    assert "like-for-like" not in gpu_line(control)


def test_runs_with_an_unknown_field_are_never_averaged_as_repeats() -> None:
    two = (reference_cpu("cpu-0"), repeat_of(reference_cpu(), "cpu-1"))
    runs = [with_info(run, preset=None) for run in two]
    groups = report_of(*runs, reference_gpu()).context.groups
    assert sorted(g.run_ids for g in groups) == [("cpu-0",), ("cpu-1",), ("ref-gpu",)]
    repeats = report_of(reference_cpu("a"), repeat_of(reference_cpu(), "b")).context.groups
    assert [g.run_ids for g in repeats] == [("a", "b")]
    bare = replace(reference_cpu(), meta={})
    no_meta = [renamed(bare, "bare-0"), repeat_of(bare, "bare-1")]
    assert len(report_of(*no_meta).context.groups) == 2  # hardware unknown on both: not repeats


def test_the_real_dtype_is_kept_and_shown_for_each_side() -> None:
    """float16 on the GPU against bfloat16 on the CPU is not one "mixed" class."""
    report = report_of(
        with_info(reference_cpu(), precision="bfloat16"), with_info(reference_gpu(), precision="float16")
    )
    (comparison,) = to_json(report)["comparisons"]
    assert comparison["like_for_like"] is False
    assert "precision float16 vs bfloat16" in comparison["differences"]
    assert report.headline[0].startswith("Baseline: CPU") and "/bfloat16" in report.headline[0]
    assert "/float16" in gpu_line(report) and "NOT like-for-like (precision float16 vs bfloat16)" in gpu_line(
        report
    )


def test_float16_on_a_cpu_is_not_float16_on_a_gpu() -> None:
    report = report_of(
        with_info(reference_cpu(), precision="float16"), with_info(reference_gpu(), precision="float16")
    )
    (comparison,) = to_json(report)["comparisons"]
    assert comparison["like_for_like"] is False
    assert "precision float16 vs float16 (emulated on a CPU)" in comparison["differences"]
    assert "its float16 is emulated on a CPU" in report.headline[0]


# Item 4: a weak baseline is named in the headline.


def _cpu_with(**columns: object):
    run = reference_cpu()
    telemetry = run.telemetry.copy()
    for name, value in columns.items():
        telemetry[name] = value
    return replace(run, telemetry=telemetry)


@pytest.mark.parametrize(
    ("cpu_run", "reason"),
    [
        (with_system(_cpu_with(proc_cpu_pct=200.0, cpu_util_pct=3.0), cpu_cores_logical=64),
         "its training used 2.0 of 64 logical CPUs"),
        (with_system(_cpu_with(cpu_util_pct=30.0), cpu_cores_logical=64),
         "the host was 30 % busy: under half of its 64 logical CPUs"),
        (_cpu_with(cpu_steal_pct=12.0), "hypervisor steal 12.0 % > 5 %"),
        (with_system(reference_cpu(), cgroup_cpu_limit_cpus=2.0), "a cgroup CPU quota allowed 2 CPUs of 8"),
        (with_system(reference_cpu(), cpu_cores_logical=2, virtual_machine=True),
         "a small VM (2 logical CPUs)"),
    ],
)  # fmt: skip
def test_a_weak_baseline_is_named_in_the_headline(cpu_run, reason: str) -> None:
    report = report_of(cpu_run, reference_gpu())
    assert "WEAK BASELINE" in report.headline[0] and reason in report.headline[0]
    assert "against a WEAK baseline" in gpu_line(report) and reason in gpu_line(report)
    (comparison,) = to_json(report)["comparisons"]
    assert comparison["weak_baseline"] is True and reason in comparison["weak_baseline_reasons"]
    assert any("is weak" in w and reason in w for w in report.warnings)


def test_a_full_baseline_is_not_called_weak() -> None:
    report = report_of(_cpu_with(proc_cpu_pct=700.0, cpu_steal_pct=1.0), reference_gpu())
    assert "WEAK" not in report.headline[0] and "WEAK" not in gpu_line(report)
    assert to_json(report)["comparisons"][0]["weak_baseline"] is False


def test_a_host_bound_gpu_run_is_said_in_its_headline_line() -> None:
    gpu = reference_gpu()
    telemetry = gpu.telemetry.assign(gpu0_util_pct=60.0, cpu_util_pct=92.0)
    report = report_of(reference_cpu(), replace(gpu, telemetry=telemetry))
    assert "the GPU run was host-bound" in gpu_line(report)
    assert "host-bound" not in gpu_line(report_of(reference_cpu(), gpu))


# Item 5: valid runs only.


def _slower(run, run_id: str, factor: float):
    training = run.training.copy()
    start = training["time_unix"].iloc[0] - training["elapsed_s"].iloc[0]
    training["elapsed_s"] *= factor
    training["time_unix"] = start + training["elapsed_s"]
    return renamed(replace(run, training=training), run_id)


def test_a_failed_run_is_not_averaged_in_as_a_repeat() -> None:
    good = [reference_cpu("c1"), _slower(reference_cpu(), "c2", 1.25)]
    failed = with_info(
        _slower(reference_cpu(), "c3", 10.0), status="failed", error="ResourceExhaustedError: OOM"
    )
    report = report_of(*good, failed, reference_gpu())
    base = report.context.baseline
    assert base.run_ids == ("c1", "c2")
    assert base.examples_per_s.mean == pytest.approx((1.0 + 1 / 1.25) / 2)
    assert any("c3 (training failed: ResourceExhaustedError: OOM)" in line for line in report.headline)
    assert any(w.startswith("c3: left out of the averages") for w in report.warnings)
    runs = {r["run_id"]: r for r in to_json(report)["runs"]}
    assert runs["c3"]["in_averages"] is False and runs["c3"]["complete"] is False
    assert runs["c1"]["in_averages"] is True
    table = next(s for s in report.sections if s.key == "validity").tables[0]
    shown_apart = {row[0]: row for row in table.rows}
    assert shown_apart["c3"][1:3] == ("NO: training failed: ResourceExhaustedError: OOM", "no (shown apart)")
    assert shown_apart["c1"][1:3] == ("yes", "yes")
    included = report_of(*good, failed, reference_gpu(), include_incomplete=True)
    assert included.context.baseline.run_ids == ("c1", "c2", "c3")
    assert "c3 is incomplete" in gpu_line(included)


def test_an_interrupted_collector_marks_the_run_incomplete() -> None:
    run = with_info(reference_cpu("cut"), status=None)
    run = replace(run, meta={**run.meta, "end_reason": "interrupted", "exit_code": -2})
    report = report_of(run, reference_cpu("whole"))
    assert report.context.baseline.run_ids == ("whole",)
    assert report.context.left_out[0].incomplete == "the collector was interrupted (exit code -2)"


def resumed_gpu():
    """Session 1: the reference's 200 steps. Then 600 s later a resumed session restores step 150 and
    trains 100 more steps: 20 s for its first, 0.1 s each after. Every steady step takes 0.1 s."""
    run = reference_gpu()
    first = run.training
    restart = float(first["time_unix"].iloc[-1]) + 600.0
    second = training_frame(restart, [20.0] + [0.1] * 99, [3.0] * 100)
    second["step"] += 150
    return replace(run, training=pd.concat([first, second], ignore_index=True))


def test_a_resumed_run_counts_whole_sessions_never_the_gap() -> None:
    run = resumed_gpu()
    rate = throughput(run.training, run.training_info)
    assert rate.sessions == 2 and rate.session_gaps_s == pytest.approx(600.0 + 20.0)
    assert rate.steps_per_s == pytest.approx(10.0)  # (180 + 80) steps / (18 + 8) s, warm-up 20 each
    assert rate.steady_steps == 180 + 80
    # time to step 250: 39.9 s of session 1, then 20 + 99 × 0.1 s of session 2; the gap is not training
    reached = time_to_steps(run.training, run.training_info, 250, rate.steps_per_s)
    assert reached.seconds == pytest.approx(69.8)
    report = report_of(reference_cpu(), run)
    assert "ref-gpu was resumed or paused (2 sessions)" in gpu_line(report)
    assert "20.00×" in gpu_line(report)


def test_a_rate_far_from_training_json_is_warned() -> None:
    report = report_of(reference_cpu(), with_info(reference_gpu(), steady_steps_per_s=8.0))
    assert any("differs from training.json's steady_steps_per_s 8.000 by 25%" in w for w in report.warnings)
    assert "25% off its training.json figure" in gpu_line(report)
    close = report_of(reference_cpu(), with_info(reference_gpu(), steady_steps_per_s=9.8))
    assert not any("differs from training.json" in w for w in close.warnings)


def test_a_rate_on_too_few_steps_for_an_interval_is_in_doubt() -> None:
    """A step log cut short after a handful of steps still gives a rate, but none of its own spread: the
    Decision says so beside the speedup, and the control with its whole log does not."""
    gpu = reference_gpu()
    short = replace(gpu, training=gpu.training.head(6).reset_index(drop=True))
    report = report_of(reference_cpu(), short)
    (warning,) = [w for w in report.warnings if "too few for a within-run interval" in w]
    assert warning == "ref-gpu: steady rate rests on 1 step (0.10 s): too few for a within-run interval"
    assert any("ref-gpu's rate rests on " in c for c in report.decision.caveats)
    whole = report_of(reference_cpu(), gpu)
    assert not any("too few for a within-run interval" in w for w in whole.warnings)


def _noisy(run, run_id: str, seed: int, slow_down_last_third: float = 1.0):
    rng = np.random.default_rng(seed)
    training = run.training.copy()
    steps = training["step_time_s"].to_numpy(copy=True)
    steps[1:] *= rng.uniform(0.9, 1.1, size=steps.size - 1)
    steps[2 * steps.size // 3 :] *= slow_down_last_third
    start = training["time_unix"].iloc[0] - training["elapsed_s"].iloc[0]
    training["elapsed_s"] = np.cumsum(steps)
    training["time_unix"] = start + training["elapsed_s"]
    training["step_time_s"] = steps
    return renamed(replace(run, training=training), run_id)


def test_one_run_per_side_gets_a_within_run_interval_and_a_stationarity_check() -> None:
    cpu, gpu = _noisy(reference_cpu(), "cpu", 1), _noisy(reference_gpu(), "gpu", 2)
    report = report_of(cpu, gpu)
    data = to_json(report)
    (comparison,) = data["comparisons"]
    low, high = comparison["speedup_within_run_ci95_low"], comparison["speedup_within_run_ci95_high"]
    assert low < comparison["speedup"] < high and high - low < 0.3 * comparison["speedup"]
    assert "within-run 95 % interval" in gpu_line(report)
    run = {r["run_id"]: r for r in data["runs"]}["gpu"]
    assert run["steps_per_s_ci95_low"] < run["steps_per_s"] < run["steps_per_s_ci95_high"]
    assert abs(run["steady_drift_pct"]) < 5 and "drifted" not in gpu_line(report)
    drifting = report_of(cpu, _noisy(reference_gpu(), "gpu", 2, slow_down_last_third=1.3))
    assert "gpu's steps/s drifted -2" in gpu_line(drifting)
    assert any("gpu: not stationary" in w for w in drifting.warnings)


def test_batch_means_cut_only_between_loss_reads() -> None:
    """A GPU run reads its losses every 10 steps: 9 rows of 1 ms queueing, then one row with the wait.
    Batches cut mid-group would swing between 1 and 2 reads; cut at reads they all agree."""
    gpu = reference_gpu()
    step_times = [20.0] + [0.001 if k % 10 else 0.991 for k in range(1, 400)]
    training = training_frame(GPU_TRAIN_START, step_times, [3.0] * 400)
    info = {**gpu.training_info, "loss_read_every_steps": 10, "warmup_steps_excluded": 10}
    rate = throughput(training, info)
    assert rate.steps_per_s == pytest.approx(10.0, rel=0.01)
    assert (
        len(rate.batch_steps_per_s) == 7 and max(rate.batch_steps_per_s) - min(rate.batch_steps_per_s) < 0.05
    )
    low, high = rate.steps_per_s_ci95
    assert high - low < 0.1
    unaligned = throughput(training, {**info, "loss_read_every_steps": None})
    assert max(unaligned.batch_steps_per_s) - min(unaligned.batch_steps_per_s) > 0.5


def test_include_incomplete_from_the_command_line(tmp_path) -> None:
    """As the README shows it: `python -m sizing RUN... --out report.json [--include-incomplete]`."""
    for run in (reference_cpu("c1"), with_info(reference_cpu("c2"), status="failed"), reference_gpu()):
        write_run(tmp_path / "runs", run)
    out = tmp_path / "r.json"
    for flags, averaged in (([], False), (["--include-incomplete"], True)):
        assert main(["c1", "c2", "ref-gpu", "--data-dir", str(tmp_path), "--out", str(out), *flags]) == 0
        runs = {r["run_id"]: r for r in json.loads(out.read_text())["runs"]}
        assert runs["c2"]["in_averages"] is averaged and runs["c2"]["complete"] is False


def test_an_incomplete_baseline_named_by_hand_is_not_used_silently() -> None:
    failed = with_info(reference_cpu("cut"), status="interrupted")
    report = report_of(failed, reference_cpu("whole"), reference_gpu(), baseline="cut")
    assert report.context.baseline.run_ids == ("whole",)
    assert any("cut: left out" in w and "picked without it" in w for w in report.warnings)
    assert report_of(failed, reference_cpu("whole"), reference_gpu(), baseline="cut",
                     include_incomplete=True).context.baseline.run_ids == ("cut", "whole")  # fmt: skip


def _faster(run, run_id: str, factor: float):
    """The run's steps `factor` times faster (its step log compressed in time)."""
    training = run.training.copy()
    start = training["time_unix"].iloc[0] - training["elapsed_s"].iloc[0]
    training["elapsed_s"] = training["elapsed_s"] / factor
    training["step_time_s"] = training["step_time_s"] / factor
    training["time_unix"] = start + training["elapsed_s"]
    return renamed(replace(run, training=training), run_id)


def test_a_baseline_whose_repeats_disagree_is_said_with_or_without_a_gpu_option() -> None:
    """The baseline's own disagreement is the baseline's (not pinned on a GPU option's name), and it is
    said where no GPU option is left to carry it."""
    cpus = (reference_cpu(), _faster(reference_cpu(), "cpu-2", 3.0))
    for runs in ((*cpus, reference_gpu()), cpus):
        caveats = report_of(*runs).decision.caveats
        (said,) = [c for c in caveats if "repeats disagree" in c]
        assert said.startswith("The baseline's repeats disagree: not the same conditions (cpu-2 ")
    agreeing = report_of(reference_cpu(), _faster(reference_cpu(), "cpu-2", 1.0), reference_gpu())
    assert not any("repeats disagree" in c for c in agreeing.decision.caveats)


def test_a_run_recorded_for_a_gpu_that_trained_on_the_cpu_is_said() -> None:
    on_cpu = with_info(renamed(reference_gpu(), "gpu-asked"), device_used="CPU", gpu_names=[])
    report = report_of(reference_cpu(), on_cpu)
    said = (
        "gpu-asked was recorded for a GPU (run.json device or training.json device_requested) but trained on "
        "the CPU (training.json device_used): sized as a CPU run, not as a GPU option."
    )
    assert said in report.decision.caveats and report.decision.options == ()
    assert report.decision.lines_without_option == (
        "No GPU run to compare with the baseline: 1 run(s) recorded for a GPU trained on the CPU (see the "
        "caveats).",
    )
    control = report_of(reference_cpu(), reference_gpu()).decision.caveats
    assert not any("trained on the CPU" in c for c in control)


def test_a_step_log_on_a_clock_of_its_own_is_said_and_its_energy_not_guessed() -> None:
    """training.csv 50 min after the collector's recording (another clock, or another run's log; a whole
    number of quarter hours would be a time zone, moved): the verdict reads the whole training window, the
    energy per example is unknown, and both are said."""
    gpu = reference_gpu()
    later = replace(gpu, training=gpu.training.assign(time_unix=gpu.training["time_unix"] + 3000))
    report = report_of(reference_cpu(), later)
    (warning,) = [w for w in report.warnings if "clocks disagree" in w]
    assert warning.startswith("ref-gpu: training.csv's steady steps fall ")
    assert " s after the training the collector recorded" in warning
    assert any("clocks disagree" in c for c in report.decision.caveats)
    assert to_json(report)["runs"][1]["energy_j_per_1k_examples"] is None
    assert not any("clocks disagree" in w for w in report_of(reference_cpu(), gpu).warnings)
