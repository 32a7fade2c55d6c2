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
    r"^cpu_ms_per_tick_10ms=(\S+) cpu_ms_per_tick_1s=(\S+) late_p99_ms_at_100ms=(\S+) ratio_vs_shell=(\S+)$"
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
    at_10ms, at_1s, late_p99, ratio = (float(value) for value in match.groups())
    # Measured on `python -m collect run`; how much is the bench's to say on a quiet machine (README), not a
    # test's beside a training on the other worker.
    assert at_10ms > 0 and at_1s > 0 and late_p99 >= 0
    assert ratio != ratio  # nan: nothing to compare against
    assert "where a 10 ms tick's CPU goes" in result.stdout
    floor_line = r"waking on the deadline (\S+) ms; .* row (\S+) ms; .*/proc/PID/stat (\S+) ms"
    floor = re.search(floor_line, result.stdout)
    assert floor, result.stdout
    wake, system, with_tree = (float(value) for value in floor.groups())
    assert 0 < wake < with_tree < 50 and system > 0  # reading and writing cost more than waking
    for part in ("source cpu", "writing the row", "progress line", "housekeeping", "the loop"):
        assert f"  {part}" in result.stdout, part
