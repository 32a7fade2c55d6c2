"""telemetry.csv's columns rebuilt on a time grid from node_exporter's and dcgm-exporter's series.

Each function takes the raw series of one metric family (see promapi.Series) and returns one list of
values per column, one value per grid time; None (an empty cell) wherever nothing was scraped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collect.importers.promapi import Series
from collect.sources.base import ratio_pct
from runformat.columns import FREQ_MHZ, UTIL_PCT, cpu_column, gpu_column
from runformat.gpm import GPM_METRICS

MIB = 1024 * 1024
IDLE_MODES = ("idle", "iowait")  # the collector counts iowait as idle (docs/run-format.md)
# Whole physical disks only, like the collector (no partitions, loop, ram, zram, device-mapper, md, cdrom).
_NOT_A_DISK = re.compile(r"^(loop|ram|zram|dm-|md|sr|fd)|^((h|s|v|xv)d[a-z]+|nvme\d+n\d+p|mmcblk\d+p)\d+$")
_CPU_CHIP = re.compile(r"coretemp|k10temp|zenpower|cpu", re.IGNORECASE)
_PACKAGE_LABEL = re.compile(r"^(Package id|Tdie|Tctl)")
_CPU_ZONE = re.compile(r"x86_pkg_temp|cpu", re.IGNORECASE)

Column = list[float | int | None]


@dataclass
class Grid:
    times: list[float]
    step_s: float
    lookback_s: float


def group(series: list[Series], label: str) -> dict[str, list[Series]]:
    grouped: dict[str, list[Series]] = {}
    for item in series:
        grouped.setdefault(item.labels.get(label, ""), []).append(item)
    return grouped


def cpu_columns(series: list[Series], grid: Grid) -> dict[str, Column]:
    """cpu_util_pct, cpu_iowait_pct, cpu_steal_pct and cpu<N>_util_pct from node_cpu_seconds_total{cpu,mode},
    in the collector's column order and with its meaning (iowait counts as idle; steal as busy)."""
    by_cpu = group(series, "cpu")
    names = sorted(by_cpu, key=lambda name: (not name.isdigit(), int(name) if name.isdigit() else 0, name))
    columns: dict[str, Column] = {"cpu_util_pct": [], "cpu_iowait_pct": [], "cpu_steal_pct": []}
    columns.update({cpu_column(name, UTIL_PCT): [] for name in names})
    for when in grid.times:
        all_busy = all_total = all_iowait = all_steal = 0.0
        complete = True
        for name in names:
            busy = total = 0.0
            found = False
            for item in by_cpu[name]:
                pair = item.pair_for(when, grid.step_s, grid.lookback_s)
                if pair is None:
                    continue
                found = True
                increase = item.increase(*pair)
                total += increase
                mode = item.labels.get("mode")
                if mode not in IDLE_MODES:
                    busy += increase
                if mode == "iowait":
                    all_iowait += increase
                elif mode == "steal":
                    all_steal += increase
            columns[cpu_column(name, UTIL_PCT)].append(ratio_pct(busy, total) if found else None)
            complete = complete and found
            all_busy, all_total = all_busy + busy, all_total + total
        whole = complete and bool(names)
        columns["cpu_util_pct"].append(ratio_pct(all_busy, all_total) if whole else None)
        columns["cpu_iowait_pct"].append(ratio_pct(all_iowait, all_total) if whole else None)
        columns["cpu_steal_pct"].append(ratio_pct(all_steal, all_total) if whole else None)
    return columns


def cpu_frequency_columns(series: list[Series], grid: Grid) -> dict[str, Column]:
    """cpu_freq_mhz (mean over CPUs) and cpu<N>_freq_mhz from node_cpu_scaling_frequency_hertz{cpu}."""
    columns: dict[str, Column] = {
        "cpu_freq_mhz": gauge(series, grid, lambda v: round(sum(v) / len(v) / 1e6, 1))
    }
    by_cpu = group(series, "cpu")
    for name in sorted((n for n in by_cpu if n.isdigit()), key=int):
        columns[cpu_column(name, FREQ_MHZ)] = gauge(by_cpu[name], grid, lambda v: round(v[0] / 1e6, 1))
    return columns


def gauge(series: list[Series], grid: Grid, combine: Callable[[list[float]], float]) -> Column:
    """One value per grid time from several series (sum, max, mean...), None where none has a sample."""
    column: Column = []
    for when in grid.times:
        values = [v for item in series if (v := item.value_at(when, grid.lookback_s)) is not None]
        column.append(combine(values) if values else None)
    return column


def rate(series: list[Series], grid: Grid, combine: Callable[[list[float]], float]) -> Column:
    column: Column = []
    for when in grid.times:
        values = [v for item in series if (v := item.rate(when, grid.step_s, grid.lookback_s)) is not None]
        column.append(combine(values) if values else None)
    return column


def increase_since_first(series: list[Series], grid: Grid, scale: float) -> Column:
    """A counter's increase since the first grid time (energy since the first row), summed over series."""
    column: Column = []
    bases = [item.index_at(grid.times[0], grid.lookback_s) for item in series]
    for when in grid.times:
        total, found = 0.0, False
        for item, base in zip(series, bases, strict=True):
            index = item.index_at(when, grid.lookback_s)
            if index is None or base is None:
                continue
            total += item.increase(base, index)
            found = True
        column.append(round(total * scale, 3) if found else None)
    return column


def physical_disks(series: list[Series]) -> list[Series]:
    return [item for item in series if not _NOT_A_DISK.search(item.labels.get("device", ""))]


def busiest_disk_bytes(busy: list[Series], moved: Sequence[list[Series]], grid: Grid) -> Column:
    """disk_busiest_bps: at each grid time, the bytes/s read and written by the device whose
    io_time_seconds_total rose most (the disk disk_util_pct is of)."""

    def rates_at(series: list[Series], when: float) -> dict[str, float]:
        step, lookback = grid.step_s, grid.lookback_s
        found = {item.labels.get("device", ""): item.rate(when, step, lookback) for item in series}
        return {device: value for device, value in found.items() if value is not None}

    column: Column = []
    for when in grid.times:
        busy_now = rates_at(busy, when)
        busiest = max(busy_now, key=busy_now.__getitem__) if busy_now else None
        parts = [rates[busiest] for rates in (rates_at(series, when) for series in moved) if busiest in rates]
        column.append(round(sum(parts), 1) if parts else None)
    return column


def not_loopback(series: list[Series]) -> list[Series]:
    return [item for item in series if item.labels.get("device") != "lo"]


def cpu_temperature_sensors(families: dict[str, list[Series]]) -> tuple[list[Series], str]:
    """The series whose maximum is the CPU temperature, and how they were chosen."""
    chip_names = {
        item.labels.get("chip", ""): item.labels.get("chip_name", "")
        for item in families.get("node_hwmon_chip_names", [])
    }
    sensor_labels = {
        (item.labels.get("chip", ""), item.labels.get("sensor", "")): item.labels.get("label", "")
        for item in families.get("node_hwmon_sensor_label", [])
    }
    cpu_sensors = [
        item
        for item in families.get("node_hwmon_temp_celsius", [])
        if _CPU_CHIP.search(chip_names.get(item.labels.get("chip", ""), "") or item.labels.get("chip", ""))
    ]
    packages = [
        item
        for item in cpu_sensors
        if _PACKAGE_LABEL.match(
            sensor_labels.get((item.labels.get("chip", ""), item.labels.get("sensor", "")), "")
        )
    ]
    if packages or cpu_sensors:
        chosen = packages or cpu_sensors
        return chosen, f"node_hwmon_temp_celsius{{chip={chosen[0].labels.get('chip', '')!r}}}"
    zones = [
        item
        for item in families.get("node_thermal_zone_temp", [])
        if _CPU_ZONE.search(item.labels.get("type", ""))
    ]
    if zones:
        return zones, f"node_thermal_zone_temp{{type={zones[0].labels.get('type', '')!r}}}"
    return [], ""


def memory_columns(families: dict[str, list[Series]], grid: Grid) -> dict[str, Column] | None:
    def first(name: str) -> Column:
        return gauge(families.get(name, [])[:1], grid, lambda values: values[0])

    total = first("node_memory_MemTotal_bytes")
    if not any(value is not None for value in total):
        return None
    available = first("node_memory_MemAvailable_bytes")
    if not any(value is not None for value in available):
        available = first("node_memory_MemFree_bytes")
    swap_total, swap_free = first("node_memory_SwapTotal_bytes"), first("node_memory_SwapFree_bytes")
    used: Column = [
        None if t is None or a is None else int(t - a) for t, a in zip(total, available, strict=True)
    ]
    return {
        "mem_used_bytes": used,
        "mem_util_pct": [
            None if u is None or not t else round(100.0 * u / t, 2) for u, t in zip(used, total, strict=True)
        ],
        "swap_used_bytes": [
            None if t is None or f is None else int(t - f) for t, f in zip(swap_total, swap_free, strict=True)
        ],
    }


# (telemetry column suffix, DCGM field, factor)
DCGM_COLUMNS = (
    ("util_pct", "DCGM_FI_DEV_GPU_UTIL", 1.0),
    ("mem_util_pct", "DCGM_FI_DEV_MEM_COPY_UTIL", 1.0),
    ("mem_used_bytes", "DCGM_FI_DEV_FB_USED", float(MIB)),
    ("temp_c", "DCGM_FI_DEV_GPU_TEMP", 1.0),
    ("power_w", "DCGM_FI_DEV_POWER_USAGE", 1.0),
    ("power_instant_w", "DCGM_FI_DEV_POWER_USAGE_INSTANT", 1.0),
    ("power_limit_w", "DCGM_FI_DEV_POWER_MGMT_LIMIT", 1.0),
    ("sm_clock_mhz", "DCGM_FI_DEV_SM_CLOCK", 1.0),
    ("mem_clock_mhz", "DCGM_FI_DEV_MEM_CLOCK", 1.0),
    ("fan_pct", "DCGM_FI_DEV_FAN_SPEED", 1.0),
    ("throttle_reasons", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 1.0),
)
THROTTLE_FALLBACK = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"  # its name before DCGM 3.3
ENERGY_FIELD = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


def gpu_columns(position: int, families: dict[str, list[Series]], grid: Grid) -> dict[str, Column]:
    """gpu<position>_* from the DCGM series of one GPU (families already narrowed to it)."""
    prefix = gpu_column(position, "")
    columns: dict[str, Column] = {}
    for suffix, field, factor in DCGM_COLUMNS:
        series = families.get(field) or (
            families.get(THROTTLE_FALLBACK, []) if suffix == "throttle_reasons" else []
        )
        values = gauge(series[:1], grid, lambda found: found[0])
        if suffix in ("mem_used_bytes", "throttle_reasons"):
            columns[prefix + suffix] = [None if v is None else round(v * factor) for v in values]
        else:
            columns[prefix + suffix] = [None if v is None else round(v * factor, 3) for v in values]
    columns[prefix + "energy_j"] = increase_since_first(families.get(ENERGY_FIELD, [])[:1], grid, 1e-3)
    return columns


def gpm_columns(position: int, families: dict[str, list[Series]], grid: Grid) -> dict[str, Column]:
    """gpu<position>_<GPM suffix> from dcgm-exporter's DCGM_FI_PROF_* of one GPU (ratios 0-1 to percent;
    bytes/s as they are); only the fields it exported: a column nothing scraped is absent, not empty.
    A MIG slice's series (label GPU_I_ID) is one instance's share, not the board's: left out."""
    prefix = gpu_column(position, "")
    columns: dict[str, Column] = {}
    for metric in GPM_METRICS:
        series = [s for s in families.get(metric.dcgm_field, []) if not s.labels.get("GPU_I_ID")]
        if not series:
            continue
        values = gauge(series[:1], grid, lambda found: found[0])
        columns[prefix + metric.suffix] = [
            None if v is None else round(v / metric.dcgm_scale, 3) for v in values
        ]
    return columns
