"""Metric families under node_exporter's and dcgm-exporter's names, built from one tick's row and the raw
kernel counters the sources read for it (pure functions: nothing here reads the machine).

Counters are the kernel's own cumulative values (CPU ticks, sectors, bytes, µJ), converted to
node_exporter's units; gauges come from the row. A reading that is missing (an empty cell) is left out,
never published as 0.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric

from collect.sources.disk import SECTOR_BYTES
from runformat.gpm import GPM_METRICS, GpmMetric

# /proc/stat fields after the cpu name, in node_exporter's mode names.
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
MIB = 1024 * 1024
_USER_HZ = os.sysconf("SC_CLK_TCK")


@dataclass
class StaticInfo:
    """What does not change during a run: host, GPUs, sensors, RAPL zones."""

    uname: dict[str, str]
    gpus: list[dict[str, Any]] = field(default_factory=list)
    sensors: list[Any] = field(default_factory=list)  # collect.sources.thermal.Sensor, in last_raw order
    rapl_zones: list[Path] = field(default_factory=list)


def uname_labels(hostname: str) -> dict[str, str]:
    """node_uname_info's labels (Node Exporter Full builds its host list from `nodename`)."""
    uname = os.uname()
    return {
        "sysname": uname.sysname,
        "release": uname.release,
        "version": uname.version,
        "machine": uname.machine,
        "nodename": hostname,
        "domainname": "(none)",
    }


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def node_families(row: dict[str, Any], raw: dict[str, Any], static: StaticInfo) -> Iterator[Metric]:
    uname = InfoMetricFamily("node_uname", "Labeled system information as provided by the uname system call.")
    uname.add_metric([], static.uname)
    yield uname
    yield from _cpu(raw.get("cpu"))
    yield from _frequencies(row)
    load1 = _number(row.get("load1"))
    if load1 is not None:
        yield GaugeMetricFamily("node_load1", "1m load average.", value=load1)
    yield from _memory(raw.get("memory"))
    yield from _disk(raw.get("disk"))
    yield from _network(raw.get("network"))
    yield from _temperatures(raw.get("thermal"), static.sensors)
    yield from _rapl(raw.get("rapl"), static.rapl_zones)


def _cpu(stat_head: bytes | None) -> Iterator[Metric]:
    if not stat_head:
        return
    seconds = CounterMetricFamily(
        "node_cpu_seconds_total", "Seconds the CPUs spent in each mode.", labels=["cpu", "mode"]
    )
    for line in stat_head.split(b"\n"):
        if not line.startswith(b"cpu"):
            break
        fields = line.split()
        name = fields[0].decode()
        if name == "cpu":
            continue  # node_exporter publishes per CPU only; sum() gives the total
        for mode, ticks in zip(CPU_MODES, fields[1 : 1 + len(CPU_MODES)], strict=False):
            seconds.add_metric([name[3:], mode], int(ticks) / _USER_HZ)
    yield seconds


def _frequencies(row: dict[str, Any]) -> Iterator[Metric]:
    """node_cpu_scaling_frequency_hertz{cpu} from per-CPU `cpu<N>_freq_mhz` columns, where rows have them."""
    hertz = GaugeMetricFamily(
        "node_cpu_scaling_frequency_hertz", "Current scaled CPU thread frequency in hertz.", labels=["cpu"]
    )
    for column, value in row.items():
        if value is not None and column.startswith("cpu") and column.endswith("_freq_mhz"):
            number = column[3 : -len("_freq_mhz")]
            if number.isdigit():
                hertz.add_metric([number], float(value) * 1e6)
    if hertz.samples:
        yield hertz


_MEMINFO_GAUGES = (
    (b"MemTotal:", "node_memory_MemTotal_bytes"),
    (b"MemFree:", "node_memory_MemFree_bytes"),
    (b"MemAvailable:", "node_memory_MemAvailable_bytes"),
    (b"SwapTotal:", "node_memory_SwapTotal_bytes"),
    (b"SwapFree:", "node_memory_SwapFree_bytes"),
)


def _memory(values: dict[bytes, int] | None) -> Iterator[Metric]:
    for key, name in _MEMINFO_GAUGES:
        if values and key in values:
            yield GaugeMetricFamily(
                name, f"Memory information field {key.decode()[:-1]}_bytes.", value=values[key]
            )


def _disk(counters: dict[bytes, tuple[int, int, int]] | None) -> Iterator[Metric]:
    if counters is None:
        return
    read = CounterMetricFamily(
        "node_disk_read_bytes_total", "The total number of bytes read.", labels=["device"]
    )
    written = CounterMetricFamily(
        "node_disk_written_bytes_total", "The total number of bytes written.", labels=["device"]
    )
    busy = CounterMetricFamily(
        "node_disk_io_time_seconds_total", "Total seconds spent doing I/Os.", labels=["device"]
    )
    for device, (sectors_read, sectors_written, io_ms) in counters.items():
        name = [device.decode()]
        read.add_metric(name, sectors_read * SECTOR_BYTES)
        written.add_metric(name, sectors_written * SECTOR_BYTES)
        busy.add_metric(name, io_ms / 1000.0)
    yield from (read, written, busy)


def _network(counters: dict[bytes, tuple[int, int]] | None) -> Iterator[Metric]:
    if counters is None:
        return
    received = CounterMetricFamily(
        "node_network_receive_bytes_total", "Network device statistic receive_bytes.", labels=["device"]
    )
    sent = CounterMetricFamily(
        "node_network_transmit_bytes_total", "Network device statistic transmit_bytes.", labels=["device"]
    )
    for device, (rx, tx) in counters.items():
        received.add_metric([device.decode()], rx)
        sent.add_metric([device.decode()], tx)
    yield from (received, sent)


def _temperatures(readings: list[int | None] | None, sensors: list[Any]) -> Iterator[Metric]:
    if not readings:
        return
    hwmon = GaugeMetricFamily(
        "node_hwmon_temp_celsius", "Hardware monitor for temperature (input).", labels=["chip", "sensor"]
    )
    chip_names = GaugeMetricFamily(
        "node_hwmon_chip_names",
        "Annotation metric for human-readable chip names.",
        labels=["chip", "chip_name"],
    )
    labels = GaugeMetricFamily(
        "node_hwmon_sensor_label", "Label for given chip and sensor.", labels=["chip", "sensor", "label"]
    )
    zones = GaugeMetricFamily(
        "node_thermal_zone_temp", "Zone temperature in Celsius.", labels=["type", "zone"]
    )
    seen_chips: set[str] = set()
    for sensor, millidegrees in zip(sensors, readings, strict=False):
        if millidegrees is None:
            continue
        if sensor.path.name == "temp":  # /sys/class/thermal/thermal_zoneN/temp
            zones.add_metric([sensor.chip, sensor.label.removeprefix("thermal_zone")], millidegrees / 1000.0)
            continue
        chip = f"{sensor.path.parent.name}_{sensor.chip}"  # hwmonN_coretemp: unique per chip
        sensor_name = sensor.path.name.removesuffix("_input")
        hwmon.add_metric([chip, sensor_name], millidegrees / 1000.0)
        labels.add_metric([chip, sensor_name, sensor.label], 1)
        if chip not in seen_chips:
            seen_chips.add(chip)
            chip_names.add_metric([chip, sensor.chip], 1)
    for family in (hwmon, chip_names, labels, zones):
        if family.samples:
            yield family


def _rapl(energy_uj: tuple[int, ...] | None, zones: list[Path]) -> Iterator[Metric]:
    if not energy_uj:
        return
    joules = CounterMetricFamily(
        "node_rapl_package_joules_total", "Current RAPL package value in joules", labels=["index", "path"]
    )
    for zone, microjoules in zip(zones, energy_uj, strict=False):
        joules.add_metric([zone.name.split(":", 1)[1], str(zone)], microjoules / 1e6)
    yield joules


# (dcgm-exporter name, telemetry column suffix, factor, help) for the gauges that come straight from the row.
DCGM_GAUGES = (
    ("DCGM_FI_DEV_GPU_UTIL", "util_pct", 1.0, "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "mem_util_pct", 1.0, "Memory utilization (in %)."),
    ("DCGM_FI_DEV_GPU_TEMP", "temp_c", 1.0, "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w", 1.0, "Power draw (in W)."),
    ("DCGM_FI_DEV_POWER_USAGE_INSTANT", "power_instant_w", 1.0, "Current instantaneous power usage (in W)."),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_limit_w", 1.0, "Current power limit for the device (in W)."),
    ("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", 1.0, "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "mem_clock_mhz", 1.0, "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_FB_USED", "mem_used_bytes", 1.0 / MIB, "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FAN_SPEED", "fan_pct", 1.0, "Fan speed (in %)."),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "throttle_reasons", 1.0, "Current clock event reasons (bitmask)."),
)
DCGM_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"]


def dcgm_families(
    row: dict[str, Any], gpus: list[dict[str, Any]], energy_base_mj: list[int | None], hostname: str
) -> Iterator[Metric]:
    if not gpus:
        return
    families = {
        name: GaugeMetricFamily(name, text, labels=DCGM_LABELS)
        for name, _suffix, _factor, text in DCGM_GAUGES
    }
    fb_free = GaugeMetricFamily(
        "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", labels=DCGM_LABELS
    )
    # dcgm-exporter types it a counter but, as a DCGM field id, without a _total suffix: a gauge here, so
    # both exposition formats stay valid; rate() and increase() work on it all the same.
    energy = GaugeMetricFamily(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "Total energy consumption since boot (in mJ).",
        labels=DCGM_LABELS,
    )
    profiling = {metric.dcgm_field: _profiling_family(metric) for metric in GPM_METRICS}
    for gpu, base_mj in zip(gpus, energy_base_mj, strict=False):
        index = gpu["index"]
        labels = [
            str(index),
            str(gpu.get("uuid") or ""),
            str(gpu.get("pci_bus_id") or ""),
            f"nvidia{index}",
            str(gpu.get("name") or ""),
            hostname,
        ]
        prefix = f"gpu{index}_"
        for name, suffix, factor, _text in DCGM_GAUGES:
            value = row.get(prefix + suffix)
            if value is not None:
                families[name].add_metric(labels, round(float(value) * factor, 3))
        used, total = row.get(prefix + "mem_used_bytes"), gpu.get("mem_total_bytes")
        if used is not None and total:
            fb_free.add_metric(labels, round((total - used) / MIB, 3))
        energy_j = row.get(prefix + "energy_j")
        if energy_j is not None and base_mj is not None:
            energy.add_metric(labels, base_mj + round(energy_j * 1000.0))
        for metric in GPM_METRICS:
            value = row.get(prefix + metric.suffix)
            if value is not None:
                profiling[metric.dcgm_field].add_metric(labels, round(float(value) * metric.dcgm_scale, 6))
    for family in (*families.values(), fb_free, energy, *profiling.values()):
        if family.samples:
            yield family


def _profiling_family(metric: GpmMetric) -> GaugeMetricFamily:
    """A GPM column under its DCGM twin's name, in dcgm-exporter's unit: a ratio 0-1, or bytes per second."""
    unit = "ratio 0-1" if metric.is_pct else "in B/s"
    text = f"{metric.meaning[:1].upper()}{metric.meaning[1:]} ({unit})."
    return GaugeMetricFamily(metric.dcgm_field, text, labels=DCGM_LABELS)
