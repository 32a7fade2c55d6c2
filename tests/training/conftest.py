"""Shared, real fixtures, each made once per session: one short real training run per framework
(TensorFlow, shared with timed/test_scripts.py; torch where `import tensorflow` fails) reused by the slow
tests. The tiny dataset is tests/conftest.py's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from trainfixtures import CompletedRun, cli_in, no_tensorflow_env


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
    """A real `--framework torch` train of 8 steps on its own 12 + 3 images, then every phase, without
    TensorFlow. Tests that change the run directory work on a copy (test_evaluate_alone_… rewrites
    eval.json only)."""
    root = tmp_path_factory.mktemp("torch")
    dataset, run_dir = root / "waldo", root / "run"
    made = cli_in(no_tf_env, "dataset", "--out", str(dataset), "--train", "12", "--val", "3", "--seed", "3")
    assert made.returncode == 0, made.stderr
    trained = cli_in(
        no_tf_env,
        "train",
        "--framework",
        "torch",
        "--run-dir",
        str(run_dir),
        "--dataset",
        str(dataset),
        "--duration",
        "5m",
        "--max-steps",
        "8",
        "--checkpoint-every",
        "1s",
        "--infer-duration",
        "0.5s",
        timeout=900,  # every phase, the two ONNX conversions included, on a shared CPU
    )
    return {"dataset": dataset, "run_dir": run_dir, "done": trained, "env": no_tf_env}
