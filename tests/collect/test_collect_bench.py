"""bench/sampler_overhead.py runs here, and without the shell tools it compares against."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAST_LINE = re.compile(
    r"^cpu_ms_per_sample=(\S+) late_p99_ms_at_100ms=(\S+) ratio_vs_shell=(\S+) prometheus_ms_per_tick=(\S+)$"
)


@pytest.mark.slow
def test_benchmark_runs_without_mpstat_iostat_free_or_sensors(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(shutil.which("sleep"), bin_dir / "sleep")  # the benchmark's command tree needs only sleep
    env = {**os.environ, "PATH": str(bin_dir)}
    result = subprocess.run(
        [sys.executable, "bench/sampler_overhead.py", "--scale", "0.05"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert "shell tools (none installed)" in result.stdout
    match = LAST_LINE.match(lines[-1])
    assert match, lines[-1]
    cpu_ms, late_p99, ratio, prometheus_ms = (float(value) for value in match.groups())
    assert 0 < cpu_ms < 50 and late_p99 >= 0 and 0 < prometheus_ms < cpu_ms
    assert ratio != ratio  # nan: nothing to compare against
