"""Each source against a fake /proc or /sys tree (exact arithmetic) and against the real machine."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from collectfakes import write_tree

from collect.procfs import KernelFile
from collect.sources import Hardware, SourceSet, build_sources
from collect.sources.base import HELD_PERIOD_S, Reading, Source, SourceUnavailable
from collect.sources.cpu import CpuSource
from collect.sources.disk import DiskSource, physical_disks
from collect.sources.memory import MemorySource
from collect.sources.network import NetworkSource
from collect.sources.process import ProcessTreeSource, parse_stat
from collect.sources.rapl import RaplSource, describe_os_error
from collect.sources.thermal import ThermalSource

STAT_BEFORE = """cpu  100 0 100 800 0 0 0 0 0 0
cpu0 50 0 50 400 0 0 0 0 0 0
cpu1 50 0 50 400 0 0 0 0 0 0
intr 1 2 3
"""
# cpu0: +30 busy of +100; cpu1: +90 busy (incl. 10 iowait as idle) of +100
STAT_AFTER = """cpu  200 0 120 870 10 0 0 0 5 0
cpu0 70 0 60 470 0 0 0 0 5 0
cpu1 130 0 60 400 10 0 0 0 0 0
intr 1 2 3
"""


def test_kernel_file_rereads_changed_content(tmp_path: Path) -> None:
    path = tmp_path / "value"
    path.write_text("1\n")
    kernel_file = KernelFile(path, 256)
    assert kernel_file.read() == b"1\n"
    path.write_text("22\n")
    assert kernel_file.read() == b"22\n"
    path.write_text("x" * 5000)
    assert kernel_file.read() == b"x" * 5000  # longer than the size hint: read to the end
    kernel_file.close()


def test_cpu_utilization_from_proc_stat_deltas(tmp_path: Path) -> None:
    proc = write_tree(tmp_path / "proc", {"stat": STAT_BEFORE, "loadavg": "1.25 0.5 0.1 1/100 42\n"})
    proc.joinpath("cpuinfo").write_text("processor : 0\ncpu MHz : 2000.0\nprocessor : 1\ncpu MHz : 3000.0\n")
    source = CpuSource(proc, tmp_path / "sys")
    assert source.columns() == [
        "cpu_util_pct",
        "cpu_iowait_pct",
        "cpu_steal_pct",
        "cpu0_util_pct",
        "cpu1_util_pct",
        "cpu_freq_mhz",
        "load1",
    ]
    source.prime(0.0)
    (proc / "stat").write_text(STAT_AFTER)
    reading = source.sample(1.0)
    assert reading["cpu0_util_pct"] == 30.0
    assert reading["cpu1_util_pct"] == 90.0  # iowait counts as idle, like psutil
    assert reading["cpu_util_pct"] == 60.0  # 120 busy of 200
    assert reading["cpu_iowait_pct"] == 5.0  # sysstat's %iowait: 10 of 200, not busy
    assert reading["cpu_steal_pct"] == 0.0
    assert reading["cpu_freq_mhz"] == 2500.0
    assert reading["load1"] == 1.25
    assert source.sample(2.0)["cpu_util_pct"] is None  # no time passed in the counters: unknown, not 0


def test_cpu_frequency_prefers_cpufreq(tmp_path: Path) -> None:
    proc = write_tree(tmp_path / "proc", {"stat": STAT_BEFORE, "loadavg": "0 0 0 1/1 1\n", "cpuinfo": ""})
    sys_root = write_tree(
        tmp_path / "sys",
        {
            "devices/system/cpu/cpu0/cpufreq/scaling_cur_freq": "1200000\n",
            "devices/system/cpu/cpu1/cpufreq/scaling_cur_freq": "3600000\n",
        },
    )
    source = CpuSource(proc, sys_root)
    assert "cpu0_freq_mhz" in source.columns() and "cpu1_freq_mhz" in source.columns()
    source.prime(0.0)
    reading = source.sample(1.0)
    assert reading["cpu_freq_mhz"] == 2400.0
    # an idle core's low clock stays visible, apart from the busy one's
    assert (reading["cpu0_freq_mhz"], reading["cpu1_freq_mhz"]) == (1200.0, 3600.0)


def test_cpu_steal_and_iowait_have_sysstat_meaning(tmp_path: Path) -> None:
    before = "cpu  100 0 100 700 50 0 0 50 0 0\ncpu0 100 0 100 700 50 0 0 50 0 0\n"
    after = "cpu  160 0 100 720 90 0 0 80 0 0\ncpu0 160 0 100 720 90 0 0 80 0 0\n"  # +150 jiffies
    proc = write_tree(tmp_path / "proc", {"stat": before, "loadavg": "0 0 0 1/1 1\n", "cpuinfo": ""})
    source = CpuSource(proc, tmp_path / "sys")
    source.prime(0.0)
    (proc / "stat").write_text(after)
    reading = source.sample(1.0)
    assert reading["cpu_iowait_pct"] == pytest.approx(100 * 40 / 150, abs=0.01)
    assert reading["cpu_steal_pct"] == pytest.approx(100 * 30 / 150, abs=0.01)
    assert reading["cpu_util_pct"] == pytest.approx(100 * 90 / 150, abs=0.01)  # user + steal, not iowait


def test_cpu_source_on_this_machine_has_a_column_per_logical_cpu() -> None:
    source = CpuSource(Path("/proc"), Path("/sys"))
    per_cpu = [c for c in source.columns() if c[:3] == "cpu" and c[3].isdigit() and c.endswith("_util_pct")]
    assert len(per_cpu) == psutil.cpu_count(logical=True)
    source.prime(time.monotonic())
    sum(range(2_000_000))
    reading = source.sample(time.monotonic())
    assert all(reading[c] is None or 0.0 <= reading[c] <= 100.0 for c in per_cpu)
    assert reading["cpu_freq_mhz"] is None or reading["cpu_freq_mhz"] > 100


MEMINFO = """MemTotal:       1000000 kB
MemFree:         100000 kB
MemAvailable:    250000 kB
Buffers:          10000 kB
SwapTotal:       500000 kB
SwapFree:        400000 kB
"""


def test_memory_used_is_total_minus_available(tmp_path: Path) -> None:
    source = MemorySource(write_tree(tmp_path, {"meminfo": MEMINFO}))
    reading = source.sample(0.0)
    assert reading == {
        "mem_used_bytes": 750000 * 1024,
        "mem_util_pct": 75.0,
        "swap_used_bytes": 100000 * 1024,
    }


def test_memory_matches_psutil_on_this_machine() -> None:
    reading = MemorySource(Path("/proc")).sample(0.0)
    reference = psutil.virtual_memory()
    assert abs(reading["mem_used_bytes"] - reference.used) < 256 * 1024**2
    assert abs(reading["mem_util_pct"] - reference.percent) < 2.0
    assert reading["swap_used_bytes"] == pytest.approx(psutil.swap_memory().used, abs=64 * 1024**2)


DISKSTATS = (
    "   7       0 loop0 10 0 {loop_read} 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
    " 254       0 vda 100 0 {vda_read} 10 50 0 {vda_write} 20 0 {vda_ticks} 30 0 0 0 0 0 0\n"
    " 254       1 vda1 100 0 {vda_read} 10 50 0 {vda_write} 20 0 {vda_ticks} 30 0 0 0 0 0 0\n"
    " 259       0 nvme0n1 5 0 {nvme_read} 1 0 0 0 0 0 {nvme_ticks} 1 0 0 0 0 0 0\n"
)


def _diskstats(**counters: int) -> str:
    names = ("loop_read", "vda_read", "vda_write", "vda_ticks", "nvme_read", "nvme_ticks")
    return DISKSTATS.format(**{name: counters.get(name, 0) for name in names})


def _disk_tree(tmp_path: Path) -> tuple[Path, Path]:
    proc = write_tree(
        tmp_path / "proc",
        {"diskstats": _diskstats()},
    )
    sys_root = tmp_path / "sys"
    for name in ("vda", "nvme0n1"):
        (sys_root / "block" / name / "device").mkdir(parents=True)
    (sys_root / "block" / "loop0").mkdir(parents=True)  # no device: a virtual layer
    return proc, sys_root


def test_disk_counts_physical_disks_only_and_busiest_util(tmp_path: Path) -> None:
    proc, sys_root = _disk_tree(tmp_path)
    assert physical_disks(sys_root) == ["nvme0n1", "vda"]
    source = DiskSource(proc, sys_root)
    source.prime(10.0)
    (proc / "diskstats").write_text(
        _diskstats(loop_read=99, vda_read=2000, vda_write=4000, vda_ticks=500, nvme_read=2000, nvme_ticks=900)
    )
    reading = source.sample(12.0)  # 2 s later
    assert reading["disk_read_bps"] == (2000 + 2000) * 512 / 2  # loop0 and the partition vda1 not counted
    assert reading["disk_write_bps"] == 4000 * 512 / 2
    assert reading["disk_util_pct"] == 45.0  # nvme busy 900 ms of 2000
    assert reading["disk_busiest_bps"] == 2000 * 512 / 2  # the nvme's bytes, not vda's


def test_disk_follows_devices_that_come_and_go(tmp_path: Path) -> None:
    """Each read looks the disks up where the last layout had them; a device added or removed (a loop
    device mounted) moves them, and the source finds them again in the same read."""
    proc, sys_root = _disk_tree(tmp_path)
    source = DiskSource(proc, sys_root)
    source.prime(10.0)
    added = "   7       1 loop1 1 0 7 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
    (proc / "diskstats").write_text(added + _diskstats(vda_read=2000, vda_ticks=500, nvme_read=1000))
    reading = source.sample(12.0)
    assert reading["disk_read_bps"] == (2000 + 1000) * 512 / 2 and reading["disk_util_pct"] == 25.0
    (proc / "diskstats").write_text(
        _diskstats(vda_read=4000, vda_ticks=900, nvme_read=1000).split("\n", 1)[1]
    )
    reading = source.sample(14.0)  # loop0 gone too
    assert reading["disk_read_bps"] == 2000 * 512 / 2 and reading["disk_util_pct"] == 20.0


def test_memory_follows_a_changed_meminfo_layout(tmp_path: Path) -> None:
    proc = write_tree(tmp_path / "proc", {"meminfo": MEMINFO})
    source = MemorySource(proc)
    assert source.sample(0.0)["mem_used_bytes"] == 750000 * 1024
    (proc / "meminfo").write_text("Extra:           1 kB\n" + MEMINFO.replace("250000", "500000"))
    assert source.sample(1.0)["mem_used_bytes"] == 500000 * 1024
    assert source.sample(2.0)["swap_used_bytes"] == 100000 * 1024


def test_disk_without_physical_disks_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="no physical disk"):
        DiskSource(tmp_path, tmp_path)


NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls
    lo: {lo} 1 0 0 0 0 0 0 {lo} 1 0 0 0 0 0 0
  eth0: {rx} 10 0 0 0 0 0 0 {tx} 10 0 0 0 0 0 0
"""


def test_network_excludes_loopback(tmp_path: Path) -> None:
    proc = write_tree(tmp_path, {"net/dev": NET_DEV.format(lo=0, rx=1000, tx=500)})
    source = NetworkSource(proc)
    source.prime(0.0)
    (proc / "net/dev").write_text(NET_DEV.format(lo=10**9, rx=5000, tx=2500))
    assert source.sample(0.5) == {"net_rx_bps": 8000.0, "net_tx_bps": 4000.0}


def test_thermal_prefers_the_package_sensor(tmp_path: Path) -> None:
    sys_root = write_tree(
        tmp_path,
        {
            "class/hwmon/hwmon0/name": "acpitz\n",
            "class/hwmon/hwmon0/temp1_input": "90000\n",
            "class/hwmon/hwmon1/name": "coretemp\n",
            "class/hwmon/hwmon1/temp1_label": "Package id 0\n",
            "class/hwmon/hwmon1/temp1_input": "54000\n",
            "class/hwmon/hwmon1/temp2_label": "Core 0\n",
            "class/hwmon/hwmon1/temp2_input": "61000\n",
        },
    )
    source = ThermalSource(sys_root)
    assert source.chosen == "coretemp package sensor(s)"
    assert source.sample(0.0) == {"cpu_temp_c": 54.0}
    (sys_root / "class/hwmon/hwmon1/temp1_input").write_text("57500\n")
    assert source.sample(1.0) == {"cpu_temp_c": 57.5}


def test_thermal_falls_back_to_the_hottest_core_and_amd_tdie(tmp_path: Path) -> None:
    cores = write_tree(
        tmp_path / "intel",
        {
            "class/hwmon/hwmon3/name": "coretemp\n",
            "class/hwmon/hwmon3/temp2_label": "Core 0\n",
            "class/hwmon/hwmon3/temp2_input": "61000\n",
            "class/hwmon/hwmon3/temp3_label": "Core 1\n",
            "class/hwmon/hwmon3/temp3_input": "66000\n",
        },
    )
    assert ThermalSource(cores).sample(0.0) == {"cpu_temp_c": 66.0}
    amd = write_tree(
        tmp_path / "amd",
        {
            "class/hwmon/hwmon0/name": "k10temp\n",
            "class/hwmon/hwmon0/temp1_label": "Tctl\n",
            "class/hwmon/hwmon0/temp1_input": "75000\n",
            "class/hwmon/hwmon0/temp2_label": "Tdie\n",
            "class/hwmon/hwmon0/temp2_input": "65000\n",
        },
    )
    source = ThermalSource(amd)
    assert source.chosen == "k10temp Tdie"
    assert source.sample(0.0) == {"cpu_temp_c": 65.0}


def test_thermal_without_sensors_is_unavailable_with_a_reason(tmp_path: Path) -> None:
    write_tree(tmp_path, {"class/hwmon/hwmon0/name": "acpitz\n", "class/hwmon/hwmon0/temp1_input": "40000\n"})
    with pytest.raises(SourceUnavailable, match="no readable CPU temperature sensor"):
        ThermalSource(tmp_path)


def test_rapl_counts_energy_from_the_first_row_across_a_wrap(tmp_path: Path) -> None:
    sys_root = write_tree(
        tmp_path,
        {
            "class/powercap/intel-rapl:0/name": "package-0\n",
            "class/powercap/intel-rapl:0/energy_uj": "999000000\n",
            "class/powercap/intel-rapl:0/max_energy_range_uj": "999999999\n",
            "class/powercap/intel-rapl:0:0/name": "core\n",
            "class/powercap/intel-rapl:0:0/energy_uj": "5\n",
        },
    )
    counter = sys_root / "class/powercap/intel-rapl:0/energy_uj"
    source = RaplSource(sys_root)
    source.prime(0.0)
    counter.write_text("999500000\n")
    assert source.sample(1.0) == {"cpu_energy_j": 0.0}
    counter.write_text("499999\n")  # wrapped: +499999 to the top, +1 to zero, +499999
    assert source.sample(2.0) == {"cpu_energy_j": 1.0}


def test_rapl_unavailable_reasons(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="no RAPL package domain"):
        RaplSource(tmp_path)
    reason = describe_os_error(Path("/sys/x/energy_uj"), PermissionError(13, "Permission denied"))
    assert reason == "/sys/x/energy_uj: permission denied (needs root)"


def test_parse_stat_handles_spaces_and_parens_in_the_name() -> None:
    line = b"42 (my (odd) name) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 5 0 100 1000 250 0 0\n"
    fields = parse_stat(line)
    assert (fields.ppid, fields.cpu_ticks, fields.threads, fields.rss_pages) == (1, 13, 5, 250)


TREE_SCRIPT = r"""
import os, subprocess, sys, threading, time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
BURN = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass"
child = subprocess.Popen([sys.executable, "-c", BURN])
child.wait()
burn(0.3)
threads = [threading.Thread(target=time.sleep, args=(3,)) for _ in range(4)]
for t in threads: t.start()
t = os.times()
print(t.user + t.system + t.children_user + t.children_system, flush=True)
time.sleep(1.5)
"""


def test_a_dip_in_the_trees_cpu_total_is_not_counted_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A parent reaping a child between two reads of one refresh drops the total for one tick (the child
    gone, the parent's cutime not grown yet); the next tick's rise must not count the child again."""
    source = ProcessTreeSource(Path("/proc"))
    source.attach(os.getpid())
    per_s = source._ticks_per_s
    totals = iter([1000, 1000 + per_s, 1000 + per_s // 2, 1000 + 2 * per_s, 1000 + 3 * per_s])
    monkeypatch.setattr(source, "_refresh", lambda: (1, next(totals), 100, 1))
    source.prime(0.0)
    cpu_pct = [source.sample(float(second))["proc_cpu_pct"] for second in range(1, 5)]
    assert cpu_pct == [100.0, 0.0, 100.0, 100.0]  # 3 s of CPU in all, as the totals say
    source.close()


def test_process_tree_accounts_for_a_reaped_child_and_threads() -> None:
    """The tree's CPU, integrated over the samples, is the CPU the kernel charged it to its end: what this
    process gets back on reaping it (its exit can cost CPU after anything it could print: a VM charges a
    stall to the process that was running)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen([sys.executable, "-c", TREE_SCRIPT], stdout=subprocess.PIPE, text=True)
    source = ProcessTreeSource(Path("/proc"))
    source.attach(process.pid)
    start = last = time.monotonic()
    source.prime(start)
    cpu_seconds = 0.0
    max_threads = max_rss = 0
    try:
        ended = False
        while not ended:
            time.sleep(0.05)
            ended = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            now = time.monotonic()  # once ended, a zombie: its stat holds its final times until it is reaped
            reading = source.sample(now)
            source.maintain(now)
            cpu_seconds += (reading["proc_cpu_pct"] or 0.0) / 100.0 * (now - last)
            max_threads = max(max_threads, reading["proc_threads"] or 0)
            max_rss = max(max_rss, reading["proc_rss_bytes"] or 0)
            last = now
    finally:
        process.kill()
        process.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    charged = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert cpu_seconds == pytest.approx(charged, abs=0.05)
    assert float(process.stdout.read().split()[0]) > 0.85  # the child's 0.6 s and the parent's 0.3 s
    assert max_threads >= 5
    assert max_rss > 5_000_000
    sample_after_exit = source.sample(time.monotonic())
    assert sample_after_exit["proc_rss_bytes"] is None


def test_factory_records_why_sources_are_missing(tmp_path: Path) -> None:
    hardware = Hardware(proc_root=Path("/proc"), sys_root=tmp_path, load_nvml=_no_pynvml)
    sources = build_sources(hardware, follow_command=False)
    names = [s.name for s in sources.sources]
    assert names[:3] == ["cpu", "thermal", "memory"]
    assert sources.status["disk"]["available"] is False  # empty fake /sys: no block devices
    assert sources.status["thermal"]["available"] is False
    assert "cpu_temp_c" in sources.columns()  # the contract keeps it, empty, without a sensor
    row: dict[str, object] = {}
    sources.sample_into(row, time.monotonic())
    assert row["cpu_temp_c"] is None
    assert sources.status["nvml"]["reason"] == "nvidia-ml-py (pynvml) is not installed: no pynvml"
    assert sources.status["process"]["reason"] == "sampling only: no command to follow"
    assert "proc_cpu_pct" in sources.columns()  # present, empty, in a sampling-only run
    assert not any(c.startswith("disk_") for c in sources.columns())
    sources.close()


class _CountingSource(Source):
    def __init__(self, name: str, min_period_s: float) -> None:
        super().__init__()
        self.name, self.min_period_s, self.reads = name, min_period_s, 0

    def columns(self) -> list[str]:
        return [f"{self.name}_reads"]

    def sample(self, now: float) -> Reading:
        self.reads += 1
        return {f"{self.name}_reads": self.reads}


@pytest.mark.parametrize("interval_s", [0.01, 0.02, 0.03])
def test_a_held_source_is_read_once_per_period_and_repeated_in_between(interval_s: float) -> None:
    fast, held = _CountingSource("fast", 0.0), _CountingSource("held", HELD_PERIOD_S)
    sources = SourceSet([fast, held], {}, process=None)  # type: ignore[arg-type]
    sources.pace(interval_s)
    assert sources.held_columns() == ["held_reads"]
    rows, versions = [], []
    for k in range(round(2.0 / interval_s)):
        lateness = 0.4 * interval_s * ((k * 7919) % 11) / 10  # up to 40 % of a tick, never in order
        row: Reading = {}
        sources.sample_into(row, 100.0 + k * interval_s + lateness)
        rows.append(row)
        versions.append(sources.held_reads)
    assert [row["fast_reads"] for row in rows] == list(range(1, len(rows) + 1))
    per_period = round(HELD_PERIOD_S / interval_s)  # 10, 5 and 3 ticks (90 ms, the nearest whole tick)
    assert [row["held_reads"] for row in rows] == [1 + k // per_period for k in range(len(rows))]
    assert versions == [row["held_reads"] for row in rows]  # the held version moves with each held read


def test_a_column_a_held_source_stops_reporting_is_empty_not_its_last_value() -> None:
    readings = iter([{"held_a": 1.0, "held_b": 2.0}, {"held_a": 3.0}])

    class Dropping(_CountingSource):
        def sample(self, now: float) -> Reading:
            return next(readings)

    sources = SourceSet([Dropping("held", HELD_PERIOD_S)], {}, process=None)  # type: ignore[arg-type]
    sources.pace(0.01)
    first: Reading = {}
    sources.sample_into(first, 10.0)
    later: Reading = {}
    sources.sample_into(later, 10.2)
    assert first == {"held_a": 1.0, "held_b": 2.0} and later.get("held_b") is None and later["held_a"] == 3.0


def test_at_a_tenth_of_a_second_or_slower_every_source_is_read_every_tick() -> None:
    held = _CountingSource("held", HELD_PERIOD_S)
    sources = SourceSet([held], {}, process=None)  # type: ignore[arg-type]
    for interval_s in (0.1, 1.0):
        sources.pace(interval_s)
        before = held.reads
        for k in range(5):
            sources.sample_into({}, 200.0 + k * interval_s + 0.3 * interval_s * (k % 2))
        assert held.reads - before == 5
        assert sources.held_columns() == []


def _no_pynvml() -> object:
    raise ImportError("no pynvml")


def test_importing_collect_loads_no_hardware_library() -> None:
    code = "import collect, collect.session, collect.cli, sys; print('pynvml' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_real_nvml_without_a_gpu_is_a_reason_not_a_crash() -> None:
    sources = build_sources(Hardware(), follow_command=False)
    if sources.status["nvml"]["available"]:
        pytest.skip("this machine has a working NVML")
    assert sources.status["nvml"]["reason"]
    sources.close()
    assert os.path.exists("/proc/stat")


def test_cpu_and_disk_agree_with_psutil_over_the_same_window(tmp_path: Path) -> None:
    cpu = CpuSource(Path("/proc"), Path("/sys"))
    disk = DiskSource(Path("/proc"), Path("/sys"))
    disks = physical_disks(Path("/sys"))
    psutil.cpu_percent()
    before = psutil.disk_io_counters(perdisk=True)
    start = time.monotonic()
    cpu.prime(start)
    disk.prime(start)
    with open(tmp_path / "blob", "wb") as handle:  # some real writes for the disk counters
        handle.write(os.urandom(8 << 20))
        handle.flush()
        os.fsync(handle.fileno())
    sum(range(3_000_000))
    now = time.monotonic()
    cpu_reading, disk_reading = cpu.sample(now), disk.sample(now)
    reference_cpu = psutil.cpu_percent()
    after = psutil.disk_io_counters(perdisk=True)
    written = sum(after[d].write_bytes - before[d].write_bytes for d in disks if d in after and d in before)
    assert cpu_reading["cpu_util_pct"] == pytest.approx(reference_cpu, abs=15)
    assert disk_reading["disk_write_bps"] * (now - start) == pytest.approx(written, rel=0.25, abs=1 << 20)


def _stat_line(pid: int, ppid: int, state: str, utime: int, cutime: int = 0) -> str:
    fields = f"{ppid} {pid} {pid} 0 -1 0 0 0 0 0 {utime} 0 {cutime} 0 20 0 1 0 100 1000 250 0"
    return f"{pid} (python3) {state} {fields}\n"


@pytest.mark.parametrize("state", ["Z", "X"])
def test_a_reaped_child_still_readable_is_not_counted_twice(tmp_path: Path, state: str) -> None:
    """The kernel marks a child being reaped dead (X), adds its time to its parent's cutime, then releases
    it: in that window both read as the child's time. A zombie (Z) read after its parent's cutime grew
    is the same case."""
    (tmp_path / "loadavg").write_text("0.00 0.00 0.00 1/100 101\n")
    stat = {pid: tmp_path / str(pid) / "stat" for pid in (100, 101)}
    for path in stat.values():
        path.parent.mkdir()
    stat[100].write_text(_stat_line(100, 1, "S", utime=10))
    stat[101].write_text(_stat_line(101, 100, "R", utime=0))
    source = ProcessTreeSource(tmp_path)
    source.attach(100)
    source.prime(0.0)
    steps = [
        (_stat_line(100, 1, "S", 10), _stat_line(101, 100, "R", 60)),  # the child burns 0.6 s
        (_stat_line(100, 1, "S", 10, cutime=60), _stat_line(101, 100, state, 60)),  # reaped, not yet released
        (_stat_line(100, 1, "S", 10, cutime=60), ""),  # released: its stat reads as nothing
        (_stat_line(100, 1, "S", 20, cutime=60), ""),  # the parent burns 0.1 s more
    ]
    seconds = 0.0
    for second, (parent, child) in enumerate(steps, start=1):
        stat[100].write_text(parent)
        stat[101].write_text(child)
        seconds += source.sample(float(second))["proc_cpu_pct"] / 100.0
    assert seconds == pytest.approx(0.7)  # the child's 0.6 s once, and the parent's 0.1 s
    source.close()


IO_TREE_SCRIPT = """
import os, subprocess, sys, time
def write(path, mib):
    with open(path, "wb") as f:
        f.write(os.urandom(mib << 20)); f.flush(); os.fsync(f.fileno())
time.sleep(0.5)
child = "import os; f = open(%r, 'wb'); f.write(os.urandom(8 << 20)); f.flush(); os.fsync(f.fileno())"
subprocess.run([sys.executable, "-c", child % (sys.argv[1] + ".child")], check=True)  # reaped by this one
write(sys.argv[1], 4)
time.sleep(0.5)
"""


def test_the_trees_storage_io_counts_a_reaped_childs_bytes_once(tmp_path: Path) -> None:
    """proc_write_bps integrated over the samples is what the tree wrote to the disk (its fsynced 4 MiB and
    a reaped child's 8 MiB), whatever the host's other processes write; the host's disk columns are not."""
    process = subprocess.Popen([sys.executable, "-c", IO_TREE_SCRIPT, str(tmp_path / "out")])
    source = ProcessTreeSource(Path("/proc"))
    source.attach(process.pid)
    last = time.monotonic()
    source.prime(last)
    written = 0.0
    try:
        while process.poll() is None:
            time.sleep(0.05)
            now = time.monotonic()
            reading = source.sample(now)
            source.maintain(now)
            written += (reading["proc_write_bps"] or 0) * (now - last)
            last = now
    finally:
        process.kill()
        process.wait()
    assert written == pytest.approx(12 << 20, abs=1 << 20)
    source.close()


def test_a_tree_whose_io_file_cannot_be_read_has_no_io_columns_and_says_why(tmp_path: Path) -> None:
    """A kernel without I/O accounting (or a process another user owns) has no /proc/<pid>/io to read:
    unknown, not zero."""
    (tmp_path / "loadavg").write_text("0.00 0.00 0.00 1/100 100\n")
    (tmp_path / "100").mkdir()
    (tmp_path / "100" / "stat").write_text(_stat_line(100, 1, "S", utime=10))
    source = ProcessTreeSource(tmp_path)
    source.attach(100)
    source.prime(0.0)
    reading = source.sample(1.0)
    assert reading["proc_write_bps"] is None and reading["proc_read_bps"] is None
    assert reading["proc_cpu_pct"] == 0.0
    assert any("/proc/<pid>/io unreadable" in note for note in source.notes())
    source.close()
