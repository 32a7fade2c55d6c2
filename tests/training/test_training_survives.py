"""The training survives its own plumbing: a killed collector, a closed console, its own kill -9.

Real collector, real training (small preset, tiny dataset), real signals. The plumbing is the same for
both frameworks, so these run the torch backend, which starts in seconds rather than TensorFlow's tens of
seconds; TensorFlow's own stop with a checkpoint and resume is test_training_run.py's SIGTERM test.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runformat import read_json

sys.path.insert(0, str(Path(__file__).parent))

from trainfixtures import REPO, training_env

pytestmark = pytest.mark.slow


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or while it was read
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _timed_run(data_dir: Path, dataset: Path) -> subprocess.Popen[str]:
    """`collect timed` as the scripts start it, in its own session so our signals reach it alone."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "collect",
            "timed",
            "5m",
            "--framework",
            "torch",
            "--no-export",
            "--interval",
            "0.5s",
            "--data-dir",
            str(data_dir),
            "--dataset",
            str(dataset),
        ],
        cwd=REPO,
        env=training_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _started_training(data_dir: Path, collector: subprocess.Popen[str], steps: int) -> tuple[Path, int]:
    """The run directory and the training's pid, once training.csv has `steps` rows."""
    runs = data_dir / "runs"
    _wait_for(lambda: runs.is_dir() and any(runs.iterdir()), 60, "the run directory")
    run_dir = next(runs.iterdir())

    def stepping() -> bool:
        if collector.poll() is not None:
            raise AssertionError(f"collector exited with {collector.returncode}: {collector.stderr.read()}")
        path = run_dir / "training.csv"
        return path.exists() and len(_rows(path)) >= steps

    _wait_for(stepping, 300, f"{steps} training steps")
    return run_dir, int(read_json(run_dir / "training.json")["pid"])


def test_kill_9_of_the_collector_stops_the_training_with_a_checkpoint(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    collector = _timed_run(tmp_path, tiny_dataset)
    training_pid = None
    try:
        run_dir, training_pid = _started_training(tmp_path, collector, steps=5)
        assert read_json(run_dir / "training.json")["last_checkpoint"] is None  # before the 60 s checkpoint
        collector.kill()  # its stdout pipe to the training closes with it
        collector.communicate(timeout=30)
        _wait_for(lambda: not _running(training_pid), 120, "the training to stop")
    finally:
        collector.kill()
        if training_pid is not None and _running(training_pid):
            os.kill(training_pid, signal.SIGKILL)
    info = read_json(run_dir / "training.json")
    rows = _rows(run_dir / "training.csv")
    assert info["status"] == "interrupted", info.get("error")
    assert info["steps"] == len(rows) >= 5
    assert info["global_step"] == int(rows[-1]["step"])
    assert info["last_checkpoint"] == f"checkpoints/ckpt-{info['global_step']}.pt"
    assert (run_dir / info["last_checkpoint"]).is_file()
    assert [(row["phase"], row["status"]) for row in _rows(run_dir / "phases.csv")] == [("train", "ok")]


def test_kill_9_of_the_training_summary_takes_steps_from_training_csv(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    collector = _timed_run(tmp_path, tiny_dataset)
    try:
        run_dir, training_pid = _started_training(tmp_path, collector, steps=5)
        os.kill(training_pid, signal.SIGKILL)
        out, err = collector.communicate(timeout=60)
    finally:
        collector.kill()
    assert collector.returncode == 137, err
    assert read_json(run_dir / "training.json")["status"] == "running"  # stale: it never got its last word
    steps = len(_rows(run_dir / "training.csv"))
    assert f"training: {steps} steps (ended unrecorded)" in out, out
    assert "note: training.json still says running but the training process is gone" in out


def _torch_training(run_dir: Path, dataset: Path, *more: str) -> list[str]:
    """`python -m training train` with torch, 5m, no export, and `more`."""
    common = ["--framework", "torch", "--run-dir", str(run_dir), "--dataset", str(dataset), "--no-export"]
    return [sys.executable, "-m", "training", "train", *common, "--duration", "5m", *more]


def test_a_closed_console_does_not_stop_the_training(tmp_path: Path, tiny_dataset: Path) -> None:
    """`python -m training train ... | head -1`: the reader goes away, the training goes on."""
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        _torch_training(run_dir, tiny_dataset, "--max-steps", "4"),
        cwd=REPO,
        env=training_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # like `| head -1`
    process.stderr.close()
    assert process.wait(timeout=300) == 0
    info = read_json(run_dir / "training.json")
    assert (info["status"], info["steps"]) == ("completed", 4)
    assert len(_rows(run_dir / "training.csv")) == 4


def _limit_file_size() -> None:
    import resource

    # torch's training.json (with its config, its FLOP count and the error, ~3.3 kB) fits; training.csv
    # (~170 bytes of header, ~125 a row) fills up after ~30 rows
    resource.setrlimit(resource.RLIMIT_FSIZE, (4_000, 4_000))


def test_a_failed_training_records_how_far_it_got(tmp_path: Path, tiny_dataset: Path) -> None:
    run_dir = tmp_path / "run"
    done = subprocess.run(
        # batch 1: the ~30 steps to fill the file, at half the cost
        _torch_training(run_dir, tiny_dataset, "--checkpoint-every", "1h", "--batch", "1"),
        cwd=REPO,
        env=training_env(),
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=_limit_file_size,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    info = read_json(run_dir / "training.json")
    rows = _rows(run_dir / "training.csv")
    assert info["status"] == "failed" and "File too large" in info["error"]
    assert info["steps"] >= len(rows) >= 15  # the step whose row could not be written counts as trained
    assert info["global_step"] == info["steps"]
    assert "last_checkpoint" in info and info["end_unix"] is not None
    assert [(row["phase"], row["status"]) for row in _rows(run_dir / "phases.csv")] == [("train", "failed")]
