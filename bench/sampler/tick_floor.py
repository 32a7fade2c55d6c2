"""The floor under a tick on this machine: what a Python process pays to wake on a deadline, to also write
one row, and to also do the kernel reads a tick does, with nothing parsed or formatted (sampler_overhead.py).

The collector's own CPU per tick minus this floor is what its Python costs; the floor itself is the
machine's (waking, and the kernel generating /proc files, with caches gone cold after each sleep).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SYSTEM_FILES = ("/proc/stat", "/proc/meminfo", "/proc/diskstats", "/proc/net/dev")

# Runs in its own process, so that its CPU time is only the loop's. argv: interval, ticks, csv path, files...
_FLOOR_LOOP = """
import json, os, select, sys, time
interval, ticks, csv_path = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
system_files, process_files = sys.argv[4].split(","), sys.argv[5].split(",") if sys.argv[5] else []
cpu_ns = time.process_time_ns  # one thread: the process's CPU is the loop's
wake_r, _ = os.pipe()
system_fds = [os.open(path, os.O_RDONLY) for path in system_files]
process_fds = [os.open(path, os.O_RDONLY) for path in process_files]
out = os.open(csv_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
row = (",".join(["1234.5678"] * 24) + "\\n").encode()
result = {}
for mode, fds in (("wake", None), ("write", []), ("system", system_fds), ("all", system_fds + process_fds)):
    t0 = time.monotonic()
    started = cpu_ns()
    for k in range(1, ticks + 1):
        timeout = t0 + k * interval - time.monotonic()
        if timeout > 0:
            select.select([wake_r], [], [], timeout)
        if fds is not None:
            for fd in fds:
                os.pread(fd, 16384, 0)
            os.write(out, row)
    result[mode] = (cpu_ns() - started) / ticks / 1e6
print(json.dumps(result))
"""


def tick_floor_ms(
    interval_s: float, duration_s: float, process_pids: list[int], workdir: Path
) -> dict[str, float]:
    """ms of CPU per tick: "wake" (waking only), "write" (+ one row written), "system" (+ the system files
    read too), "all" (+ the processes' /proc/PID/stat too)."""
    process_files = ",".join(f"/proc/{pid}/stat" for pid in process_pids)
    ticks = max(50, round(duration_s / interval_s))
    csv_path = str(workdir / "floor.csv")
    argv = [sys.executable, "-c", _FLOOR_LOOP, f"{interval_s:g}", str(ticks), csv_path]
    argv += [",".join(SYSTEM_FILES), process_files]
    result = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=duration_s * 6 + 60)
    floor: dict[str, float] = json.loads(result.stdout)
    return floor
