"""A real short training run on CPU: the run-format files, a falling loss, export/evaluate/detect."""

from __future__ import annotations

import csv
import itertools
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trainfixtures import REPO, CompletedRun, training_env

from runformat import PHASES_COLUMNS, read_json
from training.runlog import TRAINING_COLUMNS

pytestmark = pytest.mark.slow


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_run_succeeds_and_reports_progress(trained_run: CompletedRun) -> None:
    assert trained_run.returncode == 0, trained_run.stderr[-2000:]
    assert "Traceback" not in trained_run.stderr
    assert "first step (graph tracing)" in trained_run.stdout
    assert "evaluate: mAP@0.5" in trained_run.stdout


def test_training_csv_has_one_row_per_step_and_a_falling_loss(trained_run: CompletedRun) -> None:
    path = trained_run.run_dir / "training.csv"
    assert path.read_text().splitlines()[0].split(",") == TRAINING_COLUMNS
    rows = _rows(path)
    steps = [int(row["step"]) for row in rows]
    assert steps == list(range(1, len(rows) + 1)) and len(rows) >= 10  # the loss check compares 5 and 5
    times = [float(row["time_unix"]) for row in rows]
    assert all(b > a for a, b in itertools.pairwise(times))
    assert abs(times[-1] - time.time()) < 3600
    losses = [float(row["loss_total"]) for row in rows]
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5
    learning_rates = [float(row["learning_rate"]) for row in rows]
    assert learning_rates[0] < learning_rates[-1]
    for row in rows[1:]:
        assert float(row["examples_per_s"]) == pytest.approx(2 / float(row["step_time_s"]), rel=1e-3)


def test_training_json_is_honest(trained_run: CompletedRun) -> None:
    info = read_json(trained_run.run_dir / "training.json")
    rows = _rows(trained_run.run_dir / "training.csv")
    assert info["format_version"] == 1
    assert info["status"] == "deadline" and info["duration_budget_s"] == 90.0  # collect_cpu.sh 90s
    assert info["steps"] == info["global_step"] == len(rows) and info["initial_step"] == 0
    assert info["device_requested"] == "cpu" and info["device_used"] == "CPU" and info["gpu_names"] == []
    assert (info["preset"], info["backbone"], info["image_size"], info["batch_size"], info["precision"]) == (
        "small",
        "resnet18",
        256,
        2,
        "float32",
    )
    assert info["start_unix"] < info["end_unix"]
    first_step = float(rows[0]["time_unix"]) - info["start_unix"]
    assert info["first_step_s"] == pytest.approx(first_step, abs=0.01)
    steady = info["steady_steps_per_s"]
    assert steady > 0 and info["steady_examples_per_s"] == pytest.approx(2 * steady, rel=1e-3)
    excluded = info["warmup_steps_excluded"]
    span = float(rows[-1]["time_unix"]) - float(rows[excluded - 1]["time_unix"])
    assert steady == pytest.approx((len(rows) - excluded) / span, rel=1e-3)
    assert info["dataset_info"]["kind"] == "synthetic" and info["dataset_info"]["seed"] == 7
    assert info["dataset_info"]["images"] == {"train": 24, "val": 4}
    assert info["config"]["task"]["model"]["backbone"]["resnet"]["model_id"] == 18
    assert info["config"]["runtime"]["distribution_strategy"] == "one_device"
    assert info["last_checkpoint"] == f"checkpoints/ckpt-{info['global_step']}"


def test_checkpoints_are_kept_to_a_few(trained_run: CompletedRun) -> None:
    checkpoints = trained_run.run_dir / "checkpoints"
    indexes = sorted(checkpoints.glob("ckpt-*.index"))
    assert 1 <= len(indexes) <= 3
    info = read_json(trained_run.run_dir / "training.json")
    assert (checkpoints / f"ckpt-{info['global_step']}.index").is_file()


def test_phases_csv_records_train_then_postprocessing(trained_run: CompletedRun) -> None:
    path = trained_run.run_dir / "phases.csv"
    assert tuple(path.read_text().splitlines()[0].split(",")) == PHASES_COLUMNS
    rows = _rows(path)
    assert [row["phase"] for row in rows] == ["train", "export", "evaluate", "detect", "infer"]
    assert all(row["status"] == "ok" for row in rows)
    bounds = [(float(row["start_unix"]), float(row["end_unix"])) for row in rows]
    assert all(start <= end for start, end in bounds)
    assert all(bounds[i][1] <= bounds[i + 1][0] for i in range(len(bounds) - 1))
    # The training's last word (training.json) ends its phase: no idle wait for TensorFlow's input pipeline
    # to be torn down (up to 60 s before the session parked its iterator), however loaded the machine.
    assert bounds[0][1] - read_json(trained_run.run_dir / "training.json")["end_unix"] < 5.0


def test_export_evaluate_detect_produce_their_files(trained_run: CompletedRun) -> None:
    run_dir = trained_run.run_dir
    saved_model = (run_dir / "model" / "saved_model.pb").read_bytes()
    # the serving signature, without tf_keras's traces of each layer's call (postrun.py says why)
    assert b"serving_default" in saved_model and b"call_and_return_conditional_losses" not in saved_model
    global_step = read_json(run_dir / "training.json")["global_step"]
    report = read_json(run_dir / "eval.json")
    assert report["num_images"] == 4 and report["num_targets"] == 4 and report["global_step"] == global_step
    for key in ("map_50", "recall_50", "precision_50"):
        assert 0.0 <= report[key] <= 1.0
    summary = json.loads((run_dir / "detections" / "detections.json").read_text())
    ids = [image["image_id"] for image in summary["images"]]
    assert ids == ["val_0000", "val_0001", "val_0002", "val_0003"]
    for image in summary["images"]:
        assert (run_dir / "detections" / image["file"]).is_file()
        assert len(image["ground_truth"]) == 1
        assert all(d["score"] >= summary["score_threshold"] for d in image["detections"])


def test_sigterm_resumes_then_stops_with_a_checkpoint(trained_run: CompletedRun, tmp_path: Path) -> None:
    """Resume from the short run's checkpoint, SIGTERM after a few new steps: exit 143, honest files, and
    only the newest checkpoints kept (the short run's 90 s at the default 60 s interval makes too few)."""
    run_dir = tmp_path / "resumed"
    shutil.copytree(
        trained_run.run_dir, run_dir, ignore=shutil.ignore_patterns("model", "detections", "checkpoints")
    )
    before = read_json(run_dir / "training.json")["global_step"]
    _copy_checkpoint(trained_run.run_dir / "checkpoints", run_dir / "checkpoints", f"ckpt-{before}")
    rows_before = len(_rows(run_dir / "training.csv"))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "training",
            "train",
            "--run-dir",
            str(run_dir),
            "--dataset",
            str(trained_run.dataset),
            "--duration",
            "5m",
            "--checkpoint-every",
            "10ms",  # a checkpoint at every step's end
        ],
        cwd=REPO,
        env=training_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_rows(run_dir / "training.csv", rows_before + 4, process, timeout=300)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, stderr[-2000:]
    assert "Traceback" not in stderr
    info = read_json(run_dir / "training.json")
    assert info["status"] == "interrupted" and info["initial_step"] == before
    assert info["global_step"] == before + info["steps"] and info["steps"] >= 4
    assert info["resumed_from"] == f"checkpoints/ckpt-{before}"
    assert info["last_checkpoint"] == f"checkpoints/ckpt-{info['global_step']}"
    assert (run_dir / info["last_checkpoint"]).with_suffix(".index").is_file()
    # A checkpoint at each step's end: only the newest three of this training's (at least four) are kept;
    # the resumed-from one, which TensorFlow's CheckpointManager did not write, stays.
    kept = sorted(int(path.stem.split("-")[1]) for path in (run_dir / "checkpoints").glob("ckpt-*.index"))
    assert kept[0] == before and len(kept) == 4 and kept[-1] == info["global_step"], kept
    assert kept[1] > before + 1, kept  # the first new step's checkpoint was pruned
    steps = [int(row["step"]) for row in _rows(run_dir / "training.csv")]
    assert steps == list(range(1, info["global_step"] + 1))
    phases = _rows(run_dir / "phases.csv")
    assert [row["phase"] for row in phases][-1] == "train"
    assert not (run_dir / "model").exists()


def _copy_checkpoint(source: Path, target: Path, name: str) -> None:
    target.mkdir()
    for path in source.glob(f"{name}.*"):
        shutil.copy2(path, target / path.name)
    (target / "checkpoint").write_text(
        f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n'
    )


def _wait_for_rows(path: Path, rows: int, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"train exited early with {process.returncode}: {process.stderr.read()[-2000:]}"
            )
        if path.exists() and len(path.read_text().splitlines()) - 1 >= rows:
            return
        time.sleep(0.2)
    raise AssertionError(f"no {rows} rows in {path} after {timeout} s")


def test_cpu_run_never_touches_a_gpu(trained_run: CompletedRun) -> None:
    info = read_json(trained_run.run_dir / "training.json")
    assert info["tensorflow_devices"] == ["/physical_device:CPU:0"]
