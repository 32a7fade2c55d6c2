"""The entry-point scripts, run for real: usage errors, GPU refusal, and a whole short CPU run."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"


def run_script(name: str, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / name), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **env},
    )


@pytest.mark.parametrize("script", ["collect_cpu.sh", "collect_gpu.sh"])
@pytest.mark.parametrize("duration", ["75x", "0", "-5m", "", "1h1h"])
def test_bad_duration_is_one_line_and_exit_2(script: str, duration: str) -> None:
    result = run_script(script, duration)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "duration" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("script", ["collect_cpu.sh", "collect_gpu.sh"])
@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--framework", "pytorch"], "--framework pytorch: expected tf (TensorFlow Model Garden) or torch "
         "(torchvision)"),
        (["--batch", "0"], "--batch 0: expected a whole number ≥ 1"),
        (["--precision", "bfloat16"], "--precision bfloat16: expected float32 or mixed"),
        (["--precision", "_x", "--", "python3", "t.py"], "--precision '_x': expected a dtype name (float32, "
         "bfloat16, mixed_float16...)"),
        (["--batch"], "argument --batch: expected one argument"),  # one line, not argparse's usage block
        (["--interval", "-1s"], "bad interval '-1s': use e.g. 90s, 75m, 2h, 1h30m or 100ms"),
        (["--checkpoint-every", "-5s"], "bad duration '-5s': use e.g. 90s, 75m, 2h, 1h30m or 100ms"),
        (["--interval", "5ms", "--", "python3", "t.py"], "interval '5ms' is below the minimum of 10ms"),
    ],
)  # fmt: skip
def test_a_bad_option_is_refused_before_anything_is_installed(
    script: str, options: list[str], said: str, tmp_path: Path
) -> None:
    """`--framework pytorch` was read as TensorFlow by the installer: 3.3 GB installed, then refused."""
    venv = tmp_path / "venv"
    result = run_script(script, "10m", *options, WORKBENCH_VENV=str(venv))
    assert result.returncode == 2 and not venv.exists()
    assert result.stderr == f"{script}: error: {said} (see --help)\n"


@pytest.mark.parametrize("script", ["collect_cpu.sh", "collect_gpu.sh"])
def test_no_arguments_prints_usage_and_exit_2(script: str) -> None:
    result = run_script(script)
    assert result.returncode == 2
    assert result.stderr.startswith("Usage:")


@pytest.mark.parametrize("script", ["collect_cpu.sh", "collect_gpu.sh", "dashboard.sh", "test.sh"])
def test_help(script: str) -> None:
    result = run_script(script, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("Usage:")


def test_gpu_script_fails_fast_without_a_gpu(tmp_path: Path) -> None:
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver")
    started = time.monotonic()
    result = run_script("collect_gpu.sh", "10s", "--data-dir", str(tmp_path))
    assert time.monotonic() - started < 10
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert "NVIDIA" in result.stderr
    assert not (tmp_path / "runs").exists()


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_collect_cpu_short_run_end_to_end(cpu_script_run: Any) -> None:
    """The suite's one TensorFlow script run (tests/conftest.py), on the tiny dataset: the torch one is
    tests/training/conftest.py's `torch_run`; the script generating a missing dataset is
    timed/test_devices.py's procs sweep."""
    result, tmp_path = cpu_script_run.result, cpu_script_run.data_dir
    budget_s = float(cpu_script_run.budget.removesuffix("s"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1
    run_dir = runs[0]
    for name in (
        "run.json",
        "telemetry.csv",
        "command.log",
        "training.csv",
        "training.json",
        "phases.csv",
        "eval.json",
        "detections/detections.json",
        "model/saved_model.pb",
    ):
        assert (run_dir / name).exists(), name
    assert list((run_dir / "detections").glob("*.png"))
    assert list((run_dir / "checkpoints").glob("ckpt-*.index"))

    run = json.loads((run_dir / "run.json").read_text())
    assert run["end_reason"] == "completed"
    assert run["exit_code"] == 0
    assert run["label"] == "e2e"
    assert run["command"][1:4] == ["-m", "training", "train"]

    training = json.loads((run_dir / "training.json").read_text())
    assert training["status"] == "deadline"
    assert training["steps"] > 5
    # The budget is the training's: training ends within it (plus one step), export etc. come after.
    assert training["end_unix"] - training["start_unix"] < budget_s + 10

    phases = {row["phase"]: row for row in _rows(run_dir / "phases.csv")}
    assert set(phases) == {"train", "export", "evaluate", "detect", "infer"}
    assert all(row["status"] == "ok" for row in phases.values())
    assert float(phases["export"]["start_unix"]) >= float(phases["train"]["end_unix"])

    evaluation = json.loads((run_dir / "eval.json").read_text())
    assert 0.0 <= evaluation["map_50"] <= 1.0

    # One clock: every training step lies inside the telemetry's span, which covers the whole run.
    telemetry = _rows(run_dir / "telemetry.csv")
    steps = _rows(run_dir / "training.csv")
    t_first, t_last = float(telemetry[0]["time_unix"]), float(telemetry[-1]["time_unix"])
    assert t_first <= float(steps[0]["time_unix"]) and float(steps[-1]["time_unix"]) <= t_last
    assert t_last >= float(phases["infer"]["end_unix"]) - 1.0
    inference = json.loads((run_dir / "inference.json").read_text())
    assert inference["status"] == "completed" and inference["batch_sizes"] == [1, 4]
    assert "tf-savedmodel" in {r["runtime"] for r in inference["runtimes"] if r["available"]}
    # the serving figures come from this run's own files: energy per image needs RAPL or NVML (or a TDP)
    from sizing.analysis.load import load_run_dir
    from sizing.analysis.serving import serving_section
    from sizing.model import Prices

    section = serving_section([load_run_dir(run_dir)], Prices(cpu_tdp_w=65.0))
    assert {row.runtime for row in section.rows} >= {"tf-savedmodel"}
    for row in section.rows:
        assert row.images_per_s > 0 and row.cpu_cores_used is not None
        assert row.joules_per_1000_images is not None and row.joules_per_1000_images > 0
        assert row.energy_method == "CPU package (RAPL)" or row.energy_method.startswith("ESTIMATE")
    assert abs(t_first - run["start_unix"]) < 2.0

    assert "Run " in result.stdout and str(run_dir) in result.stdout
    assert "steps/s" in result.stdout and "mAP@0.5" in result.stdout and "inference:" in result.stdout


def test_precision_reaches_the_training_and_the_other_device_command_matches() -> None:
    from collect.timed import build_parser, matching_command, training_command

    args = build_parser().parse_args(["10m", "--device", "gpu", "--preset", "standard", "--batch", "8",
                                      "--precision", "mixed"])  # fmt: skip
    command = training_command(args)
    assert command[command.index("--precision") + 1] == "float16"  # the GPU's mixed precision
    expected = "./scripts/collect_cpu.sh 10m --preset standard --batch 8 --precision mixed"
    assert matching_command(args) == expected
    cpu = build_parser().parse_args(["10m", "--precision", "mixed"])
    assert training_command(cpu)[training_command(cpu).index("--precision") + 1] == "bfloat16"
    default = build_parser().parse_args(["90s"])
    assert "--precision" not in training_command(default)  # the workload's own default: float32 everywhere
    assert matching_command(default) == "./scripts/collect_gpu.sh 90s --preset small"
    bounded = build_parser().parse_args(
        ["20s", "--data-dir", "/tmp/d", "--no-export", "--max-steps", "3", "--precision", "float32"]
    )
    assert matching_command(bounded) == (
        "./scripts/collect_gpu.sh 20s --preset small --precision float32 --data-dir /tmp/d --max-steps 3"
    )


def test_bad_precision_is_a_usage_error() -> None:
    result = run_script("collect_cpu.sh", "10s", "--precision", "float16")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--precision" in result.stderr
    assert "--precision float32|mixed" in run_script("collect_gpu.sh", "--help").stdout


@pytest.mark.slow
def test_a_short_real_run_prints_the_matching_gpu_command(cpu_script_run: Any) -> None:
    result, tmp_path = cpu_script_run.result, cpu_script_run.data_dir
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    training = json.loads((run_dir / "training.json").read_text())
    assert training["precision"] == "float32" and training["gpu_uuids"] == []
    expected = (
        f"the same workload on the other device: ./scripts/collect_gpu.sh {cpu_script_run.budget} "
        f"--preset small --data-dir {tmp_path}\n"
    )
    assert expected in result.stdout
    header = (run_dir / "telemetry.csv").read_text().splitlines()[0].split(",")
    assert "cpu_iowait_pct" in header


def test_torch_framework_installs_the_torch_extra_only() -> None:
    def extras(*args: str) -> str:
        command = f'source "{SCRIPTS}/lib.sh"; framework_extras "$@"'
        done = subprocess.run(
            ["bash", "-c", command, "extras", *args], capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    assert extras("train,dashboard", "10m") == "train,dashboard"
    assert extras("train,dashboard", "10m", "--framework", "torch") == "torch,dashboard"
    assert extras("train,gpu,dashboard", "10m", "--label", "x", "--framework=torch") == "torch,dashboard"
    assert extras("train,gpu,dashboard", "10m", "--framework", "tf") == "train,gpu,dashboard"
