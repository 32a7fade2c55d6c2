"""`training train --framework torch --procs 2`: real torch DDP over gloo, two processes on this CPU.

Two ranks under torchrun train a few steps; the checks are what the README promises: a stop that
reaches both ranks and leaves one final checkpoint, a resume from it with one training.csv (rank 0),
global and per-device batch in training.json, identical weights on both ranks, the phases after training
run once, and a rank killed mid-run ending the job with a reason instead of a hang.
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
from trainfixtures import REPO, training_env

from runformat import RUN_DIR_ENV, read_json

pytestmark = pytest.mark.slow


def _train_command(run_dir: Path, dataset: Path, *extra: str, after: str = "--no-export") -> list[str]:
    return [
        sys.executable, "-m", "training", "train", "--framework", "torch", "--procs", "2",
        "--run-dir", str(run_dir), "--dataset", str(dataset), after, *extra,
    ]  # fmt: skip


def _start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        command, cwd=REPO, env=training_env(), start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _steps(run_dir: Path) -> list[int]:
    with (run_dir / "training.csv").open(newline="") as handle:
        return [int(row["step"]) for row in csv.DictReader(handle)]


def _rank_pid(run_dir: Path, rank: int) -> int:
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env and f"{RUN_DIR_ENV}={run_dir}".encode() in env:
            return int(entry)
    raise AssertionError(f"no rank {rank} process for {run_dir}")


def _read_until_first_step(process: subprocess.Popen, lines: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if line.startswith("step 1 "):
            return
    raise AssertionError("the training ended before its first step:\n" + "".join(lines))


@pytest.fixture(scope="module")
def stopped_then_resumed(tiny_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The module's one DDP run, in two launches: stopped with SIGINT after its first step, as Ctrl-C or the
    collector's stop does it (the whole process group), then resumed for 2 more steps with every phase but
    inference. What the stop left is read before the resume changes it."""
    run_dir = tmp_path_factory.mktemp("ddp") / "run"
    process = _start(_train_command(run_dir, tiny_dataset, "--duration", "5m", "--checkpoint-every", "1h"))
    lines: list[str] = []
    try:
        _read_until_first_step(process, lines)
        os.killpg(process.pid, signal.SIGINT)
        rest, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    stopped = {
        "returncode": process.returncode,
        "output": "".join(lines) + rest,
        "info": read_json(run_dir / "training.json"),
        "steps": _steps(run_dir),
    }
    resumed = subprocess.run(
        _train_command(run_dir, tiny_dataset, "--duration", "5m", "--max-steps", "2", after="--no-infer"),
        cwd=REPO, env=training_env(), capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    return {"run_dir": run_dir, "stopped": stopped, "resumed": resumed}


def test_a_stop_reaches_both_ranks_and_leaves_one_checkpoint(stopped_then_resumed: dict) -> None:
    stopped = stopped_then_resumed["stopped"]
    output, info = stopped["output"], stopped["info"]
    assert stopped["returncode"] == 130, output[-3000:]
    assert output.count("SIGINT: finishing the current step") == 2, output  # each rank, once
    assert "Traceback" not in output
    stopped_at = info["global_step"]
    assert info["status"] == "interrupted" and info["replicas_in_sync"] is True
    assert info["last_checkpoint"] == f"checkpoints/ckpt-{stopped_at}.pt"
    assert stopped["steps"] == list(range(1, stopped_at + 1))


def test_the_resumed_ranks_train_in_step_with_one_log(stopped_then_resumed: dict) -> None:
    done, run_dir = stopped_then_resumed["resumed"], stopped_then_resumed["run_dir"]
    stopped_at = stopped_then_resumed["stopped"]["info"]["global_step"]
    final = stopped_at + 2
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "launching 2 ranks" in done.stdout
    assert f"resuming from checkpoints/ckpt-{stopped_at}.pt" in done.stdout
    assert done.stdout.count("training completed: 2 steps") == 1  # rank 0 alone reports
    assert _steps(run_dir) == list(range(1, final + 1))  # one row per global step, written once
    info = read_json(run_dir / "training.json")
    assert info["initial_step"] == stopped_at and info["global_step"] == final
    assert info["world_size"] == 2 and info["per_device_batch_size"] == 2 and info["batch_size"] == 4
    assert info["distribution"] == "torch DDP (gloo, 2 processes)"
    digests = info["replica_weight_digests"]
    assert len(digests) == 2 and digests[0] == digests[1] and info["replicas_in_sync"] is True
    assert info["config"]["learning_rate"] == pytest.approx(0.01 * 4)  # scaled to the global batch
    saved = sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.suffix == ".pt")
    assert saved == sorted([f"ckpt-{stopped_at}.pt", f"ckpt-{final}.pt"])  # each launch's last step
    with (run_dir / "phases.csv").open(newline="") as handle:  # the phases after training ran once
        phases = [row["phase"] for row in csv.DictReader(handle)]
    assert phases == ["train", "train", "export", "evaluate", "detect"]  # --no-infer: all but inference
    assert not (run_dir / "inference.json").exists()
    assert done.stdout.count(f"export: TorchScript of step {final} in model/") == 1
    assert read_json(run_dir / "eval.json")["global_step"] == final


def test_a_dying_rank_ends_the_job_with_a_reason(tiny_dataset: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    process = _start(_train_command(run_dir, tiny_dataset, "--duration", "5m"))
    lines: list[str] = []
    _read_until_first_step(process, lines)
    os.kill(_rank_pid(run_dir, 1), signal.SIGKILL)
    started = time.monotonic()
    rest, _ = process.communicate(timeout=180)
    assert time.monotonic() - started < 120  # ended, not hung in the all-reduce
    assert process.returncode == 1
    errors = [line for line in rest.splitlines() if line.startswith("training: error:")]
    assert errors and "data-parallel training failed" in errors[-1], rest[-3000:]  # the launcher's word
    assert "lost another rank" in errors[-1] and "Root Cause" in rest  # torchrun names the dead rank
    info = read_json(run_dir / "training.json")
    assert info["status"] == "failed" and "lost another rank" in info["error"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--procs", "0"], "expected a whole number >= 1"),
        (["--procs", "1,2"], "is a sweep"),
        (["--procs", "2"], "--procs N > 1 is for --framework torch"),
        (["--gpus", "2"], "--gpus needs --device gpu"),
        (["--procs", "2", "--framework", "torch", "--device", "gpu"], "--procs is for --device cpu"),
        (["--procs", "all", "--framework", "torch"], "--procs all: give a number"),
    ],
)
def test_bad_device_counts_get_one_line_and_exit_2(
    options: list[str], message: str, tiny_dataset: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "training", "train", "--run-dir", str(tmp_path / "run"),
         "--dataset", str(tiny_dataset), *options],
        cwd=REPO, env=training_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


def _train_args(*options: str):
    from training.cli import _parser

    return _parser().parse_args(["train", "--run-dir", "/nonexistent/run", *options])


def test_gpus_beyond_the_visible_ones_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import training.device
    from training.train_command import replica_count, usage_problem

    two_gpus = [("00000000:65:00.0", "GPU-bbbb"), ("00000000:17:00.0", "GPU-aaaa")]
    monkeypatch.setattr(training.device, "nvml_gpus", lambda: two_gpus)  # NVML, the hardware boundary
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    problem = usage_problem(_train_args("--framework", "torch", "--device", "gpu", "--gpus", "3"))
    assert problem == "--gpus 3: this node has 2 GPU(s) visible"
    fits = _train_args("--framework", "torch", "--device", "gpu", "--gpus", "all")
    assert usage_problem(fits) is None and replica_count(fits) == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    one_visible = usage_problem(_train_args("--device", "gpu", "--gpus", "2"))
    assert one_visible == "--gpus 2: this node has 1 GPU(s) visible"


def test_the_launch_command_is_torchrun_on_this_node() -> None:
    from training.distributed import launch_command

    assert launch_command(4, ["train", "--gpus", "4"], python="py") == [
        "py", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4",
        "-m", "training", "train", "--gpus", "4",
    ]  # fmt: skip


def test_tf_gpus_n_is_model_gardens_mirrored_strategy_over_the_global_batch(
    tiny_dataset: Path, frameworks_in_process: None
) -> None:
    from training.experiment import build_config

    params = build_config(
        preset="small", dataset=tiny_dataset, batch_size=2 * 4, precision="float16", seed=0,
        num_gpus=4, distribution_strategy="mirrored",
    )  # fmt: skip
    assert params.runtime.distribution_strategy == "mirrored" and params.runtime.num_gpus == 4
    assert params.task.train_data.global_batch_size == 8
    one = build_config(preset="small", dataset=tiny_dataset, batch_size=2, precision="float32", seed=0)
    assert one.runtime.distribution_strategy == "one_device"
