"""The shipped H100 run: what the collector recorded through NVML against nvidia-smi logged beside it
(docs/gpu-evidence.md). A real log from a real GPU, so it also tests the nvidia-smi importer."""

from __future__ import annotations

import functools
import importlib.util
import statistics
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "data" / "examples" / "20261124T110829Z-gpu-vm"
MIB = 1024**2

pytestmark = pytest.mark.skipif(not (RUN / "nvidia-smi.csv").is_file(), reason="the H100 run is not shipped")


@functools.cache
def _agreement():
    spec = importlib.util.spec_from_file_location(
        "nvidia_smi_agreement", REPO / "bench" / "nvidia_smi_agreement.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def _records() -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """(the collector's rows, nvidia-smi's) of the shipped run, read once for both tests."""
    bench = _agreement()
    return bench.collector_rows(RUN, 0), bench.smi_rows(RUN / "nvidia-smi.csv", "+00:00", 0)


def test_every_nvml_column_agrees_with_nvidia_smi_second_by_second() -> None:
    bench = _agreement()
    ours, theirs = _records()
    assert len(theirs) == 3363 and len(ours) == 3339  # the importer read every line of the real log
    _, shares = bench.compare(ours, theirs)
    for column in ("util_pct", "temp_c", "power_w", "throttle_reasons"):
        assert shares[column] == 1.0, column
    assert shares["sm_clock_mhz"] >= 0.99  # one second straddles the clock's step at the end of training
    # Recorded before the fix: NVML v1 `used` counted the driver's 480 MiB reservation, nvidia-smi does not
    # (the collector now reads v2). Every second is off by exactly that, nothing else.
    memory = [
        (bench.per_second(ours, "mem_used_bytes")[s] - bench.per_second(theirs, "mem_used_bytes")[s]) / MIB
        for s in set(bench.per_second(ours, "mem_used_bytes"))
        & set(bench.per_second(theirs, "mem_used_bytes"))
    ]
    assert statistics.median(memory) == pytest.approx(480, abs=1) and max(memory) <= 480.5


def test_the_energy_counter_agrees_with_integrated_power() -> None:
    bench = _agreement()
    ours, theirs = _records()
    joules, first, last = bench.energy_counter(ours, ours[0]["time_unix"], ours[-1]["time_unix"])
    assert last - first > 300 and joules > 40_000
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
