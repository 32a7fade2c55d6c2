"""Helpers shared by the training tests: run the real CLI in a subprocess, with or without TensorFlow."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from runformat import RUN_DIR_ENV

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CompletedRun:
    run_dir: Path
    dataset: Path
    returncode: int
    stdout: str
    stderr: str


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


def cli_in(env: dict[str, str], *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    """`python -m training ARGS` with the environment `env` (e.g. no_tensorflow_env's)."""
    return subprocess.run(
        [sys.executable, "-m", "training", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# A sitecustomize (put first on PYTHONPATH) whose meta path finder makes TensorFlow, Model Garden and Keras
# unimportable and writes each attempt to $BLOCKED_IMPORT_LOG: the torch path must do without them.
BLOCKER = """
import importlib.abc, importlib.machinery, os, sys

BLOCKED = ("tensorflow", "tf_keras", "keras", "official", "orbit")


class NoTensorFlow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    # Probes (importlib.util.find_spec, as torch._dynamo makes) get a spec; importing fails.
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            return importlib.machinery.ModuleSpec(name, self, origin=f"/blocked/{name}")
        return None

    def create_module(self, spec):
        with open(os.environ["BLOCKED_IMPORT_LOG"], "a") as log:
            log.write(spec.name + "\\n")
        raise ImportError(f"{spec.name} is blocked: the torch path must run without TensorFlow")

    def exec_module(self, module):
        raise ImportError(module.__name__)


sys.meta_path.insert(0, NoTensorFlow())
"""


def no_tensorflow_env(site: Path) -> dict[str, str]:
    """training_env() for processes where `import tensorflow` fails (BLOCKER written into `site`)."""
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = training_env()
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["BLOCKED_IMPORT_LOG"] = str(site / "blocked-imports.txt")
    return env
