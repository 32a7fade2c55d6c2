"""What each NVML call of the collector costs, and how often its value really changes.

On an H100 in a Firecracker VM (driver 580) the NVML source took 3.9 ms of CPU per sample, 97 % of a
10 ms tick (docs/gpu-evidence.md). This times each call the source makes (collect.sources.nvml,
NvmlSource.calls) with the thread's CPU clock, then reads each one every 10 ms for a few seconds and
counts how often its value changed: a value that changes every 100 ms gains nothing from a 10 ms tick.

    python bench/nvml_cost.py            # 200 calls each, 3 s at 10 ms
    python bench/nvml_cost.py --quick    # 20 calls, 0.5 s (what the tests run; nan without a GPU)

Last line: cpu_ms_per_sample=<ms> slowest_call_ms=<ms> energy_changes_per_s=<n> power_changes_per_s=<n>
(nan without NVML; the changes per second of the first GPU's energy counter and instant power, else
average power, read every 10 ms).
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collect.sources.base import SourceUnavailable
from collect.sources.nvml import NvmlSource


def _load_pynvml():
    import pynvml

    return pynvml


def cpu_ms(read, calls: int) -> float:
    started = time.thread_time()
    for _ in range(calls):
        try:
            read()
        except Exception:
            return math.nan
    return (time.thread_time() - started) / calls * 1000


def changes_per_s(read, seconds: float, key: str) -> float:
    values, deadline, end = [], time.monotonic(), time.monotonic() + seconds
    while deadline < end:
        try:
            values.append(read().get(key))
        except Exception:
            return math.nan
        deadline += 0.01
        time.sleep(max(0.0, deadline - time.monotonic()))
    return sum(a != b for a, b in itertools.pairwise(values)) / seconds


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.seconds = 20, 0.5
    nan = float("nan")
    try:
        source = NvmlSource(_load_pynvml)
    except SourceUnavailable as exc:
        print(f"no NVML here: {exc}")
        print(f"cpu_ms_per_sample={nan} slowest_call_ms={nan} ", end="")
        print(f"energy_changes_per_s={nan} power_changes_per_s={nan}")
        return 0
    costs = {what: cpu_ms(read, args.calls) for what, read in source.calls()}
    for what, ms in sorted(costs.items(), key=lambda item: -item[1] if math.isfinite(item[1]) else 0):
        print(f"{what:28s} {1000 * ms:9.1f} µs CPU per call")
    per_sample = sum(v for v in costs.values() if math.isfinite(v))
    calls = dict(source.calls())
    energy = changes_per_s(calls["gpu0 total energy"], args.seconds, "energy_j")
    power = changes_per_s(calls["gpu0 instant power"], args.seconds, "power_instant_w")
    if math.isnan(power):
        power = changes_per_s(calls["gpu0 power"], args.seconds, "power_w")
    source.close()
    print(
        f"read every 10 ms for {args.seconds:g} s: energy counter changed {energy:.1f}/s, power {power:.1f}/s"
    )
    slowest = max((v for v in costs.values() if math.isfinite(v)), default=nan)
    print(
        f"cpu_ms_per_sample={per_sample:.3f} slowest_call_ms={slowest:.3f} "
        f"energy_changes_per_s={energy:.1f} power_changes_per_s={power:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
