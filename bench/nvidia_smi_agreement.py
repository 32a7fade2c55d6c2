"""Does the collector's NVML record agree with nvidia-smi logged beside it? Second by second.

A run recorded with `nvidia-smi --query-gpu=timestamp,index,utilization.gpu,temperature.gpu,power.draw,
clocks.sm,memory.used,clocks_event_reasons.active --format=csv -lms 100` beside it keeps that log as
RUN/nvidia-smi.csv (bench/gpu_evidence.sh does this). Both are cut into whole seconds of wall-clock time;
each second's mean (the OR of the throttle bits) is compared where both have readings:

  utilization within 5 points, temperature within 1 °C, power within 5 % of nvidia-smi's, SM clock within
  1 %, memory used within 1 % or 16 MiB, the same throttle bits.

Energy: the board's counter (gpu0_energy_j) over the time both cover, against the collector's instant
power (gpu0_power_instant_w) and nvidia-smi's power.draw, each integrated by the trapezoid rule.

    python bench/nvidia_smi_agreement.py RUN                      # markdown table
    python bench/nvidia_smi_agreement.py RUN --utc-offset +02:00   # the log's zone if not this machine's
    python bench/nvidia_smi_agreement.py --quick                   # the shipped H100 run (log in UTC)

Last line: n=<s> util=<s> temp=<s> power=<s> clock=<s> mem=<s> throttle=<s> gap_inst_pct=<x> gap_smi_pct=<y>
(n: seconds compared; s: the share of them within tolerance; gaps: the energy counter against the
collector's instant power and against nvidia-smi's power.draw, integrated: |integral − counter| / counter).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from collect.importers.nvsmi import gpu_rows, read_log, utc_offset  # noqa: E402
from collect.importers.nvsmi_fields import NvsmiImportError  # noqa: E402

MIB = 1024**2
SHIPPED_RUN = REPO / "data" / "examples" / "20261124T110829Z-gpu-vm"  # its nvidia-smi.csv is in UTC
Rows = list[dict[str, float]]


def _within_abs(limit: float) -> Callable[[float, float], bool]:
    return lambda ours, theirs: abs(ours - theirs) <= limit


def _within_rel(share: float, floor: float = 0.0) -> Callable[[float, float], bool]:
    return lambda ours, theirs: abs(ours - theirs) <= max(share * abs(theirs), floor)


# (column suffix, label, unit scale for display, tolerance, tolerance in words)
CHECKS = (
    ("util_pct", "utilization (%)", 1.0, _within_abs(5.0), "±5 points"),
    ("temp_c", "temperature (°C)", 1.0, _within_abs(1.0), "±1 °C"),
    ("power_w", "power (W)", 1.0, _within_rel(0.05), "±5 %"),
    ("sm_clock_mhz", "SM clock (MHz)", 1.0, _within_rel(0.01), "±1 %"),
    ("mem_used_bytes", "memory used (MiB)", MIB, _within_rel(0.01, 16 * MIB), "±1 % or 16 MiB"),
    ("throttle_reasons", "throttle bits", 1.0, lambda a, b: a == b, "same bits"),
)


def _number(text: object) -> float | None:
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def collector_rows(run_dir: Path, gpu: int) -> Rows:
    rows = []
    with (run_dir / "telemetry.csv").open(newline="") as handle:
        for raw in csv.DictReader(handle):
            row = {"time_unix": float(raw["time_unix"])}
            for suffix in (*(check[0] for check in CHECKS), "power_instant_w", "energy_j"):
                value = _number(raw.get(f"gpu{gpu}_{suffix}"))
                if value is not None:
                    row[suffix] = value
            rows.append(row)
    return rows


def smi_rows(path: Path, zone_text: str | None, gpu: int) -> Rows:
    log = read_log(path, None, None)
    zone = utc_offset(zone_text) if zone_text else None
    rows = []
    for raw in gpu_rows(log, zone):
        row = {"time_unix": float(raw["time_unix"])}  # type: ignore[arg-type]
        for check in CHECKS:
            value = _number(raw.get(f"gpu{gpu}_{check[0]}"))
            if value is not None:
                row[check[0]] = value
        rows.append(row)
    return rows


def per_second(rows: Rows, suffix: str) -> dict[int, float]:
    buckets: dict[int, list[float]] = defaultdict(list)
    for row in rows:
        if suffix in row:
            buckets[int(row["time_unix"])].append(row[suffix])
    if suffix == "throttle_reasons":
        return {second: float(_or_bits(values)) for second, values in buckets.items()}
    return {second: statistics.fmean(values) for second, values in buckets.items()}


def _or_bits(values: list[float]) -> int:
    bits = 0
    for value in values:
        bits |= int(value)
    return bits


def integrate(rows: Rows, suffix: str, start: float, end: float) -> float | None:
    points = [(r["time_unix"], r[suffix]) for r in rows if suffix in r and start <= r["time_unix"] <= end]
    if len(points) < 2:
        return None
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in itertools.pairwise(points))


def energy_counter(rows: Rows, start: float, end: float) -> tuple[float, float, float] | None:
    """(joules, first time, last time) of the counter's rows inside [start, end]."""
    points = [
        (r["time_unix"], r["energy_j"]) for r in rows if "energy_j" in r and start <= r["time_unix"] <= end
    ]
    if len(points) < 2:
        return None
    return points[-1][1] - points[0][1], points[0][0], points[-1][0]


def _pct(value: float | None, reference: float) -> float:
    return math.nan if value is None or not reference else 100.0 * (value - reference) / reference


def compare(ours: Rows, theirs: Rows) -> tuple[list[list[str]], dict[str, float]]:
    table, shares = [], {}
    for suffix, label, scale, within, words in CHECKS:
        a, b = per_second(ours, suffix), per_second(theirs, suffix)
        seconds = sorted(set(a) & set(b))
        if not seconds:
            table.append([label, words, "0", "n/a (not in both)", "", ""])
            shares[suffix] = math.nan
            continue
        agree = sum(within(a[s], b[s]) for s in seconds)
        shares[suffix] = agree / len(seconds)
        if suffix == "throttle_reasons":
            differing = sorted({f"{int(a[s]):#x} vs {int(b[s]):#x}" for s in seconds if a[s] != b[s]})
            detail = ", ".join(differing[:3]) or "none differ"
            table.append([label, words, str(len(seconds)), f"{100 * shares[suffix]:.1f} %", detail, ""])
            continue
        diffs = [(a[s] - b[s]) / scale for s in seconds]
        table.append(
            [
                label,
                words,
                str(len(seconds)),
                f"{100 * shares[suffix]:.1f} %",
                f"{statistics.median(diffs):+.2f}",
                f"{max(diffs, key=abs):+.2f}",
            ]
        )
    return table, shares


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "run_dir", type=Path, nargs="?", help="a run with nvidia-smi.csv (--quick: the H100 one)"
    )
    parser.add_argument("--smi", type=Path, help="the nvidia-smi log (default: RUN/nvidia-smi.csv)")
    parser.add_argument("--utc-offset", help="the zone the log's timestamps are in (default: this machine's)")
    parser.add_argument("--gpu", type=int, default=0, help="which gpu<N> of the run (and index of the log)")
    parser.add_argument("--quick", action="store_true", help="the shipped H100 run (the suite runs this)")
    args = parser.parse_args()
    if args.quick or args.run_dir is None:
        if not args.quick:
            parser.error("give a RUN_DIR (or --quick for the shipped H100 run)")
        args.run_dir, args.utc_offset = args.run_dir or SHIPPED_RUN, args.utc_offset or "+00:00"
    smi_path = args.smi or args.run_dir / "nvidia-smi.csv"
    for path in (args.run_dir / "telemetry.csv", smi_path):
        if not path.is_file():
            parser.exit(2, f"nvidia_smi_agreement: error: {path}: no such file\n")
    try:
        ours, theirs = collector_rows(args.run_dir, args.gpu), smi_rows(smi_path, args.utc_offset, args.gpu)
    except (NvsmiImportError, ValueError, KeyError) as exc:
        parser.exit(2, f"nvidia_smi_agreement: error: {' '.join(str(exc).split())}\n")
    if not ours or not theirs:
        parser.exit(
            2, "nvidia_smi_agreement: error: no rows to compare in telemetry.csv or the nvidia-smi log\n"
        )
    table, shares = compare(ours, theirs)
    print(f"{args.run_dir.name}: collector {len(ours)} rows, nvidia-smi {len(theirs)} lines\n")
    print("| column | tolerance | seconds | within | median diff (collector − nvidia-smi) | largest diff |")
    print("|---|---|---|---|---|---|")
    for line in table:
        print("| " + " | ".join(line) + " |")

    start = max(ours[0]["time_unix"], theirs[0]["time_unix"])
    end = min(ours[-1]["time_unix"], theirs[-1]["time_unix"])
    counter = energy_counter(ours, start, end)
    vs_instant = vs_smi = math.nan
    if counter:
        joules, first, last = counter
        instant = integrate(ours, "power_instant_w", first, last)
        smi = integrate(theirs, "power_w", first, last)
        vs_instant, vs_smi = _pct(instant, joules), _pct(smi, joules)
        print(
            f"\nenergy over {last - first:.1f} s: counter {joules:,.0f} J; "
            f"collector's instant power integrated {instant or math.nan:,.0f} J ({vs_instant:+.2f} %); "
            f"nvidia-smi power.draw integrated {smi or math.nan:,.0f} J ({vs_smi:+.2f} %)"
        )
    else:
        print("\nenergy: the run has no energy counter readings over the common span")
    seconds = len(set(per_second(ours, "util_pct")) & set(per_second(theirs, "util_pct")))
    names = {
        "util_pct": "util",
        "temp_c": "temp",
        "power_w": "power",
        "sm_clock_mhz": "clock",
        "mem_used_bytes": "mem",
        "throttle_reasons": "throttle",
    }
    last_line = f"n={seconds} " + " ".join(f"{names[k]}={v:.3f}" for k, v in shares.items())
    print(f"{last_line} gap_inst_pct={abs(vs_instant):.2f} gap_smi_pct={abs(vs_smi):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
