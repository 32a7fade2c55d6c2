"""runformat.columns: telemetry.csv's column vocabulary, the one place its per-GPU and per-CPU names live."""

from __future__ import annotations

import re
from pathlib import Path

from runformat import columns
from runformat.gpm import GPM_COLUMN, GPM_SUFFIXES, gpm_column

REPO = Path(__file__).resolve().parents[1]
HEADER = [
    "time_unix", "elapsed_s", "cpu_util_pct", "cpu_iowait_pct", "cpu10_util_pct", "cpu2_util_pct",
    "cpu2_freq_mhz", "cpu3_freq_mhz", "load1", "gpu1_util_pct", "gpu0_power_w", "gpu0_sm_active_pct",
    "gpu12_temp_c", "gpu_note", "cpux_util_pct", "proc_cpu_pct",
]  # fmt: skip


def test_per_gpu_and_per_cpu_names() -> None:
    assert columns.gpu_column(3, "power_w") == "gpu3_power_w"
    assert columns.cpu_column(7, columns.UTIL_PCT) == "cpu7_util_pct"
    assert columns.split_gpu_column("gpu12_temp_c") == (12, "temp_c")
    assert columns.split_gpu_column("gpu_note") is None and columns.split_gpu_column(5) is None


def test_indices_are_found_by_the_vocabulary_in_index_order() -> None:
    assert columns.gpu_indices(HEADER) == [0, 1, 12]
    assert columns.gpu_indices(HEADER, "util_pct") == [1]
    assert columns.gpu_indices(HEADER, "sm_active_pct") == [0]
    assert columns.core_indices(HEADER) == [2, 10]  # cpu_util_pct is all CPUs, not a core
    assert columns.core_indices(HEADER, columns.FREQ_MHZ) == [2, 3]
    assert columns.gpu_indices([]) == [] and columns.core_indices(["cpu_util_pct"]) == []


def test_patterns_match_exactly_their_suffixes() -> None:
    power = re.compile(columns.gpu_pattern("power_w", "power_limit_w"))
    assert power.fullmatch("gpu0_power_w") and power.fullmatch("gpu11_power_limit_w")
    assert not power.fullmatch("gpu0_power_instant_w") and not power.fullmatch("gpu_power_w")
    core = re.compile(columns.cpu_pattern(columns.UTIL_PCT))
    assert core.fullmatch("cpu3_util_pct") and not core.fullmatch("cpu_util_pct")
    assert not core.fullmatch("cpu3_freq_mhz")


def test_the_gpm_columns_are_per_gpu_columns() -> None:
    assert gpm_column(2, "sm_active_pct") == columns.gpu_column(2, "sm_active_pct")
    assert [m.group(1, 2) for n in HEADER if (m := GPM_COLUMN.match(n))] == [("0", "sm_active_pct")]
    assert not set(GPM_SUFFIXES) & set(columns.GPU_SUFFIXES)


def test_the_documented_columns_are_the_vocabulary() -> None:
    doc = (REPO / "docs" / "run-format.md").read_text(encoding="utf-8")
    for suffix in columns.GPU_SUFFIXES:
        assert f"gpu<i>_{suffix}" in doc, suffix
    for name in (*columns.PROCESS_COLUMNS, columns.CPU_IOWAIT_PCT, columns.LOAD1, columns.DISK_UTIL_PCT):
        assert f"`{name}`" in doc, name


def test_no_module_spells_a_column_pattern_of_its_own() -> None:
    """The regexes the sampler, importers, sizing and the dashboard once kept beside runformat's."""
    pattern = re.compile(r"""(?:gpu|cpu)(?:\(\\d\+\)|\\d\+|\\d\*)_""")
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for package in ("collect", "sizing", "dashboard", "runformat")
        for path in sorted((REPO / package).rglob("*.py"))
        if path.name != "columns.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []
