"""`--procs N` / `--gpus N|all` of the scripts and `collect timed`: refusals, the training command, and a
real `--procs 1,2` sweep (torch DDP over gloo on this CPU, one run directory per count)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collect.devicecount import counts_problem, parse_counts
from collect.sources import Hardware
from collect.sweep import SweepStep, new_sweep, run_sweep, sweep_exit_code
from collect.timed import build_parser, device_counts, matching_command, training_command

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "collect"))
from collectfakes import two_fake_gpus  # noqa: E402


def _script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO / "scripts" / name), *args], cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("script", "options", "message"),
    [
        ("collect_cpu.sh", ["--gpus", "2"], "--gpus is for GPUs (collect_gpu.sh)"),
        ("collect_cpu.sh", ["--procs", "0", "--framework", "torch"], "--procs 0: expected whole numbers"),
        ("collect_cpu.sh", ["--procs", "1,x", "--framework", "torch"], "expected whole numbers >= 1"),
        ("collect_cpu.sh", ["--procs", "2"], "--procs N > 1 needs --framework torch"),
        ("collect_gpu.sh", ["--procs", "2", "--framework", "torch"], "--procs is for the CPU"),
        ("collect_gpu.sh", ["--gpus", "0"], "--gpus 0: expected whole numbers"),
    ],
)
def test_bad_device_counts_exit_2_with_one_line_before_anything_starts(
    script: str, options: list[str], message: str, tmp_path: Path
) -> None:
    done = _script(script, "10s", "--data-dir", str(tmp_path / "data"), *options)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "data").exists()


def test_gpus_beyond_the_node_are_refused_by_nvml_count() -> None:
    hardware = Hardware(load_nvml=two_fake_gpus, environ={})
    args = build_parser().parse_args(["10m", "--device", "gpu", "--gpus", "3"])
    assert device_counts(args, hardware) == ([3], "--gpus 3: this node has 2 GPU(s) visible")
    everything = build_parser().parse_args(["10m", "--device", "gpu", "--gpus", "all"])
    assert device_counts(everything, hardware) == ([2], None)
    sweep = build_parser().parse_args(["10m", "--device", "gpu", "--gpus", "1,2"])
    assert device_counts(sweep, hardware) == ([1, 2], None)
    one_visible = Hardware(load_nvml=two_fake_gpus, environ={"CUDA_VISIBLE_DEVICES": "1"})
    assert device_counts(sweep, one_visible)[1] == "--gpus 2: this node has 1 GPU(s) visible"


def test_python_m_collect_timed_refuses_gpus_on_the_cpu(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "collect", "timed", "10s", "--gpus", "2", "--data-dir", str(tmp_path / "d")],
        cwd=REPO, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--gpus is for GPUs" in done.stderr
    assert not (tmp_path / "d").exists()


def test_counts_parse_and_reach_the_training_command() -> None:
    assert parse_counts("1,2,4,8", "--gpus") == [1, 2, 4, 8] and parse_counts("all", "--gpus") == "all"
    with pytest.raises(ValueError, match="appears twice"):
        parse_counts("2,2", "--procs")
    assert counts_problem("cpu", "tf", "1", None) is None  # one TensorFlow process is fine
    args = build_parser().parse_args(["10m", "--device", "gpu", "--framework", "torch", "--gpus", "4"])
    command = training_command(args, 4)
    assert command[-2:] == ["--gpus", "4"] and command[command.index("--device") + 1] == "gpu"
    assert "--procs 4" in matching_command(args)
    cpu = build_parser().parse_args(["10m", "--framework", "torch", "--procs", "2"])
    assert training_command(cpu, 2)[-2:] == ["--procs", "2"] and "--gpus 2" in matching_command(cpu)


def test_an_interrupted_sweep_runs_no_further_count(tmp_path: Path) -> None:
    sweep = new_sweep("gpus", [1, 2, 4])
    seen: list[tuple[int, dict]] = []

    def run_one(count: int, tag: dict) -> tuple[int, Path | None]:
        seen.append((count, tag))
        return (130 if count == 2 else 0), tmp_path / f"run{count}"

    steps = run_sweep(sweep, run_one)
    assert [s.count for s in steps] == [1, 2] and sweep_exit_code(steps) == 130
    assert seen[1][1]["sweep"] == {"id": sweep.id, "devices": "gpus", "counts": [1, 2, 4], "count": 2,
                                   "position": 1}  # fmt: skip
    assert sweep_exit_code([SweepStep(1, 0, None), SweepStep(2, 1, None)]) == 1


def without_thread_choice() -> dict[str, str]:
    """The environment less the suite's OMP_NUM_THREADS (tests/conftest.py): the product chooses."""
    return {name: value for name, value in os.environ.items() if name != "OMP_NUM_THREADS"}


@pytest.mark.slow
def test_a_procs_sweep_records_one_tagged_run_per_count(tmp_path: Path) -> None:
    """The README's command, kept short, with no dataset given: the script generates the default one,
    once, before the first count's ranks look for it."""
    done = subprocess.run(
        [str(REPO / "scripts" / "collect_cpu.sh"), "3m", "--framework", "torch", "--procs", "1,2",
         "--max-steps", "3", "--no-export", "--data-dir", str(tmp_path / "data")],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=without_thread_choice(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    generated = json.loads((tmp_path / "data" / "datasets" / "waldo" / "dataset.json").read_text())
    assert generated["kind"] == "synthetic" and generated["splits"]["train"]["images"] == 256
    runs = sorted((tmp_path / "data" / "runs").iterdir())
    assert len(runs) == 2
    logs = [(run / "command.log").read_text() for run in runs]
    assert ["generating the default one" in log for log in logs] == [True, False]
    tags = [json.loads((run / "run.json").read_text())["sweep"] for run in runs]
    assert tags[0]["id"] == tags[1]["id"] and [t["count"] for t in tags] == [1, 2]
    assert all(t["devices"] == "procs" and t["counts"] == [1, 2] for t in tags)
    trainings = [json.loads((run / "training.json").read_text()) for run in runs]
    assert [t["world_size"] for t in trainings] == [1, 2]
    assert [t["per_device_batch_size"] for t in trainings] == [2, 2] and trainings[1]["batch_size"] == 4
    assert trainings[1]["torch_threads"] == max(1, len(os.sched_getaffinity(0)) // 2)  # cores shared out
    labels = [json.loads((run / "run.json").read_text())["label"] for run in runs]
    assert labels == ["cpu torch small 3m x1 procs", "cpu torch small 3m x2 procs"]
    ids = " ".join(run.name for run in runs)
    expected = f"scaling verdict: .venv/bin/python -m sizing {ids} --data-dir {tmp_path / 'data'} --out"
    assert expected in done.stdout


def _collector_with_two_ranks(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    from training.dataset import generate_dataset

    dataset = tmp_path / "waldo"
    generate_dataset(dataset, size=256, train=12, val=3, seed=3)
    collector = subprocess.Popen(
        [sys.executable, "-m", "collect", "timed", "5m", "--framework", "torch", "--procs", "2",
         "--no-export", "--data-dir", str(tmp_path / "data"), "--dataset", str(dataset)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        found = list((tmp_path / "data" / "runs").glob("*/training.csv"))
        if found and len(found[0].read_text().splitlines()) >= 2:  # header + the first step
            return collector, found[0].parent
        assert collector.poll() is None, "the collector ended before the first step"
        time.sleep(0.5)
    raise AssertionError("no training step within 300 s")


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["ctrl-c", "kill -9 of the collector"])
def test_a_stop_of_the_collector_reaches_every_rank_and_leaves_one_checkpoint(
    stop: str, tmp_path: Path
) -> None:
    collector, run_dir = _collector_with_two_ranks(tmp_path)
    os.kill(collector.pid, signal.SIGINT if stop == "ctrl-c" else signal.SIGKILL)
    collector.wait(timeout=120)
    deadline = time.monotonic() + 120  # after kill -9 the watchdog stops the training on its own
    info = json.loads((run_dir / "training.json").read_text())
    while info["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
        info = json.loads((run_dir / "training.json").read_text())
    assert info["status"] == "interrupted" and info["replicas_in_sync"] is True, info.get("error")
    assert info["last_checkpoint"] == f"checkpoints/ckpt-{info['global_step']}.pt"
    assert (run_dir / info["last_checkpoint"]).is_file()
    if stop == "ctrl-c":
        assert collector.returncode == 130
        assert json.loads((run_dir / "run.json").read_text())["end_reason"] == "interrupted"
