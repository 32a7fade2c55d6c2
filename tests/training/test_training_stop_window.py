"""The training's stop request: signals that arrive together (a scheduler signals every process of a job,
the collector passes the stop on) are one stop; a second signal later is the user insisting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import os, signal, sys, time
from training.trainer import StopRequest
stop = StopRequest()
stop.install()
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.2)
os.kill(os.getpid(), signal.SIGINT)  # the collector's SIGINT, a moment after Slurm's SIGTERM
time.sleep(0.2)
print("still stopping gracefully after", signal.Signals(stop.signum).name, flush=True)
time.sleep(float(sys.argv[1]))
os.kill(os.getpid(), signal.SIGINT)
time.sleep(0.5)
print("survived the late signal", flush=True)
"""


def _run(late_after_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(late_after_s)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def test_signals_together_are_one_stop_and_a_later_one_insists() -> None:
    done = _run(1.5)
    assert "still stopping gracefully after SIGTERM" in done.stdout, done.stderr
    assert "finishing the current step, then a final checkpoint" in done.stdout
    assert done.returncode == 130  # 128 + SIGINT: the late second signal exits at once
    assert "second signal: exiting without a final checkpoint" in done.stderr
    assert "survived" not in done.stdout
