"""What each NVML call of the collector costs, and how often its value really changes.

On an H100 in a Firecracker VM (driver 580) the NVML source took 3.9 ms of CPU per sample, 97 % of a
10 ms tick (docs/gpu-evidence.md). This times each call the source makes (collect.sources.nvml,
NvmlSource.calls) with the thread's CPU clock, first back to back (caches warm), then as the collector
makes them: every call once per 10 ms tick, sleeping in between (the total-energy counter every
ENERGY_MIN_PERIOD_S, as the source reads it), with how often each call's value changed, and the cost of
the source's whole sample() called on the same ticks. A value that changes every 100 ms gains nothing
from a 10 ms tick. Where the GPUs have GPM (collect.sources.gpm), it also times one read of the profiling
counters (a snapshot and every metric since the last, per GPU), back to back and every GPM_PERIOD_S on the
10 ms grid as the collector reads them.

    python bench/nvml_cost.py            # 200 calls each, 3 s of 10 ms ticks
    python bench/nvml_cost.py --quick    # 20 calls, 0.5 s (what the tests run; nan without a GPU)

Last line: cpu_ms_per_sample=<ms> tick_ms_per_sample=<ms> energy_changes_per_s=<n> power_changes_per_s=<n>
           gpm_ms_per_read=<ms>
(nan without NVML, the last without GPM; cpu_ms_per_sample: every call once, back to
back; tick_ms_per_sample: one sample() of the source, called on 10 ms ticks (the collector calls it every
GPU_HELD_PERIOD_S there); the changes per second of the first GPU's energy counter and instant power, else
average power, read every 10 ms; gpm_ms_per_read: one read of every GPU's profiling counters, on the
collector's grid.)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collect.sources.base import SourceUnavailable
from collect.sources.gpm import GPM_PERIOD_S, GpmSource
from collect.sources.nvml import ENERGY_MIN_PERIOD_S, NvmlSource, read_due

TICK_S = 0.01
NOTHING = "(a Python call, no NVML)"  # what any call costs on a tick: the floor under the calls above
Read = Callable[[], dict]


def _load_pynvml():
    import pynvml

    return pynvml


def cpu_ms(read: Read, calls: int) -> float:
    started = time.thread_time()
    for _ in range(calls):
        try:
            read()
        except Exception:
            return math.nan
    return (time.thread_time() - started) / calls * 1000


def _ticks(seconds: float):
    """Yield once per 10 ms deadline for `seconds`, sleeping in between, as the collector's loop does."""
    deadline, end = time.monotonic(), time.monotonic() + seconds
    while deadline < end:
        yield deadline
        deadline += TICK_S
        time.sleep(max(0.0, deadline - time.monotonic()))


def in_ticks(calls: list[tuple[str, Read]], seconds: float) -> tuple[dict[str, float], dict[str, float]]:
    """Per call ("gpu0 utilization"): µs of CPU per call and changes of its value per second, every call once
    per 10 ms tick, or as often as the source reads it where it holds the call (nvml.read_due: the total
    energy every ENERGY_MIN_PERIOD_S)."""
    cpu_ns: Counter[str] = Counter()
    made: Counter[str] = Counter()
    changes: Counter[str] = Counter()
    last: dict[str, object] = {}
    read_at: dict[str, float] = {}
    failed: set[str] = set()
    for now in _ticks(seconds):
        for what, read in calls:
            if what in failed:
                continue
            if not read_due(what.partition(" ")[2], read_at.get(what), now):
                continue
            read_at[what] = now
            started = time.thread_time_ns()
            try:
                value = read()
            except Exception:
                failed.add(what)
                continue
            cpu_ns[what] += time.thread_time_ns() - started
            made[what] += 1
            changes[what] += what in last and last[what] != value
            last[what] = value
    cost = {what: cpu_ns[what] / made[what] / 1000 if made[what] else math.nan for what, _ in calls}
    rate = {what: changes[what] / seconds if made[what] else math.nan for what, _ in calls}
    return cost, rate


def sample_in_ticks(source: NvmlSource, seconds: float) -> float:
    """ms of CPU per source.sample(now), called on every 10 ms tick (the collector calls it on every
    GPU_HELD_PERIOD_S below 34 ms: this is the cost of one sample, not of a tick)."""
    cpu_ns, ticks = 0, 0
    for now in _ticks(seconds):
        started = time.thread_time_ns()
        source.sample(now)
        cpu_ns += time.thread_time_ns() - started
        ticks += 1
    return cpu_ns / max(1, ticks) / 1e6


def gpm_read_ms(gpm: GpmSource, seconds: float) -> float:
    """ms of CPU per gpm.sample(now) (every GPU: a snapshot and all its metrics since the last), read on the
    10 ms grid once per GPM_PERIOD_S (whole ticks, as the collector's SourceSet holds it), at least once."""
    cpu_ns, reads, read_at = 0, 0, -math.inf
    for now in _ticks(seconds):
        if now < read_at + GPM_PERIOD_S - TICK_S / 2:
            continue
        read_at = now
        started = time.thread_time_ns()
        gpm.sample(now)
        cpu_ns += time.thread_time_ns() - started
        reads += 1
    return cpu_ns / max(1, reads) / 1e6


def _gpm(load_nvml: Callable[[], object]) -> GpmSource | None:
    try:
        return GpmSource(load_nvml)
    except SourceUnavailable as exc:
        print(f"no GPM here: {exc}")
        return None


def _first(rates: dict[str, float], *names: str) -> float:
    for name in names:
        if math.isfinite(rates.get(name, math.nan)):
            return rates[name]
    return math.nan


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.calls < 1 or not args.seconds > 0:
        parser.error("--calls must be >= 1 and --seconds > 0")
    if args.quick:
        args.calls, args.seconds = 20, 0.5
    nan = float("nan")
    try:
        source = NvmlSource(_load_pynvml)
    except SourceUnavailable as exc:
        print(f"no NVML here: {exc}")
        print(f"cpu_ms_per_sample={nan} tick_ms_per_sample={nan} ", end="")
        print(f"energy_changes_per_s={nan} power_changes_per_s={nan} gpm_ms_per_read={nan}")
        return 0
    calls = source.calls()
    costs = {what: cpu_ms(read, args.calls) for what, read in calls}
    tick_costs, rates = in_ticks([*calls, (NOTHING, dict)], args.seconds)
    tick_sample_ms = sample_in_ticks(source, args.seconds)
    source.close()
    gpm = _gpm(_load_pynvml)
    gpm_costs = {what: cpu_ms(read, args.calls) for what, read in gpm.calls()} if gpm else {}
    gpm_ms = gpm_read_ms(gpm, args.seconds) if gpm else math.nan
    if gpm:
        gpm.close()
    print(f"{'call':28s} {'back to back':>13s} {'on 10 ms ticks':>15s} {'changes/s':>10s}  (µs CPU per call)")
    for what, ms in sorted(costs.items(), key=lambda item: -item[1] if math.isfinite(item[1]) else 0):
        print(f"{what:28s} {1000 * ms:13.1f} {tick_costs[what]:15.1f} {rates[what]:10.1f}")
    per_sample = sum(v for v in costs.values() if math.isfinite(v))
    print(f"{NOTHING:28s} {'':13s} {tick_costs[NOTHING]:15.1f}")
    for what, ms in gpm_costs.items():
        print(f"{what:28s} {1000 * ms:13.1f}  (a snapshot and every GPM metric since the last)")
    if gpm_costs:
        print(
            f"GPM, every GPU read every {GPM_PERIOD_S:g} s on 10 ms ticks: {gpm_ms * 1000:.1f} µs CPU a read"
        )
    print(
        f"source.sample() on 10 ms ticks for {args.seconds:g} s: {tick_sample_ms * 1000:.1f} µs CPU each "
        f"(the energy counter read every {ENERGY_MIN_PERIOD_S:g} s)"
    )
    energy = _first(rates, "gpu0 total energy")
    power = _first(rates, "gpu0 instant power", "gpu0 power")
    print(
        f"cpu_ms_per_sample={per_sample:.3f} tick_ms_per_sample={tick_sample_ms:.3f} "
        f"energy_changes_per_s={energy:.1f} power_changes_per_s={power:.1f} gpm_ms_per_read={gpm_ms:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
