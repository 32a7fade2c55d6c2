"""Reading a sysstat recording: `sadf -d` text (or a binary sa file through `sadf -d -U`) into rows.

Each row is keyed by its sample time and already carries the run format's column names; how each is
derived from sysstat's fields is in docs/run-format.md ("Imported runs").
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from runformat.columns import (
    CPU_IOWAIT_PCT,
    CPU_STEAL_PCT,
    CPU_UTIL_PCT,
    DISK_BUSIEST_BPS,
    UTIL_PCT,
    cpu_column,
)

SA_MAGIC = (b"\x96\xd5", b"\xd5\x96")
SADF_ACTIVITIES = ["-u", "ALL", "-P", "ALL", "-r", "-S", "-q", "-d", "-n", "DEV"]
SADF_TIMEOUT_S = 300
KIB = 1024
# Not whole physical disks: loop, RAM, compressed RAM, device-mapper and md layers, optical, floppy, nbd.
_VIRTUAL_DISK = re.compile(r"^(loop|ram|zram|dm-|md|sr|fd|nbd)")
_PARTITION = re.compile(r"^((sd|vd|xvd|hd)[a-z]+\d+|nvme\d+n\d+p\d+|mmcblk\d+p\d+)$")
_HOST_LINE = re.compile(r"^Host:\s+(\S+)\s+(\S+)\s+\((\S+)\).*?\((\d+) CPU\)", re.MULTILINE)
_VERSION_LINE = re.compile(r"sysstat version (\S+)")
_RESTART_CPUS = re.compile(r"\((\d+) CPU\)")
NOT_IN_SYSSTAT = "not in a sysstat recording"
CUT_SHORT = "End of system activity file unexpected"
OTHER_FORMAT = "cannot read the format"
# What a real recording can hold: sysstat's binary files date from 1999; a host clock may run ahead a bit.
EARLIEST_PLAUSIBLE_UNIX = 946684800.0  # 2000-01-01
FUTURE_SLACK_S = 366 * 86400.0
LONGEST_PLAUSIBLE_INTERVAL_S = 7 * 86400.0


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
    restarts: list[tuple[float, int | None]] = field(default_factory=list)  # (time, CPUs after it)

    def row(self, time_unix: float) -> dict[str, float]:
        return self.rows.setdefault(time_unix, {})


# ----------------------------------------------------------------------------------------- reading


def is_sa_binary(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) in SA_MAGIC


def foreign_byte_order(path: Path) -> str | None:
    """ "big-endian" (or "little-endian") when the file was written on a machine of the other byte order."""
    with open(path, "rb") as handle:
        magic = handle.read(2)
    native = SA_MAGIC[0] if sys.byteorder == "little" else SA_MAGIC[1]
    if magic in SA_MAGIC and magic != native:
        return "big-endian" if sys.byteorder == "little" else "little-endian"
    return None


class _OtherFormat(Exception):
    """This sadf cannot read the file's format (an older sysstat wrote it); args[0] says which."""


def sadf_text(path: Path) -> tuple[str, dict[str, str]]:
    """`sadf -d -U` of a binary sa file, and what its header says (host, kernel, CPUs, version).

    A file of an older sysstat format is converted with `sadf -c` first (into a temporary file)."""
    sadf = shutil.which("sadf")
    if sadf is None:
        raise SysstatImportError(
            "sadf not found: install sysstat (apt-get install sysstat), or pass the text of `sadf -d FILE`"
        )
    try:
        return _read_binary(sadf, path)
    except _OtherFormat as other:
        why = other.args[0]
    with tempfile.TemporaryDirectory(prefix="sysstat-convert-") as scratch:
        converted = Path(scratch) / "converted"
        problem = _convert(sadf, path, converted)
        if problem is not None:
            raise SysstatImportError(
                f"sadf cannot read {path}: {why}; `sadf -c` could not convert it either ({problem}): "
                "import the text of `sadf -d` made with the sysstat that recorded it"
            )
        try:
            text, info = _read_binary(sadf, converted)
        except _OtherFormat as still:
            raise SysstatImportError(f"sadf cannot read {path} even after `sadf -c`: {still}") from None
    info["converted"] = f"{why}; converted with `sadf -c`"
    return text, info


def _read_binary(sadf: str, path: Path) -> tuple[str, dict[str, str]]:
    header, _ = _run_sadf([sadf, "-H", str(path)], path)
    text, complaint = _run_sadf([sadf, "-d", "-U", str(path), "--", *SADF_ACTIVITIES], path)
    info: dict[str, str] = {"sadf_warning": complaint} if complaint else {}
    if match := _HOST_LINE.search(header):
        info |= {"os": match.group(1), "kernel": match.group(2), "host": match.group(3)}
        info["cpus"] = match.group(4)
    if match := _VERSION_LINE.search(header):
        info["sysstat_version"] = match.group(1)
    return text, info


def _convert(sadf: str, path: Path, target: Path) -> str | None:
    """`sadf -c path > target`; None when it worked, else what went wrong, in one line."""
    try:
        with open(target, "wb") as out:
            done = subprocess.run(
                [sadf, "-c", str(path)],
                stdout=out,
                stderr=subprocess.PIPE,
                timeout=SADF_TIMEOUT_S,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sadf -c failed: {exc}"
    lines = [line.strip() for line in done.stderr.decode(errors="replace").splitlines() if line.strip()]
    if done.returncode != 0 or not is_sa_binary(target):
        complaint = next((line for line in reversed(lines) if "onvert" in line), lines[-1] if lines else "")
        return complaint or f"exit code {done.returncode}"
    return None


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
        version = next((line for line in lines if OTHER_FORMAT in line), None)
        if version:
            made_by = next((line for line in lines if line.startswith("File created by")), "")
            raise _OtherFormat(f"{version} ({made_by[0].lower() + made_by[1:]})" if made_by else version)
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
        if len(cells) >= 4 and cells[1].strip() == "-1":  # a record without statistics
            if "RESTART" in cells[3]:  # the host rebooted; sadf prints no header before it
                cpus = _RESTART_CPUS.search(cells[3])
                when = _timestamp(cells[2], number)
                recording.restarts.append((when, int(cpus.group(1)) if cpus else None))
            continue  # a comment (COM) carries nothing to import
        if header is None:
            raise SysstatImportError(
                f"line {number}: data before any `sadf -d` header (is this sadf -d output?)"
            )
        if len(cells) != len(header):
            raise SysstatImportError(f"line {number}: {len(cells)} fields, the header has {len(header)}")
        recording.host = recording.host or cells[0]
        values = dict(zip(header, cells, strict=True))
        _add_row(recording, header[3], values, _timestamp(cells[2], number), number)
        recording.intervals.append(_number(cells[1], number))
    return recording


def implausibility(recording: Recording, now_unix: float | None = None) -> str | None:
    """What makes the content unbelievable as a recording (a file read with the wrong byte order, or
    damaged), in one line; None if it looks like one."""
    now_unix = time.time() if now_unix is None else now_unix
    times = sorted(recording.rows) + [when for when, _ in recording.restarts]
    latest = now_unix + FUTURE_SLACK_S
    odd = [when for when in times if not EARLIEST_PLAUSIBLE_UNIX <= when <= latest]
    if odd:
        return (
            f"timestamp {odd[0]:.0f} ({_year(odd[0])}) is decades away from when this file can have been "
            "recorded (wrong byte order, or a damaged file?)"
        )
    longest = max(recording.intervals, default=0.0)
    if longest > LONGEST_PLAUSIBLE_INTERVAL_S:
        return (
            f"an interval of {longest:.0f} s ({longest / 86400 / 365.25:.1f} years) between samples "
            "(wrong byte order, or a damaged file?)"
        )
    shortest = min(recording.intervals, default=1.0)
    if shortest <= 0:
        return f"an interval of {shortest:g} s between samples (a damaged file?)"
    return None


def _year(unix: float) -> str:
    try:
        return f"year {datetime.fromtimestamp(unix, timezone.utc).year}"
    except (OverflowError, OSError, ValueError):
        return "beyond any calendar"


def _add_row(recording: Recording, kind: str, values: dict[str, str], time_unix: float, number: int) -> None:
    row = recording.row(time_unix)

    def num(name: str) -> float:
        return _number(values[name], number)

    if kind == "CPU" and "%idle" in values:
        recording.activities.add("cpu")
        busy = 100.0 - num("%idle") - (num("%iowait") if "%iowait" in values else 0.0)
        cpu = values["CPU"].strip()
        whole = cpu in ("-1", "all")
        row[CPU_UTIL_PCT if whole else cpu_column(cpu, UTIL_PCT)] = round(max(busy, 0.0), 2)
        if whole:
            for name, column in (("%iowait", CPU_IOWAIT_PCT), ("%steal", CPU_STEAL_PCT)):
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
        util = num("%util")
        if DISK_BUSIEST_BPS not in row or util > row["disk_util_pct"]:
            row[DISK_BUSIEST_BPS] = read + write  # what the busiest device so far moved
        row["disk_util_pct"] = max(row.get("disk_util_pct", 0.0), util)
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
