"""`python -m collect import-sysstat FILE`: a sysstat recording laid out as a run directory.

FILE is a binary `sa` file written by `sadc` / `sar -o` (read with `sadf -d -U`, which must be the
sysstat that wrote it), or the semicolon-separated text `sadf -d` prints. The run directory gets the
contract's column names (docs/run-format.md) with sysstat's own definitions behind them (see
"Imported runs" there); what sysstat did not record is left out and `run.json` says why.
"""

from __future__ import annotations

import itertools
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from runformat import FORMAT_VERSION, RUN_JSON, RUNS_SUBDIR, TELEMETRY_CSV, new_run_id, write_json_atomic

SA_MAGIC = (b"\x96\xd5", b"\xd5\x96")
SADF_ACTIVITIES = ["-u", "ALL", "-P", "ALL", "-r", "-S", "-q", "-d", "-n", "DEV"]
SADF_TIMEOUT_S = 300
KIB = 1024
# Not whole physical disks: loop, RAM, compressed RAM, device-mapper and md layers, optical, floppy, nbd.
_VIRTUAL_DISK = re.compile(r"^(loop|ram|zram|dm-|md|sr|fd|nbd)")
_PARTITION = re.compile(r"^((sd|vd|xvd|hd)[a-z]+\d+|nvme\d+n\d+p\d+|mmcblk\d+p\d+)$")
_HOST_LINE = re.compile(r"^Host:\s+(\S+)\s+(\S+)\s+\((\S+)\).*?\((\d+) CPU\)", re.MULTILINE)
_VERSION_LINE = re.compile(r"sysstat version (\S+)")
NOT_IN_SYSSTAT = "not in a sysstat recording"
CUT_SHORT = "End of system activity file unexpected"


class SysstatImportError(Exception):
    """The file cannot be imported; the message is one line for the user."""


@dataclass
class Recording:
    """What a sadf -d text holds, one row per sample time."""

    host: str = ""
    intervals: list[float] = field(default_factory=list)
    rows: dict[float, dict[str, float]] = field(default_factory=dict)
    activities: set[str] = field(default_factory=set)
    disks: set[str] = field(default_factory=set)
    interfaces: set[str] = field(default_factory=set)
    restarts: int = 0

    def row(self, time_unix: float) -> dict[str, float]:
        return self.rows.setdefault(time_unix, {})


# ----------------------------------------------------------------------------------------- reading


def is_sa_binary(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) in SA_MAGIC


def sadf_text(path: Path) -> tuple[str, dict[str, str]]:
    """`sadf -d -U` of a binary sa file, and what its header says (host, kernel, CPUs, version)."""
    sadf = shutil.which("sadf")
    if sadf is None:
        raise SysstatImportError(
            "sadf not found: install sysstat (apt-get install sysstat), or pass the text of `sadf -d FILE`"
        )
    header, _ = _run_sadf([sadf, "-H", str(path)], path)
    text, complaint = _run_sadf([sadf, "-d", "-U", str(path), "--", *SADF_ACTIVITIES], path)
    info: dict[str, str] = {"sadf_warning": complaint} if complaint else {}
    if match := _HOST_LINE.search(header):
        info |= {"os": match.group(1), "kernel": match.group(2), "host": match.group(3)}
        info["cpus"] = match.group(4)
    if match := _VERSION_LINE.search(header):
        info["sysstat_version"] = match.group(1)
    return text, info


def _run_sadf(command: list[str], path: Path) -> tuple[str, str]:
    """sadf's output, and the first line it complained with while still succeeding (e.g. a cut file)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SADF_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SysstatImportError(f"{command[0]} failed: {exc}") from exc
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    cut_short = any(CUT_SHORT in line for line in lines)
    if cut_short and "#" in done.stdout:  # a file cut mid-record: sadf printed every whole record first
        return done.stdout, next(line for line in lines if CUT_SHORT in line)
    if done.returncode != 0:
        lines = lines or [line.strip() for line in done.stdout.splitlines() if line.strip()]
        version = next((line for line in lines if "cannot read the format" in line), None)
        if version:
            raise SysstatImportError(
                f"sadf cannot read {path}: {version}; convert it with `sadf -c {path} > {path}.new` and "
                "import that, or import the text of `sadf -d` made where it was recorded"
            )
        reason = lines[0] if lines else f"exit code {done.returncode}"
        raise SysstatImportError(f"sadf cannot read {path}: {reason}")
    return done.stdout, lines[0] if lines else ""


def parse_sadf(lines: Iterable[str]) -> Recording:
    """Blocks of `# hostname;interval;timestamp;...` headers and rows, as `sadf -d` prints them."""
    recording = Recording()
    header: list[str] | None = None
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            header = [name.strip() for name in line.lstrip("#").split(";")]
            if header[:3] != ["hostname", "interval", "timestamp"]:
                raise SysstatImportError(f"line {number}: not a `sadf -d` header: {line[:80]}")
            continue
        cells = line.split(";")
        if header is None:
            raise SysstatImportError(
                f"line {number}: data before any `sadf -d` header (is this sadf -d output?)"
            )
        if len(cells) >= 4 and ("RESTART" in cells[3] or cells[1].strip() == "-1"):
            recording.restarts += 1
            continue
        if len(cells) != len(header):
            raise SysstatImportError(f"line {number}: {len(cells)} fields, the header has {len(header)}")
        recording.host = recording.host or cells[0]
        values = dict(zip(header, cells, strict=True))
        _add_row(recording, header[3], values, _timestamp(cells[2], number), number)
        recording.intervals.append(_number(cells[1], number))
    return recording


def _add_row(recording: Recording, kind: str, values: dict[str, str], time_unix: float, number: int) -> None:
    row = recording.row(time_unix)

    def num(name: str) -> float:
        return _number(values[name], number)

    if kind == "CPU" and "%idle" in values:
        recording.activities.add("cpu")
        busy = 100.0 - num("%idle") - (num("%iowait") if "%iowait" in values else 0.0)
        cpu = values["CPU"].strip()
        prefix = "cpu" if cpu in ("-1", "all") else f"cpu{cpu}"
        row[f"{prefix}_util_pct"] = round(max(busy, 0.0), 2)
        if prefix == "cpu":
            for name, column in (("%iowait", "cpu_iowait_pct"), ("%steal", "cpu_steal_pct")):
                if name in values:
                    row[column] = num(name)
    elif kind == "kbmemfree":
        recording.activities.add("memory")
        row["mem_used_bytes"] = num("kbmemused") * KIB
        row["mem_util_pct"] = num("%memused")
    elif kind == "kbswpfree":
        recording.activities.add("swap")
        row["swap_used_bytes"] = num("kbswpused") * KIB
    elif kind == "runq-sz":
        recording.activities.add("load")
        row["load1"] = num("ldavg-1")
    elif kind == "DEV":
        device = values["DEV"].strip()
        if _VIRTUAL_DISK.match(device) or _PARTITION.match(device):
            return
        recording.activities.add("disk")
        recording.disks.add(device)
        read, write = _disk_bytes_per_s(values, number)
        row["disk_read_bps"] = row.get("disk_read_bps", 0.0) + read
        row["disk_write_bps"] = row.get("disk_write_bps", 0.0) + write
        row["disk_util_pct"] = max(row.get("disk_util_pct", 0.0), num("%util"))
    elif kind == "IFACE":
        interface = values["IFACE"].strip()
        if interface == "lo":
            return
        recording.activities.add("network")
        recording.interfaces.add(interface)
        row["net_rx_bps"] = row.get("net_rx_bps", 0.0) + num("rxkB/s") * KIB
        row["net_tx_bps"] = row.get("net_tx_bps", 0.0) + num("txkB/s") * KIB


def _disk_bytes_per_s(values: dict[str, str], number: int) -> tuple[float, float]:
    if "rkB/s" in values:
        return _number(values["rkB/s"], number) * KIB, _number(values["wkB/s"], number) * KIB
    return _number(values["rd_sec/s"], number) * 512, _number(
        values["wr_sec/s"], number
    ) * 512  # sysstat < 11.5


def _timestamp(text: str, number: int) -> float:
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    if not text.endswith(" UTC"):
        raise SysstatImportError(
            f"line {number}: timestamp {text!r} is not UTC: use `sadf -d` without -T (or with -U)"
        )
    try:
        moment = datetime.strptime(text.removesuffix(" UTC"), "%Y-%m-%d %H:%M:%S")
    except ValueError as exc:
        raise SysstatImportError(f"line {number}: unreadable timestamp {text!r}") from exc
    return moment.replace(tzinfo=timezone.utc).timestamp()


def _number(text: str, number: int) -> float:
    try:
        return float(text.strip().replace(",", "."))
    except ValueError as exc:
        raise SysstatImportError(f"line {number}: {text!r} is not a number") from exc


# ----------------------------------------------------------------------------------------- writing

SOURCE_ACTIVITIES = {
    "cpu": ("cpu", "load"),
    "memory": ("memory", "swap"),
    "disk": ("disk",),
    "network": ("network",),
}
COLUMN_ORDER = [
    "cpu_util_pct",
    "cpu_iowait_pct",
    "cpu_steal_pct",
    "load1",
    "cpu_temp_c",
    "mem_used_bytes",
    "mem_util_pct",
    "swap_used_bytes",
    "disk_read_bps",
    "disk_write_bps",
    "disk_util_pct",
    "net_rx_bps",
    "net_tx_bps",
]


def telemetry_columns(recording: Recording) -> list[str]:
    present = {column for row in recording.rows.values() for column in row}
    cores = sorted(int(m.group(1)) for column in present if (m := re.fullmatch(r"cpu(\d+)_util_pct", column)))
    columns = ["time_unix", "elapsed_s"]
    for column in COLUMN_ORDER:
        if column in present or column == "cpu_temp_c":
            columns.append(column)
        if column == "cpu_steal_pct":
            columns += [f"cpu{n}_util_pct" for n in cores]
    return columns


def import_recording(source: Path, data_dir: Path, label: str = "") -> Path:
    """Write data_dir/runs/<run_id>/ (run.json, telemetry.csv) from a recording; its path."""
    info: dict[str, str] = {}
    if is_sa_binary(source):
        text, info = sadf_text(source)
    else:
        try:
            text = source.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise SysstatImportError(f"{source}: neither a sysstat data file nor `sadf -d` text") from exc
    try:
        recording = parse_sadf(text.splitlines())
    except SysstatImportError as exc:
        raise SysstatImportError(f"{source}: {exc}") from exc
    if not recording.rows or "cpu" not in recording.activities:
        raise SysstatImportError(f"{source}: no CPU utilization samples (record with sadc, or sadf -d -- -u)")
    times = sorted(recording.rows)
    interval = statistics.median(recording.intervals)
    start, end = times[0] - interval, times[-1]
    host = info.get("host") or recording.host or "unknown"
    run_dir = _stage_and_publish(
        Path(data_dir),
        new_run_id("cpu", datetime.fromtimestamp(start, timezone.utc), host),
        lambda staged, run_id: _write_run(
            staged, run_id, source, recording, info, host, label, interval, start, end
        ),
    )
    return run_dir


def _write_run(
    run_dir: Path,
    run_id: str,
    source: Path,
    recording: Recording,
    info: dict[str, str],
    host: str,
    label: str,
    interval: float,
    start: float,
    end: float,
) -> None:
    columns = telemetry_columns(recording)
    times = sorted(recording.rows)
    with open(run_dir / TELEMETRY_CSV, "w", encoding="ascii", newline="") as handle:
        handle.write(",".join(columns) + "\n")
        for time_unix in times:
            row = recording.rows[time_unix] | {
                "time_unix": time_unix,
                "elapsed_s": round(time_unix - start, 6),
            }
            handle.write(",".join(_cell(row.get(column)) for column in columns) + "\n")
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    skipped = sum(max(round(gap / interval) - 1, 0) for gap in gaps if gap > 1.5 * interval)
    notes = [
        f"imported from {source.name} with `python -m collect import-sysstat`; the figures are sysstat's "
        "(sadc), not this workbench's sampler"
    ]
    if info.get("sadf_warning"):
        notes.append(f"sadf said: {info['sadf_warning']} (the last sample may be missing)")
    if recording.restarts:
        notes.append(f"{recording.restarts} reboot(s) of the host inside the recording (LINUX RESTART)")
    if skipped:
        notes.append(f"{skipped} interval(s) missing from the recording")
    meta = {
        "format_version": FORMAT_VERSION,
        "run_id": run_id,
        "label": label or f"sysstat {host}",
        "device": "cpu",
        "host": host,
        "command": None,
        "interval_s": interval,
        "start_utc": _utc(start),
        "start_unix": start,
        "end_utc": _utc(end),
        "end_unix": end,
        "requested_duration_s": None,
        "actual_duration_s": round(end - start, 6),
        "end_reason": "completed",
        "exit_code": None,
        "samples": len(times),
        "late_ticks": None,
        "skipped_ticks": skipped,
        "system": _system(info, recording),
        "sources": _sources(recording),
        "notes": notes,
        "imported_from": {
            "tool": "sysstat",
            "file": str(source.resolve()),
            "format": "sa binary (sadf -d -U)" if info.get("sysstat_version") else "sadf -d text",
            "sysstat_version": info.get("sysstat_version"),
            "imported_utc": datetime.now(timezone.utc).isoformat(),
        },
    }
    write_json_atomic(run_dir / RUN_JSON, meta)


def _system(info: dict[str, str], recording: Recording) -> dict[str, Any]:
    present = {column for row in recording.rows.values() for column in row}
    cores = sum(1 for column in present if re.fullmatch(r"cpu\d+_util_pct", column))
    logical = int(info["cpus"]) if info.get("cpus", "").isdigit() else (cores or None)
    return {"cpu_cores_logical": logical, "os": info.get("os"), "kernel": info.get("kernel")}


def _sources(recording: Recording) -> dict[str, Any]:
    sources: dict[str, Any] = {}
    for name, activities in SOURCE_ACTIVITIES.items():
        found = [a for a in activities if a in recording.activities]
        entry: dict[str, Any] = {"available": bool(found)}
        if not found:
            entry["reason"] = f"no {name} activity in the sysstat recording" + (
                " (sadc records it with -S DISK)" if name == "disk" else ""
            )
        elif name == "disk":
            entry["notes"] = [f"disks: {', '.join(sorted(recording.disks))}"]
        elif name == "network":
            entry["notes"] = [f"interfaces: {', '.join(sorted(recording.interfaces))}"]
        sources[name] = entry
    sources["thermal"] = {"available": False, "reason": f"temperature is {NOT_IN_SYSSTAT}"}
    sources["process"] = {"available": False, "reason": "no command was launched (imported recording)"}
    sources["nvml"] = {"available": False, "reason": f"GPU readings are {NOT_IN_SYSSTAT}"}
    return sources


def _stage_and_publish(data_dir: Path, base: str, write: Any) -> Path:
    """Write into a hidden directory, then rename it to runs/<run_id> (-2, -3... if taken)."""
    runs = data_dir / RUNS_SUBDIR
    try:
        runs.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix=f".import-{base}.", dir=runs))
    except OSError as exc:
        raise SysstatImportError(f"cannot create a run directory in {runs}: {exc.strerror or exc}") from exc
    try:
        for attempt in range(1, 1000):
            target = runs / (base if attempt == 1 else f"{base}-{attempt}")
            if not target.exists():
                write(staged, target.name)
                staged.rename(target)
                return target
        raise SysstatImportError(f"too many runs named {base} in {runs}")
    except OSError as exc:
        raise SysstatImportError(f"cannot write the run into {runs}: {exc.strerror or exc}") from exc
    finally:
        if staged.exists():
            shutil.rmtree(staged, ignore_errors=True)


def _cell(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(round(value, 6))


def _utc(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).isoformat()


def main(source: Path, data_dir: Path, label: str = "") -> int:
    """The CLI's import-sysstat: 0 and the run directory on stderr, or one line and exit 2."""
    if not source.is_file():
        print(f"python -m collect import-sysstat: error: {source}: no such file", file=sys.stderr)
        return 2
    try:
        run_dir = import_recording(source, data_dir, label)
    except (SysstatImportError, OSError) as exc:
        print(f"python -m collect import-sysstat: error: {exc}", file=sys.stderr)
        return 2
    print(f"collect: imported {source} into {run_dir}", file=sys.stderr)
    return 0
