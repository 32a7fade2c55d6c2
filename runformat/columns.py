"""telemetry.csv's column vocabulary (docs/run-format.md, "telemetry.csv"): the names, and the per-GPU and
per-logical-CPU columns `gpu<i>_<suffix>` and `cpu<N>_<suffix>` with their patterns.

The sampler writes these names, the importers map other tools' fields onto them, and sizing and the
dashboard find GPUs and cores by them: nobody spells a pattern of their own. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

TIME_UNIX = "time_unix"
ELAPSED_S = "elapsed_s"
TIME_COLUMNS = (TIME_UNIX, ELAPSED_S)

CPU_UTIL_PCT = "cpu_util_pct"
CPU_IOWAIT_PCT = "cpu_iowait_pct"
CPU_STEAL_PCT = "cpu_steal_pct"
CPU_FREQ_MHZ = "cpu_freq_mhz"
CPU_TEMP_C = "cpu_temp_c"
LOAD1 = "load1"
DISK_UTIL_PCT = "disk_util_pct"
DISK_BUSIEST_BPS = "disk_busiest_bps"  # read + written by the disk disk_util_pct is of
MEM_UTIL_PCT = "mem_util_pct"

PROC_CPU_PCT = "proc_cpu_pct"
PROC_BUSIEST_THREAD_PCT = "proc_busiest_thread_pct"
PROC_READ_BPS, PROC_WRITE_BPS = "proc_read_bps", "proc_write_bps"  # the tree's storage I/O
PROCESS_COLUMNS = (
    PROC_CPU_PCT,
    "proc_rss_bytes",
    "proc_threads",
    PROC_BUSIEST_THREAD_PCT,
    PROC_READ_BPS,
    PROC_WRITE_BPS,
)

# Per logical CPU: cpu<N>_<suffix>.
UTIL_PCT = "util_pct"
FREQ_MHZ = "freq_mhz"

# Per GPU: gpu<i>_<suffix>, the collector's NVML columns in the order of docs/run-format.md (the GPM
# counters are runformat.gpm's; the nvidia-smi importer adds a few of its own).
GPU_SUFFIXES = (
    UTIL_PCT,
    "mem_util_pct",
    "mem_used_bytes",
    "temp_c",
    "power_w",
    "power_instant_w",
    "power_limit_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "fan_pct",
    "throttle_reasons",
    "energy_j",
)

GPU_COLUMN = re.compile(r"^gpu(\d+)_(.+)$")
CPU_COLUMN = re.compile(r"^cpu(\d+)_(.+)$")


def gpu_column(index: int, suffix: str) -> str:
    """`gpu<index>_<suffix>`: GPU `index` of run.json's `system.gpus`."""
    return f"gpu{index}_{suffix}"


def cpu_column(index: int | str, suffix: str) -> str:
    """`cpu<index>_<suffix>`: logical CPU `index`."""
    return f"cpu{index}_{suffix}"


def gpu_pattern(*suffixes: str) -> str:
    """A regular expression (for fullmatch) of every GPU's columns with one of `suffixes`."""
    return r"gpu\d+_(?:" + "|".join(map(re.escape, suffixes)) + ")"


def cpu_pattern(*suffixes: str) -> str:
    """A regular expression (for fullmatch) of every logical CPU's columns with one of `suffixes`."""
    return r"cpu\d+_(?:" + "|".join(map(re.escape, suffixes)) + ")"


def gpu_suffix_column(suffixes: Iterable[str]) -> re.Pattern[str]:
    """`gpu<i>_<suffix>` for one of `suffixes`, group 1 the index and group 2 the suffix."""
    return re.compile(r"^gpu(\d+)_(" + "|".join(map(re.escape, suffixes)) + r")$")


def split_gpu_column(name: object) -> tuple[int, str] | None:
    """(index, suffix) of a per-GPU column, else None."""
    match = GPU_COLUMN.match(str(name))
    return (int(match.group(1)), match.group(2)) if match else None


def gpu_indices(columns: Iterable[object], suffix: str | None = None) -> list[int]:
    """The GPUs with a column (with `suffix`, when given), in index order."""
    found = (split_gpu_column(name) for name in columns)
    return sorted({index for index, its in filter(None, found) if suffix is None or its == suffix})


def core_indices(columns: Iterable[object], suffix: str = UTIL_PCT) -> list[int]:
    """The logical CPUs with a `cpu<N>_<suffix>` column, in index order."""
    matches = (CPU_COLUMN.match(str(name)) for name in columns)
    return sorted({int(m.group(1)) for m in matches if m and m.group(2) == suffix})
