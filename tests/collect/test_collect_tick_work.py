"""What a tick reads and parses: the short cuts that keep a 10 ms tick cheap give the long way's cells."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from collectfakes import write_tree

from collect.sources.cpu import STEADY_AFTER_READS, STEADY_CPUINFO_REFRESH_S, CpuSource, _counters
from collect.sources.memory import MemorySource
from collect.sources.process import MIN_RESCAN_GAP_S, ProcessTreeSource
from collect.writer import TelemetryWriter

STAT_4 = """cpu  400 4 200 3000 40 8 8 12 0 0
cpu0 100 1 50 750 10 2 2 3 0 0
cpu1 100 1 50 750 10 2 2 3 0 0
cpu2 100 1 50 750 10 2 2 3 0 0
cpu3 100 1 50 750 10 2 2 3 0 0
intr 123 4 5 6
ctxt 99
"""
STAT_4_LATER = """cpu  520 4 260 3120 80 8 8 20 0 0
cpu0 110 1 50 840 10 2 2 3 0 0
cpu1 150 1 60 800 30 2 2 3 0 0
cpu2 100 1 90 750 30 2 2 11 0 0
cpu3 120 1 50 800 10 2 2 3 0 0
intr 123 4 5 6
ctxt 99
"""
# cpu2 went offline: its line is gone, the others keep their order
STAT_3_LATER = """cpu  520 4 260 3120 80 8 8 20 0 0
cpu0 110 1 50 840 10 2 2 3 0 0
cpu1 150 1 60 800 30 2 2 3 0 0
cpu3 120 1 50 800 10 2 2 3 0 0
intr 123 4 5 6
"""


def _cpu_source(tmp_path: Path, stat: str) -> tuple[CpuSource, Path]:
    proc = write_tree(tmp_path / "proc", {"stat": stat, "loadavg": "0.5 0 0 1/1 1\n", "cpuinfo": ""})
    return CpuSource(proc, tmp_path / "sys"), proc


def test_cpu_counters_follow_the_kernel_lines_old_ones_too(tmp_path: Path) -> None:
    source, proc = _cpu_source(tmp_path, STAT_4)
    counters = source._read_counters()
    for line in STAT_4.splitlines()[:5]:
        fields = line.encode().split()
        assert counters[fields[0]] == _counters(fields)
    assert counters[b"cpu1"] == (100 + 1 + 50 + 2 + 2 + 3, 100 + 1 + 50 + 750 + 10 + 2 + 2 + 3, 10, 3)
    old_kernel = "cpu  10 0 10 80 5\ncpu0 5 0 5 40 5\ncpu1 5 0 5 40 0\ncpu2 0 0 0 0 0\nintr 1\n"
    (proc / "stat").write_text(old_kernel)
    assert source._read_counters()[b"cpu0"] == (10, 55, 5, 0)  # a kernel without steal


def test_cpu_cells_and_an_offline_cpu_is_unknown(tmp_path: Path) -> None:
    source, proc = _cpu_source(tmp_path, STAT_4)
    source.prime(0.0)
    (proc / "stat").write_text(STAT_4_LATER)
    fast = source.sample(1.0)
    assert fast["cpu1_util_pct"] == pytest.approx(100 * 60 / 130, abs=0.01)  # 60 busy of 130 jiffies
    assert fast["cpu2_util_pct"] == pytest.approx(100 * 48 / 68, abs=0.01)  # steal is busy, iowait is not
    assert fast["cpu_iowait_pct"] == pytest.approx(100 * 40 / 348, abs=0.01)
    assert fast["cpu_steal_pct"] == pytest.approx(100 * 8 / 348, abs=0.01)
    (proc / "stat").write_text(STAT_4)
    source.prime(0.0)
    (proc / "stat").write_text(STAT_3_LATER)
    offline = source.sample(1.0)
    assert offline["cpu2_util_pct"] is None
    assert offline["cpu3_util_pct"] == fast["cpu3_util_pct"]


MEMINFO = """MemTotal:       1000000 kB
MemFree:         100000 kB
MemAvailable:    250000 kB
Buffers:          10000 kB
Cached:           20000 kB
SwapCached:           0 kB
SwapTotal:       500000 kB
SwapFree:        400000 kB
Dirty:                0 kB
"""


def test_memory_reads_a_head_and_never_a_cut_number(tmp_path: Path) -> None:
    proc = write_tree(tmp_path / "proc", {"meminfo": MEMINFO})
    source = MemorySource(proc)
    assert source._head_size < len(MEMINFO) + 128
    assert source.sample(0.0)["swap_used_bytes"] == 100000 * 1024
    # The lines before SwapFree grow, so the head now ends inside SwapFree's number: the whole file is read.
    padded = MEMINFO.replace("Buffers:     ", "Buffers:" + " " * 120).replace("400000 kB", "399999 kB")
    (proc / "meminfo").write_text(padded)
    assert source.sample(1.0)["swap_used_bytes"] == 100001 * 1024
    assert source.sample(2.0)["mem_used_bytes"] == 750000 * 1024


def _stat_line(pid: int, ppid: int, utime: int) -> str:
    return f"{pid} (x) S {ppid} {pid} {pid} 0 -1 0 0 0 0 0 {utime} 0 0 0 20 0 1 0 100 1000 50 0\n"


def test_new_processes_are_looked_for_at_most_once_per_gap(tmp_path: Path) -> None:
    proc = write_tree(tmp_path, {"loadavg": "0 0 0 1/1 100\n", "100/stat": _stat_line(100, 1, 7)})
    source = ProcessTreeSource(proc)
    source.attach(100)  # its first look, now
    start = now = time.monotonic()
    source.prime(now)
    scans = source.scans
    write_tree(tmp_path, {"loadavg": "0 0 0 1/1 101\n", "101/stat": _stat_line(101, 100, 3)})
    while now < start + MIN_RESCAN_GAP_S * 0.9:  # 10 ms ticks within the gap: no look, the new pid waits
        now += 0.01
        source.maintain(now)
        source.sample(now)
    assert source.scans == scans and source.pids == [100]
    later = now + MIN_RESCAN_GAP_S
    source.maintain(later)
    assert source.scans == scans + 1 and source.pids == [100, 101]
    reading = source.sample(later)
    assert reading["proc_threads"] == 2 and reading["proc_rss_bytes"] == 100 * source._page_size
    # born since the previous look: all of its CPU time counts, in the row that first sees it
    assert reading["proc_cpu_pct"] == pytest.approx(3 / source._ticks_per_s / (later - now) * 100, abs=0.1)


def test_writer_cells_are_the_numbers_as_python_writes_them(tmp_path: Path) -> None:
    writer = TelemetryWriter(tmp_path / "t.csv", ["a", "b", "c", "d", "e"])
    writer.write({"a": 1.5, "b": None, "c": 0, "d": 1e-07, "e": 12345678901234})
    writer.write({"a": None, "b": None, "c": None, "d": None, "e": None})
    writer.close()
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines == ["a,b,c,d,e", "1.5,,0,1e-07,12345678901234", ",,,,"]


def test_held_cells_are_formatted_once_per_held_version_and_the_others_every_row(tmp_path: Path) -> None:
    writer = TelemetryWriter(tmp_path / "t.csv", ["t", "h1", "g", "h2"], held_columns=["h1", "h2"])
    writer.write({"t": 1.0, "h1": 10.5, "g": 7, "h2": None}, held_version=1)
    # The same version: the caller promises the held cells have not changed, so their text is reused.
    writer.write({"t": 2.0, "h1": 99.0, "g": 8, "h2": 3}, held_version=1)
    writer.write({"t": 3.0, "h1": 11.5, "g": None, "h2": 4}, held_version=2)
    writer.write({"t": 4.0, "h1": 12.5, "g": 9, "h2": 5})  # no version: every cell from this row
    writer.close()
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines == ["t,h1,g,h2", "1.0,10.5,7,", "2.0,10.5,8,", "3.0,11.5,,4", "4.0,12.5,9,5"]


def test_a_fixed_cpuinfo_frequency_is_reread_every_10_s_until_it_moves(tmp_path: Path) -> None:
    proc = write_tree(tmp_path / "proc", {"stat": STAT_4, "loadavg": "0.5 0 0 1/1 1\n"})
    (proc / "cpuinfo").write_text("processor : 0\ncpu MHz : 2000.000\n")
    source = CpuSource(proc, tmp_path / "sys")
    source.prime(0.0)
    now = 0.0
    for _ in range(STEADY_AFTER_READS + 1):  # a read a second, always the same figure
        now += 1.0
        assert source.sample(now)["cpu_freq_mhz"] == 2000.0
    (proc / "cpuinfo").write_text("processor : 0\ncpu MHz : 3000.000\n")
    assert source.sample(now + 1.0)["cpu_freq_mhz"] == 2000.0  # steady: not re-read a second later
    assert source.sample(now + STEADY_CPUINFO_REFRESH_S)["cpu_freq_mhz"] == 3000.0
    (proc / "cpuinfo").write_text("processor : 0\ncpu MHz : 2500.000\n")
    moving = source.sample(now + STEADY_CPUINFO_REFRESH_S + 1.0)  # it moved: read each second again
    assert moving["cpu_freq_mhz"] == 2500.0
