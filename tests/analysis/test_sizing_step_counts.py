"""A step log whose `step` counts something else than the run's steps: a batch index that starts again
each epoch (read as 88 resumed sessions and a file "cut at its head or tail"), or the examples seen (the
rate, the examples per second and the MFU twice too high at batch 2, 32 times at batch 32). Each is read
as the run's steps where its rows say so, and left alone where they do not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_sizing_imperfect_runs import CPU_RUN, EXAMPLES, GPU_RUN, decision_of

from dashboard import runs as dashboard_runs
from sizing.analysis.step_counts import (
    EXAMPLES_ROW_SHARE,
    MAX_STEPS_PER_STEP_TIME,
    MIN_EPOCH_ROWS,
    MIN_TIMED_ROWS,
    MS_RATIO_SHARE,
    ONE_STEP_MAX_RATIO,
    ONE_STEP_MIN_RATIO,
    STEPS_MATCH_SHARE,
    running_steps,
    step_times_in_seconds,
    steps_from_examples,
    steps_outrun_their_times,
)
from sizing.analysis.throughput import throughput

STEP_S, BATCH = 0.25, 2


def step_log(
    steps: list[float], *, gaps: dict[int, float] | None = None, elapsed: bool = True
) -> pd.DataFrame:
    """One row per step, STEP_S apart (plus `gaps`: seconds added before row i), each a batch of BATCH."""
    waits = np.array([STEP_S + (gaps or {}).get(i, 0.0) for i in range(len(steps))])
    times = 1_795_000_000.0 + np.cumsum(waits)
    frame = pd.DataFrame(
        {
            "time_unix": times,
            "step": np.asarray(steps, dtype=float),
            "step_time_s": STEP_S,
            "examples_per_s": BATCH / STEP_S,
        }
    )
    if elapsed:
        frame.insert(1, "elapsed_s", times - times[0] + STEP_S)
    return frame


def left_alone(result: tuple[pd.DataFrame, str | None], log: pd.DataFrame) -> bool:
    return result[0] is log and result[1] is None


def epochs(count: int, per_epoch: int, first: int = 1, every: int = 1) -> list[float]:
    return [float(s) for _ in range(count) for s in range(first, first + per_epoch, every)]


@pytest.mark.parametrize(("first", "every"), [(1, 1), (0, 1), (10, 10)])
def test_a_count_within_each_epoch_reads_as_one_running_count(first: int, every: int) -> None:
    log = step_log(epochs(5, 100, first, every))
    counted, note = running_steps(log)
    assert note is not None and "starts again 4 time(s)" in note
    assert np.all(np.diff(counted["step"]) == every)
    untouched = step_log([float(s) for s in range(first, first + 500, every)])
    assert throughput(counted, {}).steps_per_s == pytest.approx(throughput(untouched, {}).steps_per_s)
    assert throughput(counted, {}).sessions == 1
    assert left_alone(running_steps(counted), counted)  # read once: loading and build_report both apply it


def test_a_row_without_a_step_does_not_hide_the_epochs() -> None:
    """A torn row's empty step cell: the rows with one are still read, the empty one left empty."""
    log = step_log(epochs(3, 100))
    log.loc[150, "step"] = np.nan
    counted, note = running_steps(log)
    assert note is not None and counted["step"].iloc[-1] == 300 and np.isnan(counted["step"].iloc[150])
    examples, info = examples_log(4, 400)
    examples.loc[10, "step"] = np.nan
    counted, note = steps_from_examples(examples, info)
    assert note is not None and counted["step"].iloc[-1] == 400


def test_a_batch_index_logged_every_50_global_steps_keeps_its_cadence() -> None:
    """Logged every 50 global steps as the batch index of epochs of 120 steps: 49, 99, then 29, 79, 9, 59,
    109 … The restarts come back at varying indices; the count goes on by 50."""
    global_steps = range(50, 50 * 20 + 1, 50)
    counted, note = running_steps(step_log([float((g - 1) % 120) for g in global_steps]))
    assert note is not None
    assert np.diff(counted["step"]).tolist() == [50.0] * 19


def test_an_epoch_ending_in_a_long_evaluation_still_runs_on() -> None:
    """elapsed_s goes on across the evaluation's minute: the run did not stop."""
    counted, note = running_steps(step_log(epochs(3, 100), gaps={100: 60.0, 200: 60.0}))
    assert note is not None and counted["step"].iloc[-1] == 300


def test_a_resumed_session_is_left_as_it_is() -> None:
    """Resumed from step 1's checkpoint: its elapsed_s starts again. Without elapsed_s, the pause tells."""
    log = step_log(epochs(2, 100), gaps={100: 5.0})
    log.loc[100:, "elapsed_s"] -= log["elapsed_s"].iloc[100] - STEP_S
    assert left_alone(running_steps(log), log)
    paused = step_log(epochs(2, 100), gaps={100: 120.0}, elapsed=False)
    assert left_alone(running_steps(paused), paused)
    on_time = step_log(epochs(2, 100), elapsed=False)  # control: the same file without the pause
    assert running_steps(on_time)[1] is not None


@pytest.mark.parametrize(
    "steps",
    [
        [*range(1, 101), *range(60, 161)],  # rolled back to step 60's checkpoint, in the same process
        [s + r for s in range(1, 200) for r in (0, -1)],  # two ranks, the second a step behind
        [float(s) for s in range(1, 201)],  # control: never back
    ],
)
def test_steps_back_that_are_not_restarts_are_left_alone(steps: list[float]) -> None:
    log = step_log([float(s) for s in steps])
    assert left_alone(running_steps(log), log)


def examples_log(
    batch: int,
    info_steps: int | None = None,
    *,
    every: int = 1,
    row_s: float = STEP_S,
    step_time_s: float = STEP_S,
    per_row: list[float] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """A step log that counts the examples seen (400 rows, `every` steps a row, `row_s` apart, each
    `step_time_s` long at batch / step_time_s examples/s; `per_row`: its step's advances), and its
    training.json."""
    per_row = per_row or [float(batch * every)] * 399
    steps = np.concatenate(([batch * every], batch * every + np.cumsum(per_row)))
    log = step_log(steps.tolist())
    log["time_unix"] = log["time_unix"].iloc[0] + np.arange(len(steps)) * row_s
    log["step_time_s"], log["examples_per_s"] = step_time_s, batch / step_time_s
    info = {"batch_size": batch} | ({"global_step": info_steps} if info_steps is not None else {})
    return log, info


@pytest.mark.parametrize("info_steps", [400, None])
def test_a_step_column_that_counts_examples_is_divided_by_the_batch(info_steps: int | None) -> None:
    """training.json's 400 steps, or each row's own cells (one batch in one step_time_s), say so."""
    log, info = examples_log(32, info_steps)
    counted, note = steps_from_examples(log, info)
    assert note is not None and "by the batch (32)" in note
    assert counted["step"].iloc[-1] == 400
    assert throughput(counted, info).examples_per_s == pytest.approx(32 / STEP_S, rel=0.01)
    assert left_alone(steps_from_examples(counted, info), counted)


def test_a_whole_number_step_column_takes_the_steps_read() -> None:
    """A step column parsed as whole numbers (int64) whose count of examples is no multiple of the batch
    (a first row at 3 examples): the steps read are fractions, in a float column, not a traceback."""
    log, info = examples_log(4, 400)
    log["step"] = (log["step"] - 1).astype("int64")
    counted, note = steps_from_examples(log, info)
    assert note is not None and counted["step"].dtype == float and counted["step"].iloc[0] == 0.75
    epochs_log = step_log(epochs(3, 100))
    epochs_log["step"] = epochs_log["step"].astype("int64")
    assert running_steps(epochs_log)[0]["step"].iloc[-1] == 300


def test_a_log_written_every_batch_steps_is_left_alone() -> None:
    """Logged every 32 steps at batch 32: the step advances by the batch, but 32 step times pass a row,
    and training.json's steps are the column's."""
    log, info = examples_log(32, every=32, row_s=32 * STEP_S)
    log["step"] = log["step"] / 32
    info["global_step"] = int(log["step"].iloc[-1])
    assert left_alone(steps_from_examples(log, info), log)
    info.pop("global_step")
    assert left_alone(steps_from_examples(log, info), log)


def test_a_batch_of_one_is_left_alone() -> None:
    log, info = examples_log(1)
    assert left_alone(steps_from_examples(log, info), log)


@pytest.mark.parametrize(("off", "divided"), [(39, True), (40, False)])
def test_rows_advancing_by_the_batch_in_the_row_share(off: int, divided: bool) -> None:
    """`off` of the 399 advances are 5, not the batch of 4."""
    log, info = examples_log(4, per_row=[4.0] * (399 - off) + [5.0] * off)
    assert EXAMPLES_ROW_SHARE == 0.9 and 360 / 399 >= EXAMPLES_ROW_SHARE > 359 / 399
    assert (steps_from_examples(log, info)[1] is not None) is divided


@pytest.mark.parametrize(
    ("row_s", "step_time_s", "divided"),
    [
        (0.25, 0.3125, True),
        (0.25, 0.3125 + 2**-8, False),
        (0.3125, 0.25, True),
        (0.3125 + 2**-8, 0.25, False),
    ],
)
def test_one_step_a_row_within_the_ratio_of_row_time_to_step_time(
    row_s: float, step_time_s: float, divided: bool
) -> None:
    """Without training.json's steps: the rows' time over their step_time_s within the ratio."""
    log, info = examples_log(4, row_s=row_s, step_time_s=step_time_s)
    assert (ONE_STEP_MIN_RATIO, ONE_STEP_MAX_RATIO) == (0.25 / 0.3125, 0.3125 / 0.25)
    assert (steps_from_examples(log, info)[1] is not None) is divided


@pytest.mark.parametrize(("counted", "divided"), [(408, True), (392, True), (409, False), (391, False)])
def test_training_json_steps_within_the_match_share(counted: int, divided: bool) -> None:
    """Without step_time_s: training.json's global_step within the share of the column over the batch."""
    log, info = examples_log(4, info_steps=counted)
    log = log.drop(columns=["step_time_s"])
    assert log["step"].iloc[-1] / 4 * STEPS_MATCH_SHARE == 8
    assert (steps_from_examples(log, info)[1] is not None) is divided


@pytest.mark.parametrize(("epoch", "mended"), [([1, 2], True), ([2], False)])
def test_epochs_of_at_least_the_min_epoch_rows(epoch: list[int], mended: bool) -> None:
    """An epoch between two restarts of MIN_EPOCH_ROWS rows, and of one fewer."""
    assert len(epoch) in (MIN_EPOCH_ROWS, MIN_EPOCH_ROWS - 1)
    steps = [*range(1, 101), *epoch, *range(1, 101)]
    assert (running_steps(step_log([float(s) for s in steps]))[1] is not None) is mended


def per_epoch(run_dir: Path) -> None:
    """training.csv's step as a batch index that starts again every 100 steps."""
    frame = pd.read_csv(run_dir / "training.csv")
    frame["step"] = (frame["step"] - 1) % 100 + 1
    frame.to_csv(run_dir / "training.csv", index=False)


def examples_seen(run_dir: Path) -> None:
    """training.csv's step as the examples seen: the step × the batch."""
    batch = json.loads((run_dir / "training.json").read_text())["batch_size"]
    frame = pd.read_csv(run_dir / "training.csv")
    frame["step"] = frame["step"] * batch
    frame.to_csv(run_dir / "training.csv", index=False)


@pytest.mark.parametrize("change", [per_epoch, examples_seen])
def test_the_decision_is_the_untouched_runs(tmp_path: Path, change) -> None:
    untouched, _ = decision_of(tmp_path / "untouched")
    for side in ("gpu", "cpu"):
        changed, warnings = decision_of(tmp_path / side, **{f"{side}_change": change})
        option, expected = changed["options"][0], untouched["options"][0]
        assert option["speedup"] == pytest.approx(expected["speedup"], rel=1e-6)
        assert option["mfu"] == pytest.approx(expected["mfu"], rel=1e-6)
        assert option["energy_j_per_1k_examples"] == pytest.approx(
            expected["energy_j_per_1k_examples"], rel=1e-6
        )
        assert not any("resumed or paused" in c or "off its training.json" in c for c in changed["caveats"])
        name = GPU_RUN if side == "gpu" else CPU_RUN
        assert any(w.startswith(f"{name}: training.csv: its step ") for w in warnings)


@pytest.mark.parametrize("change", [per_epoch, examples_seen])
def test_the_dashboard_plots_the_steps_the_report_reads(tmp_path: Path, change, monkeypatch) -> None:
    decision_of(tmp_path, gpu_change=change)
    run = dashboard_runs.open_run_dir(tmp_path / "runs" / GPU_RUN)
    calls = []
    read = dashboard_runs.step_log_read
    monkeypatch.setattr(dashboard_runs, "step_log_read", lambda *args: calls.append(1) or read(*args))
    dashboard_runs.read_training(run)
    dashboard_runs.read_training(run)
    assert len(calls) == 1  # once per parse, not on every callback that reads the step log
    untouched = dashboard_runs.open_run_dir(EXAMPLES / GPU_RUN)
    steps = dashboard_runs.read_training(run)["step"]
    assert steps.tolist() == pytest.approx(dashboard_runs.read_training(untouched)["step"].tolist())
    warnings = dashboard_runs.run_warnings(run)
    assert any(w.startswith("training.csv: its step ") for w in warnings)


@pytest.mark.parametrize(("advance", "said"), [(1.5, False), (1.5 + 2**-6, True)])
def test_a_step_advancing_faster_than_its_step_times_allow_is_in_doubt(advance: float, said: bool) -> None:
    """Rows STEP_S apart, each timed STEP_S: a step advance above MAX_STEPS_PER_STEP_TIME a row is more
    steps than fit in the time (micro-batches, examples), a caveat; at it, not."""
    log = step_log([1.0 + advance * i for i in range(40)])
    note = steps_outrun_their_times(log, {})
    assert (note is not None) is said and MAX_STEPS_PER_STEP_TIME == 1.5
    if said:
        assert note.startswith("its step advances 1.5× as fast as its own step times allow")


def test_a_job_or_a_log_without_enough_step_times_is_not_judged() -> None:
    fast = step_log([4.0 * i for i in range(1, 41)])
    assert steps_outrun_their_times(fast, {}) is not None  # control
    job = {"workload": {"name": "train.py"}, "progress": {"from": "protocol"}}
    assert steps_outrun_their_times(fast, job) is None  # its rows come in bursts, timed by the collector
    assert steps_outrun_their_times(fast.iloc[:MIN_TIMED_ROWS], {}) is None
    assert steps_outrun_their_times(fast.iloc[: MIN_TIMED_ROWS + 1], {}) is not None
    assert steps_outrun_their_times(fast.drop(columns=["step_time_s"]), {}) is None


def micro_batches(run_dir: Path) -> None:
    """training.csv's step counting 4 micro-batches a step, and training.json without its own rate."""
    frame = pd.read_csv(run_dir / "training.csv")
    frame["step"] = frame["step"] * 4
    frame.to_csv(run_dir / "training.csv", index=False)
    info = json.loads((run_dir / "training.json").read_text())
    info.pop("steady_steps_per_s", None)
    (run_dir / "training.json").write_text(json.dumps(info))


def test_a_step_column_counting_micro_batches_is_a_caveat(tmp_path: Path) -> None:
    """Read as steps, the GPU is 4× faster than it was, silently; now the Decision says the rate may be 4×
    too high."""
    decision, _ = decision_of(tmp_path, gpu_change=micro_batches)
    assert any(
        c.startswith(f"{GPU_RUN}: its step advances 4.0× as fast as its own step times allow")
        for c in decision["caveats"]
    )
    control, _ = decision_of(tmp_path / "control")
    assert not any("own step times allow" in c for c in control["caveats"])


@pytest.mark.parametrize(("times", "read"), [(1.0, True), (1.09375, True), (0.90625, True), (1.125, False)])
def test_step_times_in_milliseconds_within_the_ms_ratio_share(times: float, read: bool) -> None:
    """step_time_s a thousand times (× `times`) the rows' spacing: milliseconds, read in seconds, and no
    caveat that the step outruns its times; outside MS_RATIO_SHARE of a thousand, left (and said)."""
    log = step_log([float(s) for s in range(1, 41)])
    log["step_time_s"] = STEP_S * 1000 * times
    found, note = step_times_in_seconds(log)
    assert (note is not None) is read and MS_RATIO_SHARE == 0.1
    if read:
        assert found["step_time_s"].iloc[0] == pytest.approx(STEP_S * times)
        assert steps_outrun_their_times(found, {}) is None
    else:
        assert steps_outrun_their_times(found, {}) is not None


def step_times_in_ms(run_dir: Path) -> None:
    frame = pd.read_csv(run_dir / "training.csv")
    frame["step_time_s"] = frame["step_time_s"] * 1000
    frame.to_csv(run_dir / "training.csv", index=False)


def test_a_step_log_timed_in_milliseconds_reads_as_recorded(tmp_path: Path) -> None:
    """Its step advanced "1000× as fast as its own step times allow": a caveat on a right rate."""
    decision, warnings = decision_of(tmp_path, gpu_change=step_times_in_ms)
    untouched, _ = decision_of(tmp_path / "untouched")
    assert decision == untouched
    said = f"{GPU_RUN}: training.csv: step_time_s is in milliseconds (a thousand times the rows' spacing)"
    assert any(w.startswith(said) for w in warnings)


def batch_as_text(run_dir: Path) -> None:
    info = json.loads((run_dir / "training.json").read_text())
    info["batch_size"] = str(info["batch_size"])
    (run_dir / "training.json").write_text(json.dumps(info))


def test_milliseconds_examples_and_a_lost_batch_together_read_as_recorded(tmp_path: Path) -> None:
    """Found by a fuzz of combined faults: the batch read from the step log's examples/s × its step time in
    milliseconds (2,000), so its examples were not divided by the batch nor its times read in seconds (the
    step then advanced 2 a row): "13,814.8× faster", not like-for-like, for 6.9×."""

    def all_three(run_dir: Path) -> None:
        step_times_in_ms(run_dir)
        examples_seen(run_dir)
        batch_as_text(run_dir)

    decision, warnings = decision_of(tmp_path, gpu_change=all_three)
    untouched, _ = decision_of(tmp_path / "untouched")
    assert decision["options"][0]["speedup"] == pytest.approx(untouched["options"][0]["speedup"], rel=1e-6)
    assert decision["options"][0]["line"] == untouched["options"][0]["line"]
    assert any(f"{GPU_RUN}: training.csv: step_time_s is in milliseconds" in w for w in warnings)
    assert any(
        f"{GPU_RUN}: no batch_size recorded (training.json): read as its step log's 2 " in w for w in warnings
    )


def test_a_log_written_in_bursts_keeps_its_step_times_in_seconds() -> None:
    """Steps of 0.1 s whose rows came ten at a time, 0.1 ms apart (a buffered writer): before, each row's
    step_time_s over its 0.1 ms since the row before read a thousand, and the right times were divided by
    1,000 as milliseconds."""
    steps = np.arange(1, 201)
    burst_start = (steps - 1) // 10 * 1.0  # a burst each second, its ten rows 0.1 ms apart
    log = pd.DataFrame({
        "time_unix": 1_795_000_000.0 + burst_start + ((steps - 1) % 10) * 1e-4,
        "step": steps.astype(float),
        "step_time_s": 0.1,
        "examples_per_s": BATCH / 0.1,
    })  # fmt: skip
    found, note = step_times_in_seconds(log)
    assert note is None and found["step_time_s"].iloc[0] == 0.1
