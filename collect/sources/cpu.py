"""CPU utilization (all and per logical CPU), I/O wait and steal from /proc/stat, frequency, 1-minute load.

`cpu_iowait_pct` and `cpu_steal_pct` have sysstat's meaning (share of all CPUs' time since the previous
row); iowait is not counted as busy in `cpu_util_pct`. With cpufreq, every logical CPU's frequency is
also recorded (`cpu<N>_freq_mhz`), so an idle core's low clock is not mistaken for throttling.

The load average only changes every 5 s in the kernel, and a frequency taken from /proc/cpuinfo (where
cpufreq is absent, e.g. in most VMs) is expensive to read: both are re-read at most once a second and
repeated in between. A /proc/cpuinfo frequency that has not moved in 10 reads (a VM's fixed figure) is
then re-read every 10 s until it moves again. Frequencies from cpufreq are read every tick.
"""

from __future__ import annotations

from pathlib import Path

from collect.procfs import KernelFile
from collect.sources.base import HELD_PERIOD_S, Reading, Source, SourceUnavailable, ratio_pct
from runformat.columns import (
    CPU_FREQ_MHZ,
    CPU_IOWAIT_PCT,
    CPU_STEAL_PCT,
    CPU_UTIL_PCT,
    FREQ_MHZ,
    LOAD1,
    UTIL_PCT,
    cpu_column,
)

SLOW_GAUGE_REFRESH_S = 1.0
STEADY_CPUINFO_REFRESH_S = 10.0
STEADY_AFTER_READS = 10
# /proc/stat: user nice system idle iowait irq softirq steal (guest and guest_nice are already in user/nice).
_COUNTED_FIELDS = 8
_IDLE, _IOWAIT, _STEAL = 3, 4, 7


def _counters(fields: list[bytes]) -> tuple[int, int, int, int]:
    """(busy, total, iowait, steal) jiffies of one /proc/stat cpu line."""
    values = list(map(int, fields[1 : 1 + _COUNTED_FIELDS]))
    total = sum(values)
    iowait = values[_IOWAIT] if len(values) > _IOWAIT else 0
    steal = values[_STEAL] if len(values) > _STEAL else 0
    return total - values[_IDLE] - iowait, total, iowait, steal


class CpuSource(Source):
    name = "cpu"
    min_period_s = HELD_PERIOD_S

    def __init__(self, proc_root: Path, sys_root: Path) -> None:
        super().__init__()
        try:
            self._stat = KernelFile(proc_root / "stat")
            self._loadavg = KernelFile(proc_root / "loadavg", 128)
            head = self._stat.read()
        except OSError as exc:
            raise SourceUnavailable(f"cannot read {proc_root}/stat: {exc.strerror or exc}") from exc
        cpu_names = [line.split()[0].decode() for line in head.splitlines() if line.startswith(b"cpu")]
        if not cpu_names or cpu_names[0] != "cpu":
            raise SourceUnavailable(f"{proc_root}/stat has no 'cpu' line")
        self._cpu_names = cpu_names  # "cpu", "cpu0", "cpu1", ...
        self._columns_by_name = {
            n.encode(): cpu_column(n[3:], UTIL_PCT) if n[3:] else CPU_UTIL_PCT for n in cpu_names
        }
        self._head_size = 256 + 160 * len(cpu_names)
        self._cpu_lines = len(cpu_names)  # the cpu lines come first; columns are fixed at the start
        self._freq_columns = [cpu_column(name[3:], FREQ_MHZ) for name in cpu_names[1:]]
        self._last: dict[bytes, tuple[int, int, int, int]] = {}
        self._freq_files = self._open_freq_files(sys_root, cpu_names[1:])
        self._cpuinfo = None if self._freq_files else self._open_cpuinfo(proc_root)
        self._slow_read_at = -SLOW_GAUGE_REFRESH_S
        self._load1: float | None = None
        self._cpuinfo_mhz: float | None = None
        self._cpuinfo_due = -SLOW_GAUGE_REFRESH_S
        self._cpuinfo_unchanged_reads = 0

    def _open_freq_files(self, sys_root: Path, per_cpu: list[str]) -> list[KernelFile]:
        files = []
        for name in per_cpu:
            path = sys_root / "devices/system/cpu" / name / "cpufreq/scaling_cur_freq"
            try:
                files.append(KernelFile(path, 64))
            except OSError:
                return []
        return files

    def _open_cpuinfo(self, proc_root: Path) -> KernelFile | None:
        try:
            cpuinfo = KernelFile(proc_root / "cpuinfo", 8192)
            has_mhz = b"cpu MHz" in cpuinfo.read()
        except OSError:
            return None
        if not has_mhz:
            self.note_once("no CPU frequency in cpufreq or /proc/cpuinfo: cpu_freq_mhz is empty")
            return None
        return cpuinfo

    def columns(self) -> list[str]:
        util = list(self._columns_by_name.values())
        per_core_freq = self._freq_columns if self._freq_files else []
        totals = [util[0], CPU_IOWAIT_PCT, CPU_STEAL_PCT]
        return [*totals, *util[1:], CPU_FREQ_MHZ, *per_core_freq, LOAD1]

    def _read_counters(self) -> dict[bytes, tuple[int, int, int, int]]:
        head = self._stat.read_head(self._head_size)
        self.last_raw = head
        counters = {}
        for line in head.split(b"\n", self._cpu_lines)[: self._cpu_lines]:
            fields = line.split()
            if not fields or not fields[0].startswith(b"cpu"):
                break  # a CPU went offline: fewer lines than at the start
            if len(fields) <= _COUNTED_FIELDS:  # an old kernel without steal or iowait
                counters[fields[0]] = _counters(fields)
                continue
            user, nice, system, idle, iowait, irq, softirq, steal = map(int, fields[1 : 1 + _COUNTED_FIELDS])
            total = user + nice + system + idle + iowait + irq + softirq + steal
            counters[fields[0]] = (total - idle - iowait, total, iowait, steal)
        return counters

    def prime(self, now: float) -> None:
        self._last = self._read_counters()

    def sample(self, now: float) -> Reading:
        current = self._read_counters()
        last, self._last = self._last, current
        reading: Reading = {}
        for name, column in self._columns_by_name.items():
            before, after = last.get(name), current.get(name)
            if before is None or after is None or after[1] <= before[1]:
                reading[column] = None  # no time passed in the counters: unknown, not 0
                continue
            busy = 100.0 * (after[0] - before[0]) / (after[1] - before[1])
            reading[column] = round(100.0 if busy > 100.0 else 0.0 if busy < 0.0 else busy, 2)
        before, after = last.get(b"cpu"), current.get(b"cpu")
        if before is not None and after is not None:
            whole = after[1] - before[1]
            reading[CPU_IOWAIT_PCT] = ratio_pct(after[2] - before[2], whole)
            reading[CPU_STEAL_PCT] = ratio_pct(after[3] - before[3], whole)
        else:
            reading[CPU_IOWAIT_PCT] = reading[CPU_STEAL_PCT] = None
        if now - self._slow_read_at >= SLOW_GAUGE_REFRESH_S:
            self._slow_read_at = now
            self._load1 = float(self._loadavg.read().split(None, 1)[0])
            if self._cpuinfo is not None and now >= self._cpuinfo_due:
                self._refresh_cpuinfo_mhz(now)
        if self._freq_files:
            khz = [int(f.read()) for f in self._freq_files]
            reading[CPU_FREQ_MHZ] = round(sum(khz) / len(khz) / 1000.0, 1)
            for column, value in zip(self._freq_columns, khz, strict=True):
                reading[column] = round(value / 1000.0, 1)
        else:
            reading[CPU_FREQ_MHZ] = self._cpuinfo_mhz
        reading[LOAD1] = self._load1
        return reading

    def _refresh_cpuinfo_mhz(self, now: float) -> None:
        mhz = self._cpuinfo_frequency_mhz()
        unchanged = mhz == self._cpuinfo_mhz
        self._cpuinfo_unchanged_reads = self._cpuinfo_unchanged_reads + 1 if unchanged else 0
        self._cpuinfo_mhz = mhz
        steady = self._cpuinfo_unchanged_reads >= STEADY_AFTER_READS
        self._cpuinfo_due = now + (STEADY_CPUINFO_REFRESH_S if steady else 0.0)

    def _cpuinfo_frequency_mhz(self) -> float | None:
        if self._cpuinfo is None:
            return None
        values = [
            float(line.rsplit(b":", 1)[1])
            for line in self._cpuinfo.read().split(b"\n")
            if line.startswith(b"cpu MHz")
        ]
        return round(sum(values) / len(values), 1) if values else None

    def close(self) -> None:
        for kernel_file in (self._stat, self._loadavg, self._cpuinfo, *self._freq_files):
            if kernel_file is not None:
                kernel_file.close()
