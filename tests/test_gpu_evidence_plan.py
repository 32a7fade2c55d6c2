"""bench/gpu_evidence.sh, the real-GPU plan, as far as a machine without a GPU can run it: its usage, and
`start` then `follow` running the `env` step in the background and bringing its files to $OUT, and the
`calibrate` step's refusal without a CUDA device."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PLAN = REPO / "bench" / "gpu_evidence.sh"


def _plan(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(PLAN), *args], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_usage_and_a_wrong_call() -> None:
    shown = _plan("--help")
    assert shown.returncode == 0 and "bench/gpu_evidence.sh start" in shown.stdout
    assert "GPU_INTERVAL=100ms" in shown.stdout and "SWEEP_PRECISION" in shown.stdout
    step = r"^ +calibrate +bench/gpu_calibrate\.py --seconds \$CALIBRATE_SECONDS"
    assert re.search(step, shown.stdout, re.M) and "CALIBRATE_SECONDS=15" in shown.stdout
    assert 'STEPS="env calibrate gpu"' in shown.stdout and "GPU_BUDGET=2m" in shown.stdout  # the default
    for wrong in ((), ("follow",), ("sideways",)):
        done = _plan(*wrong)
        assert done.returncode == 2 and "Usage:" in done.stderr, wrong


def test_start_then_follow_brings_the_env_step_back(tmp_path: Path) -> None:
    work, out = tmp_path / "work", tmp_path / "out"
    out.mkdir()
    started = _plan("start", str(work), env={"STEPS": "env"})
    assert started.returncode == 0 and f"started: {work}" in started.stdout, started.stderr
    followed = _plan("follow", "90", str(work), env={"OUT": str(out)})
    assert followed.returncode == 0
    assert "env: done" in followed.stdout and "plan: done" in followed.stdout
    assert sorted(p.name for p in out.iterdir()) == ["env.txt", "plan.log"]
    assert str(len(os.sched_getaffinity(0))) in (out / "env.txt").read_text().split()  # nproc's line
    assert not (work / "repo" / ".venv").exists() and (work / "repo" / "scripts" / "collect_gpu.sh").is_file()


def _python3_has_cuda() -> bool:
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    python3 = shutil.which("python3")
    return python3 is not None and subprocess.run([python3, "-c", code], capture_output=True).returncode == 0


def test_the_calibrate_step_without_a_gpu_says_so_and_packs_nothing(tmp_path: Path) -> None:
    if _python3_has_cuda():
        pytest.skip("python3 sees a CUDA device: the step would run its loads")
    work, out = tmp_path / "work", tmp_path / "out"
    out.mkdir()
    started = _plan("start", str(work), env={"STEPS": "calibrate"})
    assert started.returncode == 0, started.stderr
    followed = _plan("follow", "90", str(work), env={"OUT": str(out)})
    assert "calibrate: bench/gpu_calibrate.py --seconds 15" in followed.stdout
    assert "calibrate: exit 2" in followed.stdout and "plan: done" in followed.stdout
    assert sorted(p.name for p in out.iterdir()) == ["calibrate.txt", "plan.log"]  # no run, nothing packed
    assert (out / "calibrate.txt").read_text().startswith("no CUDA device: ")


def test_tunebench_takes_the_gpu_sweeps_chosen_setting_and_profile_each_setting(tmp_path: Path) -> None:
    """tunebench reads the setting of the GPU sweep's final run (the shipped H100 one: batch 2, bfloat16,
    TF32 off) into the bench's options; profile runs step_profile once per ';'-separated option list.
    Without a GPU each says so in the plan's log, and the plan goes on."""
    if _python3_has_cuda():
        pytest.skip("python3 sees a CUDA device: the steps would run")
    final = REPO / "data" / "examples" / "20261127T085638Z-gpu-vm"
    if not final.is_dir():
        pytest.skip("the shipped H100 sweep is missing")
    work, out = tmp_path / "work", tmp_path / "out"
    out.mkdir()
    work.mkdir()
    (work / "tune-gpu.final").write_text(f"{final}\n")
    env = {"STEPS": "tunebench profile", "PROFILE_SETTINGS": "--batch 1;--batch 1 --no-tf32"}
    assert _plan("start", str(work), env=env).returncode == 0
    log = _plan("follow", "90", str(work), env={"OUT": str(out)}).stdout
    expected = (
        "tunebench: train_throughput --device gpu --preset standard --batch 2 --precision bfloat16 --no-tf32"
    )
    assert expected in log and "tunebench: exit" in log
    assert "profile: --batch 1: exit" in log and "profile: --batch 1 --no-tf32: exit" in log
    assert "plan: done" in log and (out / "profile.txt").is_file()


def test_the_literal_step_runs_the_users_command_as_typed(tmp_path: Path) -> None:
    """`literal` is issue 34's done-when, `collect_gpu.sh 10m --tune --framework torch` with no option of the
    plan's own; without a GPU the script's one-line refusal reaches the plan's log and nothing is packed."""
    if Path("/proc/driver/nvidia").exists():
        pytest.skip("this machine has an NVIDIA driver: the step would train for LITERAL_BUDGET")
    work, out = tmp_path / "work", tmp_path / "out"
    out.mkdir()
    assert _plan("start", str(work), env={"STEPS": "literal"}).returncode == 0
    log = _plan("follow", "90", str(work), env={"OUT": str(out)}).stdout
    assert "literal: ./scripts/collect_gpu.sh 10m --tune --framework torch\n" in log
    assert "literal: exit 1" in log and "collect_gpu.sh: error: no NVIDIA driver found" in log
    assert "literal: no run directory" in log and "plan: done" in log
    assert sorted(p.name for p in out.iterdir()) == ["plan.log"]
