"""runformat.progress: steps from training.csv when training.json is stale (real files, real pids)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

from runformat import ENDED_UNRECORDED, training_progress

HEADER = "time_unix,elapsed_s,step,loss_total\n"


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _run_dir(
    tmp_path: Path, *, status: str, steps: int, csv_steps: int, end_reason: str = "running", **extra: object
) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    start = 1000.0
    training = {"status": status, "steps": steps, "global_step": steps, "start_unix": start, **extra}
    (run_dir / "training.json").write_text(json.dumps(training))
    (run_dir / "run.json").write_text(json.dumps({"end_reason": end_reason}))
    lines = [HEADER, "990.0,0.5,1,2.0\n"]  # a row of an earlier session (before start_unix): not counted
    lines += [f"{start + step:.1f},{step:.1f},{step + 1},1.5\n" for step in range(1, csv_steps + 1)]
    lines.append("9999.0,9")  # a row still being written
    (run_dir / "training.csv").write_text("".join(lines))
    return run_dir


def test_running_with_a_dead_pid_is_stale(tmp_path: Path) -> None:
    run_dir = _run_dir(
        tmp_path, status="running", steps=0, csv_steps=7, pid=_dead_pid(), host=socket.gethostname()
    )
    progress = training_progress(run_dir)
    assert progress.stale and progress.status == ENDED_UNRECORDED
    assert (progress.steps, progress.global_step) == (7, 8)
    assert "training process is gone" in progress.note and "training.csv" in progress.note


def test_running_while_the_collector_has_finished_is_stale(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, status="running", steps=3, csv_steps=7, end_reason="failed")
    progress = training_progress(run_dir)
    assert progress.stale and progress.steps == 7


def test_a_live_training_is_not_stale_and_counts_from_training_csv(tmp_path: Path) -> None:
    run_dir = _run_dir(
        tmp_path, status="running", steps=0, csv_steps=7, pid=os.getpid(), host=socket.gethostname()
    )
    progress = training_progress(run_dir)
    assert not progress.stale and progress.status == "running"
    assert progress.steps == 7 and progress.note == ""


def test_another_hosts_training_cannot_be_judged(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, status="running", steps=0, csv_steps=2, pid=_dead_pid(), host="elsewhere")
    assert not training_progress(run_dir).stale


def test_a_failed_training_that_recorded_too_few_steps_says_so(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, status="failed", steps=0, csv_steps=5, end_reason="failed")
    progress = training_progress(run_dir)
    assert (progress.status, progress.steps, progress.stale) == ("failed", 5, False)
    assert progress.note == "training.json records 0 steps, training.csv 5; steps from training.csv"


def test_an_honest_training_json_is_taken_as_is(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, status="deadline", steps=7, csv_steps=7, end_reason="deadline")
    progress = training_progress(run_dir)
    assert (progress.status, progress.steps, progress.global_step, progress.note) == ("deadline", 7, 7, "")


def test_no_training_files(tmp_path: Path) -> None:
    progress = training_progress(tmp_path)
    assert (progress.steps, progress.status, progress.stale) == (None, "not started", False)


def _with_losses(run_dir: Path, losses: list[str]) -> Path:
    """training.csv's rows of this session given these loss cells, in order."""
    lines = (run_dir / "training.csv").read_text().splitlines(keepends=True)
    body = [line for line in lines[2:] if line.endswith("\n")]
    rows = [line.rsplit(",", 1)[0] + f",{loss}\n" for line, loss in zip(body, losses, strict=True)]
    (run_dir / "training.csv").write_text("".join([lines[0], lines[1], *rows]))
    return run_dir


def test_a_loss_not_finite_to_the_end_is_where_the_training_diverged(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, status="deadline", steps=6, csv_steps=6, end_reason="deadline")
    _with_losses(run_dir, ["1.5", "1.2", "nan", "", "inf", "NaN"])  # an empty cell: a loss not read
    progress = training_progress(run_dir)
    assert progress.loss_not_finite_from_step == 4  # the row of elapsed 3.0 is step 4
    corrected, note = progress.applied_to({"status": "deadline", "steps": 6, "global_step": 7})
    assert corrected["loss_not_finite_from_step"] == 4 and note == ""


def test_a_step_that_loss_scaling_skipped_is_not_a_divergence(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, status="deadline", steps=6, csv_steps=6, end_reason="deadline")
    _with_losses(run_dir, ["1.5", "inf", "nan", "1.1", "", "1.0"])
    progress = training_progress(run_dir)
    assert progress.loss_not_finite_from_step is None
    assert "loss_not_finite_from_step" not in progress.applied_to({"status": "deadline", "steps": 6})[0]


def test_an_earlier_sessions_divergence_is_not_this_ones(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, status="deadline", steps=2, csv_steps=2, end_reason="deadline")
    text = (run_dir / "training.csv").read_text().replace("990.0,0.5,1,2.0", "990.0,0.5,1,nan")
    (run_dir / "training.csv").write_text(text)
    _with_losses(run_dir, ["", ""])  # no loss read in this session: nothing after the earlier NaN resets it
    assert training_progress(run_dir).loss_not_finite_from_step is None


def test_step_rows_is_the_one_reading_of_the_step_log(tmp_path: Path) -> None:
    from runformat.progress import StepRow, step_rows

    path = tmp_path / "training.csv"
    assert step_rows(path) is None  # no file
    path.write_text("time_unix,loss_total\n1,2\n")
    assert step_rows(path) is None  # no step column
    path.write_text(
        "\ufeff"
        + HEADER  # a BOM from a spreadsheet's save
        + "990.0,0.1,1,9.0\n"  # an earlier session
        + "1001.0,0.5,1,2.5\n"
        + "1002.0,1.0,2,\n"  # a loss not read at this step
        + "1003.0,1.5,3,nan\n"
        + "1004.0,2.0,x,1.0\n"  # no step: not a row
        + "1005.0,2.5,5,1.0,extra\n"  # malformed
        + "1006.0,3.0,6,1.2"  # still being written
    )
    rows = list(step_rows(path, start_unix=1000.0) or ())
    assert rows[0] == StepRow(1001.0, 1, 0.5, 2.5)
    assert [r.step for r in rows] == [1, 2, 3] and rows[1].loss_total is None
    assert rows[2].loss_total is not None and rows[2].loss_total != rows[2].loss_total  # NaN is a reading
    assert [r.step for r in step_rows(path) or ()] == [1, 1, 2, 3]


def test_rows_a_logger_attached_twice_wrote_twice_are_one_step_each(tmp_path: Path) -> None:
    """Every row twice: training.csv's 14 rows were taken for 14 steps over training.json's honest 7."""
    run_dir = _run_dir(tmp_path, status="deadline", steps=7, csv_steps=7, end_reason="deadline")
    path = run_dir / "training.csv"
    header, *rows = path.read_text().splitlines(keepends=True)
    path.write_text(header + "".join(row + row for row in rows[:-1]) + rows[-1])
    progress = training_progress(run_dir)
    assert (progress.steps, progress.note) == (7, "")
