"""Soak: the collector at 100 Hz for 10 minutes with a real, changing child process tree.

Runs the real CLI, `python -m collect run --interval 10ms --duration 10m -- bash -c TREE`: two long-lived
processes, and a short-lived one started every half second, so the process source follows a tree that
changes all the time. The collector's resident memory (VmRSS in /proc/<pid>/status) is read twice a second.
Its growth is the median of the last tenth of the readings minus the median of the readings from 10 % to
20 % of the run (the baseline, measured in the same run once imports, first rescans and buffers have
settled). Skipped deadlines and the lateness p99 come from the run's own run.json.

    .venv/bin/python bench/soak.py                 # 10 minutes
    .venv/bin/python bench/soak.py --duration 2m   # shorter
    .venv/bin/python bench/soak.py --quick         # 20 s (what the tests run)

Last line: `rss_growth_kb=<kB> skipped=<deadlines> late_p99_ms=<ms>` (goal: growth <= 5120 KB, 0 skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREE = "sleep 86400 & sleep 86400 & while :; do sleep 0.3 & sleep 0.5; done"
READ_EVERY_S = 0.5


def rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="10m", help="how long the collector runs (default 10m)")
    parser.add_argument("--interval", default="10ms", help="sampling interval (default 10ms = 100 Hz)")
    parser.add_argument("--quick", action="store_true", help="20 s instead of 10 minutes (the tests run it)")
    args = parser.parse_args()
    duration = "20s" if args.quick else args.duration
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        data_dir = Path(tmp) / "data"
        command = [
            sys.executable,
            "-m",
            "collect",
            "run",
            "--interval",
            args.interval,
            "--duration",
            duration,
            "--data-dir",
            str(data_dir),
            "--no-echo",
            "--",
            "bash",
            "-c",
            TREE,
        ]
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        print(f"collector at {args.interval} for {duration}, command tree: bash -c {TREE!r}", flush=True)
        started = time.monotonic()
        collector = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        readings: list[int] = []
        last_cpu = None
        while collector.poll() is None:
            value = rss_kb(collector.pid)
            if value is not None:
                readings.append(value)
                last_cpu = cpu_s(collector.pid) or last_cpu
            time.sleep(READ_EVERY_S)
        _, err = collector.communicate()
        wall_s = time.monotonic() - started
        if collector.returncode != 124:  # 124: stopped at its --duration, as asked
            print(f"soak: the collector exited with {collector.returncode}: {err.strip()}", file=sys.stderr)
            return 1
        (run_dir,) = (data_dir / "runs").iterdir()
        record = json.loads((run_dir / "run.json").read_text())
    tenth = max(1, len(readings) // 10)
    baseline = statistics.median(readings[tenth : 2 * tenth])
    final = statistics.median(readings[-tenth:])
    growth = final - baseline
    sampler = record["sampler"]
    print(
        f"{record['samples']} samples in {record['actual_duration_s']:.0f} s ({wall_s:.0f} s wall), "
        f"{record['late_ticks']} late, {record['skipped_ticks']} skipped; "
        f"late p50 {sampler['late_ms_p50']} ms, "
        f"p99 {sampler['late_ms_p99']} ms, max {sampler['late_ms_max']} ms; priority: {sampler['priority']}"
    )
    if last_cpu is not None:
        print(f"collector CPU: {last_cpu:.1f} s = {100 * last_cpu / wall_s:.1f} % of a core")
    print(
        f"collector RSS: {readings[0]} kB at start, baseline {baseline:.0f} kB, end {final:.0f} kB, "
        f"peak {max(readings)} kB ({len(readings)} readings)"
    )
    skipped, late_p99 = record["skipped_ticks"], sampler["late_ms_p99"]
    print(f"rss_growth_kb={growth:.0f} skipped={skipped} late_p99_ms={late_p99}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
