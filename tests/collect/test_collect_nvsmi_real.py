"""The shipped H100 runs: what the collector recorded through NVML against nvidia-smi logged beside it
(docs/gpu-evidence.md). Real logs from a real GPU, so they also test the nvidia-smi importer.

RUN was recorded before two collector changes, NOW after them: used memory from NVML v2, and the energy
counter read about every 0.5 s instead of every tick (ENERGY_MIN_PERIOD_S, since raised to 1 s)."""

from __future__ import annotations

import functools
import itertools
import statistics
from pathlib import Path

import pytest
from benchscripts import load_bench

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "data" / "examples" / "20261124T110829Z-gpu-vm"
NOW = REPO / "data" / "examples" / "20261126T151203Z-gpu-vm"
MIB = 1024**2

pytestmark = pytest.mark.skipif(not (RUN / "nvidia-smi.csv").is_file(), reason="the H100 run is not shipped")


@functools.cache
def _records(run: Path = RUN) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """(the collector's rows, nvidia-smi's) of a shipped run, read once for every test."""
    bench = load_bench("nvidia_smi_agreement")
    return bench.collector_rows(run, 0), bench.smi_rows(run / "nvidia-smi.csv", "+00:00", 0)


def _memory_differences_mib(run: Path) -> list[float]:
    bench = load_bench("nvidia_smi_agreement")
    ours, theirs = (bench.per_second(rows, "mem_used_bytes") for rows in _records(run))
    return [(ours[second] - theirs[second]) / MIB for second in set(ours) & set(theirs)]


def test_every_nvml_column_agrees_with_nvidia_smi_second_by_second() -> None:
    bench = load_bench("nvidia_smi_agreement")
    ours, theirs = _records(RUN)
    assert len(theirs) == 3363 and len(ours) == 3339  # the importer read every line of the real log
    _, shares = bench.compare(ours, theirs)
    for column in ("util_pct", "temp_c", "power_w", "throttle_reasons"):
        assert shares[column] == 1.0, column
    assert shares["sm_clock_mhz"] >= 0.99  # one second straddles the clock's step at the end of training
    # Recorded before the fix: NVML v1 `used` counted the driver's 480 MiB reservation, nvidia-smi does not
    # (the collector now reads v2). Every second is off by exactly that, nothing else.
    memory = _memory_differences_mib(RUN)
    assert statistics.median(memory) == pytest.approx(480, abs=1) and max(memory) <= 480.5


def test_used_memory_now_agrees_and_the_held_energy_counter_loses_no_joule() -> None:
    """NOW: the collector's v2 used memory is nvidia-smi's; its energy counter, read about every 0.5 s at a
    100 ms interval (a fifth of the rows), still matches the power integrated row by row."""
    bench = load_bench("nvidia_smi_agreement")
    ours, theirs = _records(NOW)
    assert len(theirs) == 1074 and len(ours) == 1004  # every line of the log but its header
    _, shares = bench.compare(ours, theirs)
    for column in ("temp_c", "power_w", "sm_clock_mhz", "throttle_reasons"):
        assert shares[column] == 1.0, column
    assert shares["util_pct"] >= 0.98 and shares["mem_used_bytes"] >= 0.98  # a second straddling a step
    memory = _memory_differences_mib(NOW)
    assert abs(statistics.median(memory)) < 1
    reads = sum(1 for before, row in itertools.pairwise(ours) if row["energy_j"] != before["energy_j"])
    assert 0.15 < reads / len(ours) < 0.25
    _assert_the_counter_is_the_integrated_power(NOW, min_s=95, min_j=10_000)


def test_the_energy_counter_agrees_with_integrated_power() -> None:
    _assert_the_counter_is_the_integrated_power(RUN, min_s=300, min_j=40_000)


def _assert_the_counter_is_the_integrated_power(run: Path, min_s: float, min_j: float) -> None:
    """Over the span the counter covers: within 1 % of our instant power and of nvidia-smi's, integrated."""
    bench = load_bench("nvidia_smi_agreement")
    ours, theirs = _records(run)
    joules, first, last = bench.energy_counter(ours, ours[0]["time_unix"], ours[-1]["time_unix"])
    assert last - first > min_s and joules > min_j
    for integrated in (
        bench.integrate(ours, "power_instant_w", first, last),
        bench.integrate(theirs, "power_w", first, last),
    ):
        assert integrated == pytest.approx(joules, rel=0.01)


def test_a_file_that_is_not_an_nvidia_smi_log_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "bad.csv"
    bad.write_text("not a log\n")
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "nvidia_smi_agreement.py"), str(RUN), "--smi", str(bad)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "not an nvidia-smi log" in done.stderr
