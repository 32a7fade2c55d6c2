"""Helpers shared by the training tests: run the real CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from runformat import RUN_DIR_ENV

REPO = Path(__file__).resolve().parents[2]
TRAIN_STEPS = 60


@dataclass(frozen=True)
class CompletedRun:
    run_dir: Path
    dataset: Path
    returncode: int
    stdout: str
    stderr: str
    wall_s: float


def training_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != RUN_DIR_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_training_cli(*args: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "training", *args],
        cwd=REPO,
        env=training_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
