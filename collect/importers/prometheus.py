"""`python -m collect import-prometheus URL --instance HOST --start ... --end ...`: a run directory
(telemetry.csv in the contract's columns, run.json) rebuilt from what a Prometheus server scraped from
node_exporter and dcgm-exporter (or from `collect --prometheus`), so a job the fleet already ran can be
sized without running it again. Columns nothing scraped stay empty and run.json says why.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from collect.importers.promapi import PrometheusClient, PrometheusError, Series
from collect.importers.promcli import PROG, build_parser
from collect.importers.promcolumns import (
    MIB,
    Column,
    Grid,
    busiest_disk_bytes,
    cpu_columns,
    cpu_frequency_columns,
    cpu_temperature_sensors,
    gauge,
    gpm_columns,
    gpu_columns,
    group,
    increase_since_first,
    memory_columns,
    not_loopback,
    physical_disks,
    rate,
)
from collect.importers.promtraining import TRAINING_COLUMNS, busiest, training_rows
from collect.importers.rundir import imported_run_header
from collect.rundir import unique_dir
from collect.writer import TelemetryWriter
from runformat import (
    RUN_JSON,
    RUNS_SUBDIR,
    TELEMETRY_CSV,
    TRAINING_CSV,
    new_run_id,
    write_json_atomic,
)
from runformat.cli import USAGE_ERROR
from runformat.columns import DISK_BUSIEST_BPS, PROCESS_COLUMNS
from runformat.gpm import GPM_COLUMN

FAILED = 1
MAX_ROWS = 5_000_000
HISTORY_BEFORE_S = 300.0  # fetched before --start, so the first row has a rate (Prometheus's lookback)
NODE_FAMILIES = (
    "node_cpu_seconds_total|node_cpu_scaling_frequency_hertz|node_load1|node_uname_info|node_cpu_info|"
    "node_os_info|node_memory_(MemTotal|MemFree|MemAvailable|SwapTotal|SwapFree)_bytes|"
    "node_disk_(read_bytes|written_bytes|io_time_seconds)_total|node_network_(receive|transmit)_bytes_total|"
    "node_hwmon_(temp_celsius|chip_names|sensor_label)|node_thermal_zone_temp|node_rapl_package_joules_total|"
    "workbench_late_ms"
)
DCGM_FAMILIES = "DCGM_FI_DEV_.*|DCGM_FI_PROF_.*"


class ImportProblem(Exception):
    """Nothing to import (no series for that instance and time); one line for the user."""


def instance_matcher(instance: str) -> str:
    """A label matcher: HOST:PORT exactly, or HOST with any port (or none)."""
    if ":" in instance:
        return f"instance={json.dumps(instance)}"
    return f"instance=~{json.dumps(re.escape(instance) + '(:[0-9]+)?')}"


def _families(
    client: PrometheusClient, names: str, matcher: str, start: float, end: float, option: str
) -> dict[str, list[Series]]:
    """The series of one target by metric name; a HOST that matches several targets is a usage error."""
    series = client.raw_series(f'{{__name__=~"{names}",{matcher}}}', start, end)
    instances = sorted(group(series, "instance"))
    if len(instances) > 1:
        raise ValueError(f"{option} matches several targets ({', '.join(instances)}): give HOST:PORT")
    return group(series, "__name__")


def import_run(client: PrometheusClient, args: argparse.Namespace) -> tuple[Path, int]:
    node_matcher = instance_matcher(args.instance)
    gpu_matcher = instance_matcher(args.gpu_instance or args.instance.split(":")[0])
    fetch_from = args.start - HISTORY_BEFORE_S
    node = _families(client, NODE_FAMILIES, node_matcher, fetch_from, args.end, "--instance")
    if not node.get("node_cpu_seconds_total"):
        seen = client.label_values("instance", "node_cpu_seconds_total", args.start, args.end)
        raise ImportProblem(
            f"no node_cpu_seconds_total for instance {args.instance} in that time range"
            f" (instances with node_exporter data then: {', '.join(seen) or 'none'})"
        )
    scrape_s = node["node_cpu_seconds_total"][0].median_interval() or 15.0
    step = args.step or round(scrape_s, 3)
    rows = math.floor((args.end - args.start) / step + 1e-9) + 1
    if rows > MAX_ROWS:
        raise ValueError(f"{rows} rows at --step {step:g}s: use a larger --step (at most {MAX_ROWS} rows)")
    grid = Grid(
        [round(args.start + k * step, 6) for k in range(rows)], step, 2.0 * max(step, scrape_s) + 0.001
    )
    cpu = cpu_columns(node["node_cpu_seconds_total"], grid)
    keep = [i for i, value in enumerate(cpu["cpu_util_pct"]) if value is not None]
    if not keep:
        raise ImportProblem(f"node_exporter data for {args.instance} has no two scrapes in that time range")
    grid = Grid(grid.times[keep[0] : keep[-1] + 1], step, grid.lookback_s)  # only while the host was scraped
    gpu = _families(client, DCGM_FAMILIES, gpu_matcher, fetch_from, args.end, "--gpu-instance")
    steps_selector = args.steps_metric or f"workbench_training_step{{{node_matcher}}}"
    examples_selector = args.examples_metric or f"workbench_examples_per_second{{{node_matcher}}}"
    steps = busiest(client.raw_series(steps_selector, fetch_from, args.end))
    examples = busiest(client.raw_series(examples_selector, fetch_from, args.end)) if steps else None
    training = training_rows(steps, examples, grid.times[0], grid.times[-1], grid.lookback_s) if steps else []
    if args.steps_metric and not training:
        print(
            f"{PROG}: warning: no steps of {args.steps_metric} in that time range: no training.csv",
            file=sys.stderr,
        )
    return _write_run(args, client.base_url, node, gpu, grid, scrape_s, training, steps_selector)


def _build_columns(
    node: dict[str, list[Series]], grid: Grid, where: str
) -> tuple[dict[str, Column], dict[str, dict[str, Any]]]:
    columns: dict[str, Column] = {
        "time_unix": list(grid.times),
        "elapsed_s": [round(t - grid.times[0], 6) for t in grid.times],
        "late_ms": gauge(node.get("workbench_late_ms", [])[:1], grid, lambda v: round(v[0], 3)),
        "skipped_ticks": [None] * len(grid.times),
    }
    sources: dict[str, dict[str, Any]] = {"cpu": {"available": True}}
    columns.update(cpu_columns(node["node_cpu_seconds_total"], grid))
    columns.update(cpu_frequency_columns(node.get("node_cpu_scaling_frequency_hertz", []), grid))
    columns["load1"] = gauge(node.get("node_load1", [])[:1], grid, lambda v: v[0])
    sensors, how = cpu_temperature_sensors(node)
    columns["cpu_temp_c"] = gauge(sensors, grid, lambda v: round(max(v), 1))
    sources["thermal"] = (
        {"available": True, "sensor": how}
        if sensors
        else _missing(where, "node_hwmon_temp_celsius of a CPU chip or node_thermal_zone_temp")
    )
    memory = memory_columns(node, grid)
    sources["memory"] = {"available": True} if memory else _missing(where, "node_memory_MemTotal_bytes")
    columns.update(memory or {})
    disks = {
        name: physical_disks(node.get(f"node_disk_{name}", []))
        for name in ("read_bytes_total", "written_bytes_total", "io_time_seconds_total")
    }
    if any(disks.values()):
        columns["disk_read_bps"] = rate(disks["read_bytes_total"], grid, lambda v: round(sum(v), 1))
        columns["disk_write_bps"] = rate(disks["written_bytes_total"], grid, lambda v: round(sum(v), 1))
        columns["disk_util_pct"] = rate(
            disks["io_time_seconds_total"], grid, lambda v: round(min(100.0, max(0.0, 100.0 * max(v))), 2)
        )
        moved = (disks["read_bytes_total"], disks["written_bytes_total"])
        columns[DISK_BUSIEST_BPS] = busiest_disk_bytes(disks["io_time_seconds_total"], moved, grid)
    sources["disk"] = {"available": True} if any(disks.values()) else _missing(where, "node_disk_*")
    received = not_loopback(node.get("node_network_receive_bytes_total", []))
    sent = not_loopback(node.get("node_network_transmit_bytes_total", []))
    if received or sent:
        columns["net_rx_bps"] = rate(received, grid, lambda v: round(sum(v), 1))
        columns["net_tx_bps"] = rate(sent, grid, lambda v: round(sum(v), 1))
    sources["network"] = {"available": True} if received or sent else _missing(where, "node_network_*")
    columns.update({name: [None] * len(grid.times) for name in PROCESS_COLUMNS})
    sources["process"] = {
        "available": False,
        "reason": "not measured: node_exporter and dcgm-exporter have no per-process data",
    }
    rapl = node.get("node_rapl_package_joules_total", [])
    if rapl:
        columns["cpu_energy_j"] = increase_since_first(rapl, grid, 1.0)
    sources["rapl"] = {"available": True} if rapl else _missing(where, "node_rapl_package_joules_total")
    return columns, sources


def _missing(where: str, what: str) -> dict[str, Any]:
    return {"available": False, "reason": f"no {what} series {where}"}


def _gpus(gpu: dict[str, list[Series]], grid: Grid) -> tuple[dict[str, Column], list[dict[str, Any]]]:
    everything = [item for series in gpu.values() for item in series]
    indices = sorted(group(everything, "gpu"), key=lambda index: (not index.isdigit(), index.zfill(8)))
    columns: dict[str, Column] = {}
    described: list[dict[str, Any]] = []
    for position, index in enumerate(indices):
        mine = {name: [s for s in series if s.labels.get("gpu") == index] for name, series in gpu.items()}
        columns.update(gpu_columns(position, mine, grid))
        columns.update(gpm_columns(position, mine, grid))
        labels = next(series[0].labels for series in mine.values() if series)
        used, free = ((mine.get(f"DCGM_FI_DEV_FB_{kind}") or [None])[0] for kind in ("USED", "FREE"))
        total = None
        if used is not None and free is not None and used.values and free.values:
            total = round((used.values[0] + free.values[0]) * MIB)
        limit = (mine.get("DCGM_FI_DEV_POWER_MGMT_LIMIT") or [None])[0]
        described.append(
            {
                "index": position,
                "name": labels.get("modelName"),
                "uuid": labels.get("UUID"),
                "mem_total_bytes": total,
                "power_limit_w": limit.values[-1] if limit is not None and limit.values else None,
                "pci_bus_id": labels.get("pci_bus_id"),
            }
        )
    return columns, described


def _gpm_source(columns: dict[str, Column], gpu_count: int, where: str) -> dict[str, Any]:
    """sources.gpm of the run format: which GPUs have profiling counters (dcgm-exporter's DCGM_FI_PROF_*)."""
    read = {
        int(match.group(1))
        for name, column in columns.items()
        if (match := GPM_COLUMN.match(name)) and any(value is not None for value in column)
    }
    if not read:
        return _missing(where, "DCGM_FI_PROF_* (profiling)")
    gpus: list[dict[str, Any]] = []
    for index in range(gpu_count):
        reason = {} if index in read else {"reason": f"no DCGM_FI_PROF_* readings of this GPU {where}"}
        gpus.append({"index": index, "supported": index in read, **reason})
    return {
        "available": True,
        "period_s": None,  # DCGM's own sampling period: Prometheus does not have it
        "gpus": gpus,
        "notes": ["from dcgm-exporter's DCGM_FI_PROF_* fields (ratios 0-1, here percent), as scraped"],
    }


def _label(node: dict[str, list[Series]], family: str, label: str) -> str | None:
    series = node.get(family, [])
    return series[0].labels.get(label) if series else None


def _write_run(
    args: argparse.Namespace,
    url: str,
    node: dict,
    gpu: dict,
    grid: Grid,
    scrape_s: float,
    training: list[dict[str, float | int | None]],
    steps_selector: str,
) -> tuple[Path, int]:
    where = f"for instance {args.instance} in Prometheus"
    columns, sources = _build_columns(node, grid, where)
    gpu_cols, gpus = _gpus(gpu, grid)
    columns.update(gpu_cols)
    gpu_where = f"for instance {args.gpu_instance or args.instance.split(':')[0]} in Prometheus"
    sources["nvml"] = {"available": True} if gpus else _missing(gpu_where, "DCGM_FI_DEV_*")
    sources["gpm"] = _gpm_source(columns, len(gpus), gpu_where)
    device = "gpu" if gpus else "cpu"
    host = _label(node, "node_uname_info", "nodename") or args.instance.split(":")[0]
    start, end = grid.times[0], grid.times[-1]
    run_dir = _new_run_dir(args.data_dir, device, start, host)
    try:
        writer = TelemetryWriter(run_dir / TELEMETRY_CSV, list(columns))
        values = list(columns.values())
        for index in range(len(grid.times)):
            writer.write({name: column[index] for name, column in zip(columns, values, strict=True)})
        writer.close()
        if training:
            steps_writer = TelemetryWriter(run_dir / TRAINING_CSV, TRAINING_COLUMNS)
            for step_row in training:
                steps_writer.write(step_row)
            steps_writer.close()
        mem_total = node.get("node_memory_MemTotal_bytes", [])
        swap_total = node.get("node_memory_SwapTotal_bytes", [])
        record = {
            **imported_run_header(
                run_dir.name,
                args.label or f"imported from Prometheus: {host}",
                device,
                host,
                grid.step_s,
                start,
                end,
            ),
            "samples": len(grid.times),
            "late_ticks": None,
            "skipped_ticks": None,
            "system": {
                "cpu_model": _label(node, "node_cpu_info", "model_name"),
                "cpu_cores_physical": None,
                "cpu_cores_logical": len(group(node["node_cpu_seconds_total"], "cpu")),
                "cpu_sockets": None,
                "mem_total_bytes": int(mem_total[0].values[-1]) if mem_total else None,
                "swap_total_bytes": int(swap_total[0].values[-1]) if swap_total else None,
                "gpu_count": len(gpus),
                "gpus": gpus,
                "gpu_driver_version": next(
                    (s[0].labels.get("DCGM_FI_DRIVER_VERSION") for s in gpu.values() if s), None
                ),
                "cuda_version": None,
                "os": _label(node, "node_os_info", "pretty_name"),
                "kernel": _label(node, "node_uname_info", "release"),
                "python": None,
                "packages": {},
            },
            "sources": sources,
            "imported_from": {
                "tool": "prometheus",
                "file": url,
                "url": url,
                "instance": args.instance,
                "gpu_instance": args.gpu_instance,
                "query_start_unix": args.start,
                "query_end_unix": args.end,
                "step_s": grid.step_s,
                "scrape_interval_s": round(scrape_s, 3),
                "training_steps_from": steps_selector if training else None,
            },
        }
        write_json_atomic(run_dir / RUN_JSON, record)
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)  # nothing half-imported is left behind
        raise
    return run_dir, len(grid.times)


def _new_run_dir(data_dir: Path, device: str, start: float, host: str) -> Path:
    runs = Path(data_dir) / RUNS_SUBDIR
    runs.mkdir(parents=True, exist_ok=True)
    return unique_dir(runs, new_run_id(device, datetime.fromtimestamp(start, timezone.utc), host=host))


def main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    prog = PROG
    if not args.end > args.start:
        parser.error("--end must be after --start")
    try:
        client = PrometheusClient(args.url)
        run_dir, rows = import_run(client, args)
    except ValueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except (PrometheusError, ImportProblem) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return FAILED
    except OSError as exc:
        print(f"{prog}: cannot write the run directory: {exc.strerror or exc}", file=sys.stderr)
        return FAILED
    print(f"imported {rows} rows into {run_dir}")
    return 0
