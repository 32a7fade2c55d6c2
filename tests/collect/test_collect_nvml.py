"""NVML with a fake library: normal, a field unsupported, a GPU lost mid-run, the library missing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from benchscripts import load_bench
from collectfakes import FakeGpu, FakeNvml

from collect.sources.base import SourceUnavailable
from collect.sources.nvml import (
    ENERGY_MIN_PERIOD_S,
    GPU_COLUMN_SUFFIXES,
    GPU_HELD_PERIOD_S,
    NvmlSource,
    visible_gpu_indices,
)

REPO = Path(__file__).resolve().parents[2]
UUIDS = ["GPU-aaaa-1", "GPU-bbbb-2", "GPU-bbcc-3"]


def _source(nvml: FakeNvml, environ: dict[str, str] | None = None) -> NvmlSource:
    return NvmlSource(lambda: nvml, {} if environ is None else environ)


def test_normal_readings_in_contract_units(fake_nvml: FakeNvml) -> None:
    source = _source(fake_nvml)
    assert source.columns()[: len(GPU_COLUMN_SUFFIXES)] == [f"gpu0_{s}" for s in GPU_COLUMN_SUFFIXES]
    assert len(source.columns()) == 2 * len(GPU_COLUMN_SUFFIXES)
    first = source.sample(0.0)
    assert first["gpu0_util_pct"] == 97.0
    assert first["gpu0_mem_util_pct"] == 40.0
    assert first["gpu0_mem_used_bytes"] == 1024**3
    assert first["gpu0_temp_c"] == 61.0
    assert first["gpu1_temp_c"] == 55.0
    assert first["gpu0_power_w"] == 312.5  # NVML's power usage: a 1 s average on recent GPUs
    assert first["gpu0_power_instant_w"] == 341.25  # NVML_FI_DEV_POWER_INSTANT via the field-value API
    assert first["gpu0_power_limit_w"] == 700.0
    assert first["gpu0_sm_clock_mhz"] == 1980.0
    assert first["gpu0_mem_clock_mhz"] == 2619.0
    assert first["gpu0_fan_pct"] == 30.0
    assert first["gpu0_throttle_reasons"] == 0
    assert first["gpu0_energy_j"] == 0.0  # counted from the first row
    fake_nvml.gpus[0].energy_mj += 1500
    assert source.sample(1.0)["gpu0_energy_j"] == 1.5
    assert source.notes() == []
    source.close()
    assert fake_nvml.shut_down


def test_system_description(fake_nvml: FakeNvml) -> None:
    source = _source(fake_nvml)
    assert source.driver_version == "550.54.15"
    assert source.cuda_version == "12.4"
    assert source.gpu_info[0] == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "mem_total_bytes": 80 * 1024**3,
        "power_limit_w": 700.0,
        "pci_bus_id": "00000000:19:00.0",
        "sm_clock_max_mhz": 1980.0,
    }


def test_unsupported_field_is_an_empty_column_noted_once() -> None:
    gpu = FakeGpu(unsupported={"nvmlDeviceGetFanSpeed", "nvmlDeviceGetTotalEnergyConsumption"})
    source = _source(FakeNvml([gpu]))
    for tick in range(3):
        reading = source.sample(float(tick))
        assert reading["gpu0_fan_pct"] is None
        assert reading["gpu0_energy_j"] is None
        assert reading["gpu0_temp_c"] == 61.0
    notes = source.notes()
    assert len(notes) == 2
    assert any("fan speed: not supported" in note for note in notes)
    calls_per_tick = gpu.calls
    source.sample(3.0)
    assert gpu.calls - calls_per_tick == 9  # 11 readers; the 2 unsupported ones are not retried


def test_instant_power_where_the_driver_offers_it_else_an_empty_column_noted_once() -> None:
    refused = FakeGpu(instant_field_error=3)
    old_binding = FakeGpu(unsupported={"nvmlDeviceGetFieldValues"})
    source = _source(FakeNvml([refused, old_binding]))
    for tick in range(3):
        reading = source.sample(float(tick))
        assert reading["gpu0_power_instant_w"] is None
        assert reading["gpu1_power_instant_w"] is None
        assert reading["gpu0_power_w"] == 312.5  # the average is still read
    notes = source.notes()
    assert [n for n in notes if "instant power: not supported" in n] == notes
    assert len(notes) == 2
    calls = refused.calls
    source.sample(3.0)
    assert refused.calls - calls == 10  # the refused field is not asked again


def test_transient_error_empties_only_that_tick() -> None:
    gpu = FakeGpu(failing={"nvmlDeviceGetPowerUsage": 999})
    source = _source(FakeNvml([gpu]))
    assert source.sample(0.0)["gpu0_power_w"] is None
    gpu.failing.clear()
    assert source.sample(1.0)["gpu0_power_w"] == 312.5
    assert source.notes() == ["gpu0 power: Unknown Error (those cells are empty)"]


def test_gpu_lost_mid_run_gives_empty_cells_not_a_crash(fake_nvml: FakeNvml) -> None:
    source = _source(fake_nvml)
    assert source.sample(0.0)["gpu0_util_pct"] == 97.0
    fake_nvml.gpus[0].lost = True
    for tick in range(1, 4):
        reading = source.sample(float(tick))
        assert all(reading[f"gpu0_{s}"] is None for s in GPU_COLUMN_SUFFIXES)
        assert reading["gpu1_util_pct"] == 97.0  # the other GPU carries on
    assert len(source.notes()) == 1
    assert "gpu0 was lost" in source.notes()[0]


def test_library_missing_or_driver_absent_is_a_reason() -> None:
    def no_module() -> object:
        raise ImportError("No module named 'pynvml'")

    with pytest.raises(SourceUnavailable, match="not installed"):
        NvmlSource(no_module, {})
    with pytest.raises(SourceUnavailable, match="NVML Shared Library Not Found"):
        _source(FakeNvml([], init_error=12))
    with pytest.raises(SourceUnavailable, match="found no GPU"):
        _source(FakeNvml([]))


def test_cuda_visible_devices_selects_and_renumbers(fake_nvml: FakeNvml) -> None:
    source = _source(fake_nvml, {"CUDA_VISIBLE_DEVICES": "1"})
    assert [gpu["name"] for gpu in source.gpu_info] == ["NVIDIA A100-SXM4-40GB"]
    assert source.columns()[0] == "gpu0_util_pct"
    assert source.sample(0.0)["gpu0_temp_c"] == 55.0
    by_uuid = _source(fake_nvml, {"CUDA_VISIBLE_DEVICES": "GPU-aaaaaaaa"})
    assert by_uuid.gpu_info[0]["uuid"].startswith("GPU-aaaaaaaa")
    with pytest.raises(SourceUnavailable, match="leaves no visible GPU"):
        _source(fake_nvml, {"CUDA_VISIBLE_DEVICES": ""})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, [0, 1, 2]),
        ("2,0", [2, 0]),
        ("0,7,1", [0]),  # CUDA stops at the first invalid entry
        ("-1", []),
        ("", []),
        ("GPU-bbcc", [2]),
        ("GPU-bb", []),  # ambiguous prefix
        ("gpu-aaaa-1, 1", [0, 1]),
        ("1,1", [1]),
        ("MIG-1234", []),
    ],
)
def test_visible_gpu_indices(value: str | None, expected: list[int]) -> None:
    assert visible_gpu_indices(value, UUIDS) == expected


def test_used_memory_is_nvidia_smis_without_the_drivers_reservation() -> None:
    """Seen on an H100 (driver 580): v1's `used` counted 480 MiB the driver reserves, nvidia-smi 0 MiB."""
    source = _source(FakeNvml([FakeGpu(mem_used=0, mem_reserved=480 * 1024**2)]))
    assert source.sample(0.0)["gpu0_mem_used_bytes"] == 0
    assert source.notes() == []


def test_a_driver_without_the_v2_memory_call_falls_back_to_v1_with_a_note() -> None:
    gpu = FakeGpu(mem_used=1024**3, mem_reserved=480 * 1024**2, memory_v2=False)
    source = _source(FakeNvml([gpu]))
    assert source.sample(0.0)["gpu0_mem_used_bytes"] == 1024**3 + 480 * 1024**2
    assert source.sample(1.0)["gpu0_mem_used_bytes"] == 1024**3 + 480 * 1024**2
    (note,) = [n for n in source.notes() if "memory" in n]
    assert "no v2 memory call" in note and "reserves" in note
    assert source.sample(2.0)["gpu0_util_pct"] == 97.0


def test_each_nvml_call_reads_one_gpus_cells_on_its_own(fake_nvml: FakeNvml) -> None:
    """What bench/nvml_cost.py times: one (what, read) per GPU and call, covering every column."""
    source = _source(fake_nvml)
    calls = source.calls()
    assert len(calls) == 2 * 11 and calls[0][0] == "gpu0 utilization"
    cells: dict = {}
    for what, read in calls:
        reading = read()
        assert all(f"{what.split()[0]}_{suffix}" in source.columns() for suffix in reading)
        cells.update({f"{what.split()[0]}_{suffix}": value for suffix, value in reading.items()})
    assert set(cells) == set(source.columns())


def _energy_reads(gpu: FakeGpu, source: NvmlSource, times: list[float]) -> tuple[list, int]:
    """gpu0's energy cells at these tick times, and how many NVML calls they took beyond the other ten."""
    before = gpu.calls
    cells = []
    for now in times:
        gpu.energy_mj += 100
        cells.append(source.sample(now)["gpu0_energy_j"])
    return cells, gpu.calls - before - 10 * len(times)


def test_the_energy_counter_is_read_about_once_a_second_and_repeated_between() -> None:
    """Its read costs milliseconds on a real H100, it moves every 100 ms: on the source's 50 ms reads (a 10 ms
    tick), one in about 20."""
    assert ENERGY_MIN_PERIOD_S == 1.0
    gpu = FakeGpu()
    source = _source(FakeNvml([gpu]))
    ticks = [i * GPU_HELD_PERIOD_S for i in range(41)]  # 2 s
    cells, energy_calls = _energy_reads(gpu, source, ticks)
    assert energy_calls == 3  # at 0, about 0.9 and about 1.8 s
    assert cells[0] == 0.0 and cells[1] == 0.0  # the first read is the base; the next read repeats it
    changes = [i for i in range(1, len(cells)) if cells[i] != cells[i - 1]]
    assert len(changes) == 2 and 0.88 <= ticks[changes[0]] <= 1.0
    assert cells[changes[0]] == round(100 * changes[0] / 1000, 3)  # every joule since the base, none lost
    slow = _source(FakeNvml([gpu := FakeGpu()]))
    assert _energy_reads(gpu, slow, [0.0, 1.0, 2.0, 3.0])[1] == 4  # at 1 s, every tick


def test_below_its_period_the_gpu_is_read_every_few_ticks_and_held_between() -> None:
    """NVML's values change about 10 times a second: at 10 ms, each call is made on one tick in five."""
    from collect.sources import SourceSet

    gpu = FakeGpu()
    sources = SourceSet([_source(FakeNvml([gpu]))], {"nvml": {}}, process=None)  # type: ignore[arg-type]
    sources.pace(0.01)
    assert set(sources.held_columns()) == {f"gpu0_{suffix}" for suffix in GPU_COLUMN_SUFFIXES}
    before, rows = gpu.calls, []
    for tick in range(100):
        gpu.util = tick
        row: dict = {}
        sources.sample_into(row, tick * 0.01)
        rows.append(row["gpu0_util_pct"])
    assert rows[:6] == [0.0] * 5 + [5.0] and rows[-1] == 95.0
    reads = 100 // round(GPU_HELD_PERIOD_S / 0.01)
    assert gpu.calls - before == reads * 10 + 2  # ten calls per read, the energy counter twice in the second
    sources.pace(0.033)
    assert sources.held_columns()  # every other tick
    sources.pace(0.034)
    assert sources.held_columns() == []  # from 34 ms, every tick (docs/run-format.md)


def test_the_runs_last_row_reads_the_energy_counter_anew() -> None:
    from collect.sources import SourceSet

    gpu = FakeGpu()
    source = _source(FakeNvml([gpu]))
    sources = SourceSet([source], {"nvml": {}}, process=None)  # type: ignore[arg-type]
    sources.pace(0.01)
    row: dict = {}
    sources.sample_into(row, 0.0)
    gpu.energy_mj += 2500
    sources.sample_into(row, 0.01)
    assert row["gpu0_energy_j"] == 0.0
    sources.sample_into(row, 0.02, fresh=True)
    assert row["gpu0_energy_j"] == 2.5


def test_a_failed_energy_read_is_not_repeated_as_a_value() -> None:
    gpu = FakeGpu()
    source = _source(FakeNvml([gpu]))
    assert source.sample(0.0)["gpu0_energy_j"] == 0.0
    gpu.failing["nvmlDeviceGetTotalEnergyConsumption"] = 999
    assert source.sample(ENERGY_MIN_PERIOD_S)["gpu0_energy_j"] is None
    del gpu.failing["nvmlDeviceGetTotalEnergyConsumption"]
    gpu.energy_mj += 700
    assert source.sample(ENERGY_MIN_PERIOD_S + 0.05)["gpu0_energy_j"] == 0.7  # read again, not held back


def test_nvml_cost_times_each_call_on_ticks_as_the_collector_makes_them() -> None:
    """bench/nvml_cost.py's in-tick figures: every call once per 10 ms tick, the energy counter only every
    ENERGY_MIN_PERIOD_S, and how often each value changed."""
    bench = load_bench("nvml_cost")
    made = {"moving": 0, "still": 0, "energy": 0}

    def counting(name: str, moves: bool):
        def read() -> dict:
            made[name] += 1
            return {"value": made[name] if moves else 1.0}

        return read

    def failing() -> dict:
        raise RuntimeError("not supported")

    calls = [
        ("gpu0 utilization", counting("moving", True)),
        ("gpu0 power limit", counting("still", False)),
        ("gpu0 fan speed", failing),
        ("gpu0 total energy", counting("energy", True)),
    ]
    seconds = ENERGY_MIN_PERIOD_S + 0.1
    cost, rate = bench.in_ticks(calls, seconds)
    ticks = round(seconds / 0.01)
    assert ticks <= made["moving"] == made["still"] <= ticks + 1  # one per deadline, late ones too
    assert made["energy"] == 2  # at 0 and after ENERGY_MIN_PERIOD_S
    assert rate["gpu0 utilization"] == pytest.approx((made["moving"] - 1) / seconds)
    assert rate["gpu0 power limit"] == 0.0 and rate["gpu0 total energy"] == pytest.approx(1 / seconds)
    assert math.isnan(cost["gpu0 fan speed"]) and math.isnan(rate["gpu0 fan speed"])
    assert all(math.isfinite(cost[what]) and cost[what] >= 0 for what, _ in calls[:2])
    assert 0 < bench.sample_in_ticks(_source(FakeNvml([FakeGpu()])), 0.05) < 50  # ms of CPU per sample


@pytest.mark.parametrize("wrong", [["--seconds", "0"], ["--calls", "0"]])
def test_nvml_cost_refuses_what_it_cannot_measure_in_one_line(wrong: list[str]) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "nvml_cost.py"), *wrong],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith("--calls must be >= 1 and --seconds > 0")
