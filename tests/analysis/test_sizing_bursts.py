"""A job's step log whose rows came in bursts (runformat.bursts): a job whose output is block-buffered hands
the collector its lines a buffer at a time, so the rows within a burst carry the time of the write. Its rate
is read between the bursts' last rows, and a log written in one burst has no rate, never the reader's speed.
Our own training times each step itself: its rows are never read as bursts."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sizingfixtures import reference_cpu, reference_gpu, with_info

from collect import jobtimed
from collect.sources import Hardware
from runformat import bursts
from sizing import ReportSettings, build_report, to_json
from sizing.analysis import runchecks
from sizing.analysis.throughput import throughput
from sizing.cli import main as sizing_main

BELOW = 1e-9  # relative: just past a boundary that float arithmetic cannot hit exactly
WITHIN_S = 2e-5  # the reader's pace through one buffer's lines
JOB = {"workload": {"name": "python train.py", "from": "command line"}, "progress": {"from": "output"}}


def buffered_log(rate: float, steps: int, per_flush: int, start: float = 1_795_000_000.0) -> pd.DataFrame:
    """training.csv of a job training at `rate` steps/s whose lines reach the collector `per_flush` at a
    time, each buffer written when full and the rest at exit."""
    step = np.arange(1, steps + 1)
    flushed_at = np.minimum((step + per_flush - 1) // per_flush * per_flush, steps) / rate
    in_buffer = (step - 1) % per_flush
    times = start + flushed_at + in_buffer * WITHIN_S
    return pd.DataFrame({"time_unix": times, "elapsed_s": times - start, "step": step.astype(float)})


def test_rows_each_timed_are_not_bursts() -> None:
    assert bursts.burst_ends(list(np.arange(200) * 0.05)) is None
    assert bursts.burst_ends(list(np.arange(200) * 0.0003)) is None  # tiny steps, each timed: not bursts
    assert bursts.burst_ends([5.0]) is None


def test_each_burst_ends_at_its_last_row() -> None:
    log = buffered_log(rate=300.0, steps=2400, per_flush=800)
    assert bursts.burst_ends(log["time_unix"].tolist()) == [799, 1599, 2399]


def test_a_log_written_at_exit_is_one_burst_when_the_training_start_is_known() -> None:
    times = list(100.0 + np.arange(2000) * WITHIN_S)
    assert bursts.burst_ends(times) is None  # alone, it looks like 2,000 tiny steps
    assert bursts.burst_ends(times, start=93.0) == [1999]


def test_one_write_read_in_parts_is_one_burst() -> None:
    log = buffered_log(rate=300.0, steps=2400, per_flush=800)
    times = log["time_unix"].to_numpy().copy()
    times[1200:] += 0.004  # the collector read the second buffer in two reads
    assert bursts.burst_ends(list(times)) == [799, 1599, 2399]


@pytest.mark.parametrize(("gap_s", "bursty"), [(bursts.BURST_GAP_S, False),
                                               (bursts.BURST_GAP_S * (1 - BELOW), True)])  # fmt: skip
def test_rows_less_than_the_gap_of_the_burst_limit_apart_came_in_one_write(
    gap_s: float, bursty: bool
) -> None:
    assert (bursts.burst_ends([0.0, gap_s, 1.0]) is not None) is bursty


@pytest.mark.parametrize(("within", "between", "bursty"), [(2, 2, True), (2, 3, False)])
def test_a_log_is_bursty_from_the_share_of_gaps_within_bursts(
    within: int, between: int, bursty: bool
) -> None:
    assert bursts.BURST_ROW_SHARE == 2 / (2 + 2)
    gaps = [WITHIN_S] * within + [1.0] * between
    assert (bursts.burst_ends(list(np.cumsum([0.0, *gaps]))) is not None) is bursty


@pytest.mark.parametrize(("share", "bursty"), [(bursts.BURST_TIME_SHARE, False),
                                               (bursts.BURST_TIME_SHARE * (1 - BELOW), True)])  # fmt: skip
def test_the_time_within_bursts_is_under_its_share_of_the_span(share: float, bursty: bool) -> None:
    within = 2.0**-11  # one gap under BURST_GAP_S; the span from the start makes it `share` of the time
    assert (bursts.burst_ends([0.0, within], start=within - within / share) is not None) is bursty


@pytest.mark.parametrize(("factor", "parts"), [(1 + BELOW, 2), (1 - BELOW, 1)])
def test_bursts_closer_than_the_merge_share_of_the_mean_gap_are_one_write_read_in_parts(
    factor: float, parts: int
) -> None:
    between = [1.0, 1.0, 1.0]  # with the part gap p, apart = MERGE_SHARE × (3 + p) / 4
    part = bursts.MERGE_SHARE * 3 / (4 - bursts.MERGE_SHARE) * factor
    gaps = [WITHIN_S] * 20 + [between[0]] + [WITHIN_S] * 20 + [part] + [WITHIN_S] * 20
    gaps += [between[1]] + [WITHIN_S] * 20 + [between[2]] + [WITHIN_S] * 20
    ends = bursts.burst_ends(list(np.cumsum([0.0, *gaps])))
    assert ends is not None and len(ends) == 3 + parts


def test_a_buffered_jobs_rate_is_read_between_bursts_without_the_one_at_exit() -> None:
    log = buffered_log(rate=300.0, steps=5000, per_flush=820)  # 6 full buffers, 80 steps at exit
    found = throughput(log, JOB)
    assert found.bursts == 7
    assert found.steps_per_s == pytest.approx(300.0, rel=1e-3)  # rows within a burst: 50,000 steps/s
    assert found.warmup_steps == 820  # the first burst holds the 20 warm-up steps
    warning = " ".join(runchecks.rate_problems("job", found, JOB))
    assert "training.csv's rows came in 7 bursts (rows under 1 ms apart, then a gap" in warning
    assert "the rate is read between the bursts' last rows (the last burst left out)" in warning
    assert bursts.UNBUFFERED_HINT in warning
    protocol = {**JOB, "progress": {"from": "protocol"}}  # lines stamped when the collector read them
    assert bursts.TIME_UNIX_HINT in " ".join(runchecks.rate_problems("job", found, protocol))


def test_our_own_training_times_each_step_so_its_rows_are_never_bursts() -> None:
    log = buffered_log(rate=300.0, steps=5000, per_flush=820)
    assert throughput(log, {}).bursts == 0  # steps queued on a GPU between loss reads look like this


def test_a_gpu_job_written_in_one_burst_has_no_speedup_in_the_decision() -> None:
    cpu, gpu = (with_info(run, **JOB) for run in (reference_cpu(), reference_gpu()))
    end = float(gpu.training["time_unix"].iloc[-1])
    rows = len(gpu.training)
    at_exit = gpu.training.assign(time_unix=end + np.arange(rows) * WITHIN_S)
    at_exit["elapsed_s"] = at_exit["time_unix"] - (end - float(gpu.training["elapsed_s"].iloc[-1]))
    report = to_json(build_report([cpu, replace(gpu, training=at_exit)], ReportSettings()))
    gpu_run = next(r for r in report["runs"] if r["run_id"] == "ref-gpu")
    assert gpu_run["steps_per_s"] is None  # not 50,000 steps/s: the reader's pace
    (option,) = report["decision"]["options"]
    assert option["speedup"] is None
    first = report["decision"]["caveats"][0]  # why there is no speedup comes first
    assert first.startswith("ref-gpu's steps are not timed: its step log came in 1 burst (buffered output)")
    assert "energy unknown (steps not timed: examples/s unknown)" in " ".join(report["headline"])
    assert any("too few bursts to time its steps: rate unknown" in w for w in report["warnings"])


BUFFERED_JOB = (
    "import os, sys, time\n"
    "out = open(1, 'w', buffering=4096, closefd=False)\n"
    "start = time.monotonic()\n"
    "step = 0\n"
    "while time.monotonic() - start < 6.0:\n"
    "    step += 1\n"
    "    time.sleep(0.004)\n"
    "    out.write(f'step {step} loss 0.5 {\".\" * 80}\\n')\n"
    "open(os.environ['JOB_RATE_FILE'], 'w').write(str(step / (time.monotonic() - start)))\n"
    "out.flush()\n"
)


def test_a_real_job_with_block_buffered_output_is_sized_at_its_own_pace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "train.py"
    script.write_text(BUFFERED_JOB)
    monkeypatch.setenv("JOB_RATE_FILE", str(tmp_path / "rate"))
    data = tmp_path / "data"
    options = ["12s", "--interval", "0.5s", "--data-dir", str(data)]
    options += ["--progress-regex", r"step (?P<step>\d+)"]

    def no_nvml() -> None:
        raise ImportError("No module named 'pynvml'")

    command = ["--", sys.executable, str(script)]
    assert jobtimed.main([*options, *command], hardware=Hardware(load_nvml=no_nvml, environ={})) == 0
    printed = capsys.readouterr().out
    assert "warning: the rows came in" in printed and "steps/s after the first" not in printed
    (run,) = (data / "runs").iterdir()
    out = tmp_path / "report.json"
    assert sizing_main(["--out", str(out), str(run)]) == 0
    (sized,) = json.loads(out.read_text())["runs"]
    own = float((tmp_path / "rate").read_text())  # the job's own steps over its own loop time
    assert sized["steps_per_s"] == pytest.approx(own, rel=0.15)


@pytest.mark.parametrize(("count", "said"), [(bursts.MANY_BURSTS, False), (bursts.MANY_BURSTS - 1, True)])
def test_bursts_are_said_below_many_bursts(count: int, said: bool) -> None:
    """A progress file read every 20 ms comes in thousands of bursts: timed closely enough to say nothing."""
    log = buffered_log(rate=300.0, steps=30 * count, per_flush=30)
    found = throughput(log, JOB)
    assert found.bursts == count and found.steps_per_s == pytest.approx(300.0, rel=1e-3)
    assert any("bursts" in w for w in runchecks.rate_problems("job", found, JOB)) is said
