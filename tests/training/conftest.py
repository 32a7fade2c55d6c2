"""Shared, real fixtures, each made once per session: one short real training run per framework, each
through the README's `collect_cpu.sh` (TensorFlow's is tests/conftest.py's, shared with
timed/test_scripts.py; torch's runs where `import tensorflow` fails), reused by the slow tests. The tiny
dataset is tests/conftest.py's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from trainfixtures import REPO, CompletedRun, cli_in, no_tensorflow_env


@pytest.fixture(scope="session")
def trained_run(cpu_script_run: Any) -> CompletedRun:
    """The session's one TensorFlow run (tests/conftest.py: `collect_cpu.sh 90s` on the tiny dataset, then
    export, evaluate, detect and the inference benchmark), as the training tests read it: what the training
    itself printed, stdout and stderr together, is the run's command.log."""
    (run_dir,) = (cpu_script_run.data_dir / "runs").iterdir()
    printed = (run_dir / "command.log").read_text()
    return CompletedRun(run_dir, cpu_script_run.dataset, cpu_script_run.result.returncode, printed, printed)


@pytest.fixture(scope="session")
def no_tf_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return no_tensorflow_env(tmp_path_factory.mktemp("no-tensorflow"))


@pytest.fixture(scope="session")
def torch_run(no_tf_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The session's one torch training, as the README runs it and without TensorFlow:
    `./scripts/collect_cpu.sh 3m --framework torch`, stopped after 8 steps, on its own 12 + 3 images, then
    every phase (export, evaluation, detections, inference with its two ONNX conversions). `done` is the
    script's; `--verbose` shows the training's own output. Tests that change the run directory work on a
    copy."""
    root = tmp_path_factory.mktemp("torch")
    dataset, data_dir = root / "waldo", root / "data"
    made = cli_in(no_tf_env, "dataset", "--out", str(dataset), "--train", "12", "--val", "3", "--seed", "3")
    assert made.returncode == 0, made.stderr
    done = subprocess.run(
        [str(REPO / "scripts" / "collect_cpu.sh"), "3m", "--framework", "torch", "--max-steps", "8",
         "--data-dir", str(data_dir), "--dataset", str(dataset), "--interval", "0.5s", "--verbose"],
        cwd=REPO, env=no_tf_env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    runs = list((data_dir / "runs").iterdir()) if (data_dir / "runs").is_dir() else []
    assert len(runs) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    return {"dataset": dataset, "run_dir": runs[0], "done": done, "env": no_tf_env}
