"""nvidia-smi logs written by the tests, from nvidia-smi's documented output formats (`--query-gpu` CSV with
`--format=csv[,noheader][,nounits]`, `dmon -o DT`), for synthetic GPUs whose behaviour a test chooses."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

UNITS = {
    "utilization.gpu": "%",
    "utilization.memory": "%",
    "power.draw": "W",
    "power.draw.average": "W",
    "power.draw.instant": "W",
    "power.limit": "W",
    "enforced.power.limit": "W",
    "clocks.sm": "MHz",
    "clocks.current.sm": "MHz",
    "clocks.mem": "MHz",
    "clocks.gr": "MHz",
    "clocks.max.sm": "MHz",
    "memory.used": "MiB",
    "memory.total": "MiB",
    "fan.speed": "%",
}
FULL_FIELDS = [
    "timestamp",
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "pstate",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "temperature.memory",
    "power.draw.average",
    "power.draw.instant",
    "enforced.power.limit",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "memory.used",
    "memory.total",
    "fan.speed",
    "clocks_event_reasons.active",
    "clocks_event_reasons.sw_power_cap",
    "clocks_event_reasons.hw_thermal_slowdown",
    "pcie.link.gen.current",
]
BASIC_FIELDS = ["timestamp", "utilization.gpu", "power.draw", "temperature.gpu", "clocks.sm", "memory.used"]


@dataclass(frozen=True)
class Gpu:
    """One GPU's steady behaviour; `util` and `power` may vary with the sample number."""

    index: int = 0
    name: str = "NVIDIA H100 80GB HBM3"
    util: Callable[[int], float] = lambda k: 96.0
    power: Callable[[int], float] = lambda k: 520.0 + 30.0 * math.sin(k / 3.0)
    limit_w: float = 700.0
    sm_mhz: Callable[[int], float] = lambda k: 1980.0
    sm_max_mhz: float = 1980.0
    temp_c: float = 64.0
    reasons: Callable[[int], int] = lambda k: 0
    mem_used_mib: int = 30_512

    @property
    def uuid(self) -> str:
        return f"GPU-{self.index:08x}-1111-2222-3333-444455556666"

    @property
    def bus_id(self) -> str:
        return f"00000000:{0x19 + self.index:02X}:00.0"


def capped(index: int = 0) -> Gpu:
    """Held at its 700 W software cap: SM clock well below max at an unremarkable 77 °C."""
    return Gpu(
        index,
        util=lambda k: 99.0,
        power=lambda k: 696.0 + (k % 3),
        sm_mhz=lambda k: 1410.0 + 10 * (k % 4),
        temp_c=77.0,
        reasons=lambda k: 0x4,
    )


def stalled(index: int = 0) -> Gpu:
    """Kernels resident but not computing: 100 % utilization at ~14 % of the power limit."""
    return Gpu(index, util=lambda k: 100.0, power=lambda k: 95.0 + (k % 5), temp_c=41.0)


def value(gpu: Gpu, field: str, k: int, units: bool) -> str:
    reasons = gpu.reasons(k)
    raw: dict[str, str] = {
        "index": str(gpu.index),
        "name": gpu.name,
        "uuid": gpu.uuid,
        "pci.bus_id": gpu.bus_id,
        "pstate": "P0",
        "utilization.gpu": f"{gpu.util(k):.0f}",
        "utilization.memory": f"{gpu.util(k) * 0.4:.0f}",
        "temperature.gpu": f"{gpu.temp_c:.0f}",
        "temperature.memory": f"{gpu.temp_c + 8:.0f}",
        "power.draw": f"{gpu.power(k):.2f}",
        "power.draw.average": f"{gpu.power(k):.2f}",
        "power.draw.instant": f"{gpu.power(k) + 15.0 * math.cos(k):.2f}",
        "power.limit": f"{gpu.limit_w:.2f}",
        "enforced.power.limit": f"{gpu.limit_w:.2f}",
        "clocks.sm": f"{gpu.sm_mhz(k):.0f}",
        "clocks.current.sm": f"{gpu.sm_mhz(k):.0f}",
        "clocks.mem": "2619",
        "clocks.gr": f"{gpu.sm_mhz(k):.0f}",
        "clocks.max.sm": f"{gpu.sm_max_mhz:.0f}",
        "memory.used": str(gpu.mem_used_mib),
        "memory.total": "81559",
        "fan.speed": "[N/A]",
        "clocks_event_reasons.active": f"0x{reasons:016x}",
        "clocks_throttle_reasons.active": f"0x{reasons:016x}",
        "clocks_event_reasons.sw_power_cap": "Active" if reasons & 0x4 else "Not Active",
        "clocks_throttle_reasons.sw_power_cap": "Active" if reasons & 0x4 else "Not Active",
        "clocks_event_reasons.hw_thermal_slowdown": "Active" if reasons & 0x40 else "Not Active",
        "clocks_throttle_reasons.hw_slowdown": "Active" if reasons & 0x8 else "Not Active",
        "pcie.link.gen.current": "5",
    }
    text = raw[field]
    unit = UNITS.get(field)
    return f"{text} {unit}" if units and unit and not text.startswith("[") else text


def query_gpu_log(
    gpus: Sequence[Gpu],
    fields: Sequence[str] = FULL_FIELDS,
    start: datetime = datetime(2026, 11, 23, 14, 2, 1, 120_000),
    samples: int = 30,
    interval_s: float = 1.0,
    header: bool = True,
    units: bool = True,
    cells: Callable[[int, int, str, str], str] | None = None,
) -> str:
    """`nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits] -lms ...`: one line per GPU per
    sample, GPUs in index order, each line with its own timestamp 2 ms after the previous GPU's.
    `cells(k, gpu, field, text)` may rewrite a cell (e.g. to `[N/A]`)."""
    lines = []
    if header:
        lines.append(", ".join(f"{f} [{UNITS[f]}]" if f in UNITS else f for f in fields))
    for k in range(samples):
        for position, gpu in enumerate(gpus):
            moment = start + timedelta(seconds=k * interval_s, milliseconds=2 * position)
            row = []
            for field in fields:
                if field == "timestamp":
                    text = moment.strftime("%Y/%m/%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
                else:
                    text = value(gpu, field, k, units)
                row.append(cells(k, position, field, text) if cells else text)
            lines.append(", ".join(row))
    return "\n".join(lines) + "\n"


def dmon_log(
    gpus: Sequence[Gpu],
    start: datetime = datetime(2026, 11, 23, 14, 2, 1),
    samples: int = 20,
    repeat_header: int = 0,
) -> str:
    """`nvidia-smi dmon -s pucm -o DT`: header and units lines, then one line per GPU per second."""
    names = [
        "pwr",
        "gtemp",
        "mtemp",
        "sm",
        "mem",
        "enc",
        "dec",
        "jpg",
        "ofa",
        "mclk",
        "pclk",
        "fb",
        "bar1",
        "ccpm",
    ]
    units = ["W", "C", "C", "%", "%", "%", "%", "%", "%", "MHz", "MHz", "MB", "MB", "MB"]
    head = "#Date       Time        gpu " + " ".join(f"{n:>6}" for n in names)
    unit_line = "#YYYYMMDD   HH:MM:SS    Idx " + " ".join(f"{u:>6}" for u in units)
    lines = [head, unit_line]
    for k in range(samples):
        if repeat_header and k and k % repeat_header == 0:
            lines += [head, unit_line]
        moment = start + timedelta(seconds=k)
        for gpu in gpus:
            cells = [
                f"{gpu.power(k):.0f}",
                f"{gpu.temp_c:.0f}",
                "-",
                f"{gpu.util(k):.0f}",
                f"{gpu.util(k) * 0.4:.0f}",
                "0",
                "0",
                "-",
                "-",
                "2619",
                f"{gpu.sm_mhz(k):.0f}",
                str(gpu.mem_used_mib),
                "3",
                "0",
            ]
            lines.append(
                f" {moment:%Y%m%d}   {moment:%H:%M:%S}   {gpu.index:>3} " + " ".join(f"{c:>6}" for c in cells)
            )
    return "\n".join(lines) + "\n"


def four_gpus(straggler: int | None = None) -> list[Gpu]:
    """A data-parallel job on four GPUs; with `straggler`, that one is mostly idle while the rest spin."""
    gpus = []
    for index in range(4):
        gpu = Gpu(index)
        if straggler is not None:
            gpu = (
                replace(gpu, util=lambda k: 22.0 + (k % 3), power=lambda k: 180.0)
                if index == straggler
                else replace(gpu, util=lambda k: 97.0, power=lambda k: 160.0 + (k % 4))
            )
        gpus.append(gpu)
    return gpus


SADC_PLACES = ("/usr/lib/sysstat/sadc", "/usr/lib64/sa/sadc", "/usr/libexec/sysstat/sadc", "/usr/lib/sa/sadc")
LOG_ZONE = timezone(timedelta(hours=2))  # the synthetic log is written as if on a host at UTC+02:00


def sadc_or_skip() -> str:
    sadc = shutil.which("sadc") or next((p for p in SADC_PLACES if os.access(p, os.X_OK)), None)
    if sadc is None or shutil.which("sadf") is None:
        message = "needs Debian's sysstat (sadc, sadf): apt-get install sysstat, as root"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return sadc


def collect(*args: str, zone: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m collect ARGS` as a user runs it, with this checkout first on the path; `zone`: the
    machine's time zone (POSIX TZ)."""
    repo = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-m", "collect", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"PYTHONPATH": str(repo)} | ({"TZ": zone} if zone else {}),
    )


def sysstat_run_with_gpu_log(data_dir: Path, scratch: Path, samples: int = 6) -> tuple[Path, Path]:
    """A real `sadc` recording of the next seconds, imported with import-sysstat, and a synthetic
    nvidia-smi log of the same seconds (two GPUs, one held at its power cap, 0.5 s apart, written in
    UTC+02:00 local time) merged into it with `import-nvidia-smi --into`; the run and the log."""
    sadc = sadc_or_skip()
    scratch.mkdir(parents=True, exist_ok=True)
    recording = scratch / "sa-e2e"
    subprocess.run([sadc, "-S", "XALL", "1", str(samples), str(recording)], check=True, timeout=60)
    done = collect("import-sysstat", str(recording), "--data-dir", str(data_dir), "--label", "web01 sysstat")
    assert done.returncode == 0, done.stderr
    run_dir = Path(done.stderr.strip().rsplit(" into ", 1)[1])
    meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    first = datetime.fromtimestamp(meta["start_unix"], LOG_ZONE).replace(tzinfo=None)
    count = int((meta["end_unix"] - meta["start_unix"]) / 0.5) + 1
    log = scratch / "gpu-web01.csv"
    log.write_text(
        query_gpu_log([Gpu(0), capped(1)], start=first, samples=count, interval_s=0.5), encoding="utf-8"
    )
    done = collect("import-nvidia-smi", str(log), "--into", str(run_dir), "--utc-offset", "+02:00")
    assert done.returncode == 0, done.stderr
    return run_dir, log


# `nvidia-smi dmon --gpm-metrics ID,...` columns as nvidia-smi names them, by GPM metric id, with the value a
# synthetic busy GPU reads (% or MiB/s). nvidia-smi prints `-` in a GPM column at the first sample (a GPM
# value spans two snapshots) and wherever the GPU has no GPM.
DMON_GPM = {1: ("gract", 95), 2: ("smutil", 62), 3: ("smocc", 28), 4: ("intutil", 7), 5: ("mmaact", 31),
            10: ("dram", 44), 11: ("fp64", 0), 12: ("fp32", 12), 13: ("fp16", 3), 20: ("pcitx", 850),
            21: ("pcirx", 1200), 60: ("nvlrx", 0), 61: ("nvltx", 0)}  # fmt: skip


def dmon_gpm_log(
    gpus: Sequence[Gpu],
    metric_ids: Sequence[int] = (1, 2, 3, 4, 5, 10, 11, 12, 13, 20, 21, 60, 61),
    start: datetime = datetime(2026, 11, 23, 14, 2, 1),
    samples: int = 6,
    without_gpm: Sequence[int] = (),
) -> str:
    """`nvidia-smi dmon -s pu -o DT --gpm-metrics IDS`: the default columns, then one per GPM metric with
    its `GPM:%` or `GPM:MiB/s` unit; GPUs whose index is in `without_gpm` print `-` there."""
    names = ["pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa"]
    units = ["W", "C", "C", "%", "%", "%", "%", "%", "%"]
    names += [DMON_GPM[i][0] for i in metric_ids]
    units += ["GPM:MiB/s" if i in (20, 21, 60, 61) else "GPM:%" for i in metric_ids]
    lines = [
        "#Date       Time        gpu " + " ".join(f"{n:>9}" for n in names),
        "#YYYYMMDD   HH:MM:SS    Idx " + " ".join(f"{u:>9}" for u in units),
    ]
    for k in range(samples):
        moment = start + timedelta(seconds=k)
        for gpu in gpus:
            cells = [
                f"{gpu.power(k):.0f}",
                f"{gpu.temp_c:.0f}",
                "-",
                f"{gpu.util(k):.0f}",
                "12",
                "0",
                "0",
                "0",
                "0",
            ]
            gpm = k > 0 and gpu.index not in without_gpm
            cells += [str(DMON_GPM[i][1]) if gpm else "-" for i in metric_ids]
            lines.append(
                f" {moment:%Y%m%d}   {moment:%H:%M:%S}   {gpu.index:>3} " + " ".join(f"{c:>9}" for c in cells)
            )
    return "\n".join(lines) + "\n"
