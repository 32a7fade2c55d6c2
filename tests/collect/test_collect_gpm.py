"""GPM (the GPU's profiling counters) with the fake NVML: supported, unsupported per GPU and why, per-metric
errors, failed and lost reads, held between reads, and a session that records them."""

from __future__ import annotations

import csv
import math
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from benchscripts import load_bench
from collectfakes import FakeGpmMetricsGet, FakeGpmSample, FakeGpu, FakeNvml, two_fake_gpus

from collect.session import SessionOptions, run_session
from collect.sources import SOURCE_ORDER, Hardware, SourceSet, build_sources
from collect.sources.gpm import (
    GPM_MIN_WINDOW_S,
    GPM_PERIOD_S,
    HELD,
    MIG_MODE,
    NOT_SUPPORTED,
    OLD_BINDING,
    OLD_DRIVER,
    PCT_SLACK,
    REFUSED,
    GpmSource,
    GpmUnavailable,
)
from runformat import read_json
from runformat.gpm import BY_SUFFIX, GPM_METRICS, GPM_SUFFIXES, MIB

GPU0 = [f"gpu0_{suffix}" for suffix in GPM_SUFFIXES]
GPU1 = [f"gpu1_{suffix}" for suffix in GPM_SUFFIXES]


class TrackingNvml(FakeNvml):
    """The fake, also keeping every sample it allocated and the snapshots each metrics call spanned."""

    def __init__(self, gpus: list[FakeGpu]) -> None:
        super().__init__(gpus)
        self.allocated: list[FakeGpmSample] = []
        self.spans: list[tuple[str, int, int]] = []  # (uuid, first snapshot, second snapshot)
        self.requests: list[tuple[int, int]] = []  # (version, numMetrics)

    def nvmlGpmSampleAlloc(self) -> FakeGpmSample:
        sample = super().nvmlGpmSampleAlloc()
        self.allocated.append(sample)
        return sample

    def nvmlGpmMetricsGet(self, request: FakeGpmMetricsGet) -> FakeGpmMetricsGet:
        assert request.sample1 is not None and request.sample2 is not None and request.sample1.gpu is not None
        self.requests.append((request.version, request.numMetrics))
        done = super().nvmlGpmMetricsGet(request)
        self.spans.append((request.sample1.gpu.uuid, request.sample1.snapshot, request.sample2.snapshot))
        return done


class OldBinding(FakeNvml):
    """An nvidia-ml-py from before GPM: no nvmlGpm* functions."""

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvmlGpm"):
            raise AttributeError(name)
        return super().__getattribute__(name)


def _two() -> TrackingNvml:
    return TrackingNvml(two_fake_gpus().gpus)


def _source(nvml: FakeNvml, environ: dict[str, str] | None = None) -> GpmSource:
    return GpmSource(lambda: nvml, {} if environ is None else environ)


def _build(nvml: FakeNvml, tmp_path: Path, environ: dict[str, str] | None = None) -> SourceSet:
    hardware = Hardware(sys_root=tmp_path, load_nvml=lambda: nvml, environ={} if environ is None else environ)
    return build_sources(hardware, follow_command=False)


def test_supported_on_two_gpus_columns_values_and_units() -> None:
    nvml = _two()
    nvml.gpus[1].gpm_values = {**nvml.gpus[1].gpm_values, 2: 18.25, 20: 1.5}
    source = _source(nvml)
    assert source.columns() == GPU0 + GPU1  # every metric of runformat.gpm, per GPU, in the table's order
    assert [g.gpm_snapshots for g in nvml.gpus] == [1, 1]  # the probe took each GPU's base snapshot
    reading = source.sample(0.5)
    assert set(reading) == set(source.columns())
    assert reading["gpu0_sm_active_pct"] == 62.0
    assert reading["gpu0_tensor_active_pct"] == 31.0
    assert reading["gpu0_dram_active_pct"] == 44.0
    assert reading["gpu0_pcie_tx_bytes_per_s"] == 850 * MIB  # NVML's MiB/s in bytes/s
    assert reading["gpu0_pcie_rx_bytes_per_s"] == 1200 * MIB and isinstance(
        reading["gpu0_pcie_rx_bytes_per_s"], int
    )
    assert reading["gpu1_sm_active_pct"] == 18.25 and reading["gpu1_pcie_tx_bytes_per_s"] == round(1.5 * MIB)
    assert nvml.requests == [(1, len(GPM_METRICS))] * 2  # one call per GPU asks for the whole table
    nvml.gpus[0].gpm_values[2] = 70.0
    assert source.sample(1.5)["gpu0_sm_active_pct"] == 70.0
    assert [g.gpm_snapshots for g in nvml.gpus] == [3, 3]  # one snapshot per GPU per read
    # Each value spans the previous snapshot and the new one, the two buffers taking turns.
    assert [span[1:] for span in nvml.spans if span[0] == nvml.gpus[0].uuid] == [(1, 2), (2, 3)]
    assert source.notes() == []
    assert source.status() == {
        "period_s": 1.0,
        "gpus": [{"index": 0, "supported": True}, {"index": 1, "supported": True}],
    }


def test_run_json_says_per_gpu_why_one_of_two_has_no_columns(tmp_path: Path) -> None:
    nvml = _two()
    nvml.gpus[1].gpm_supported = False
    sources = _build(nvml, tmp_path)
    names = [s.name for s in sources.sources]
    assert names.index("gpm") == names.index("nvml") + 1 and SOURCE_ORDER[-2:] == ("nvml", "gpm")
    gpm_columns = [c for c in sources.columns() if c.removeprefix("gpu0_").removeprefix("gpu1_") in BY_SUFFIX]
    assert gpm_columns == GPU0  # gpu1's are absent, not zeros
    assert sources.columns()[-len(GPU0) :] == GPU0  # after the nvml source's columns
    assert sources.status["gpm"] == {
        "available": True,
        "period_s": GPM_PERIOD_S,
        "gpus": [{"index": 0, "supported": True}, {"index": 1, "supported": False, "reason": NOT_SUPPORTED}],
    }
    row: dict = {}
    sources.sample_into(row, 10.0)
    assert row["gpu0_sm_active_pct"] == 62.0 and "gpu1_sm_active_pct" not in row
    sources.close()
    assert all(sample.freed for sample in nvml.allocated) and len(nvml.allocated) == 2


def test_no_gpu_with_gpm_leaves_the_source_absent_with_reasons(tmp_path: Path) -> None:
    nvml = _two()
    for gpu in nvml.gpus:
        gpu.gpm_supported = False
    sources = _build(nvml, tmp_path)
    assert "gpm" not in [s.name for s in sources.sources]
    assert not any(c.endswith("_sm_active_pct") for c in sources.columns())
    assert sources.status["gpm"] == {
        "available": False,
        "reason": f"{NOT_SUPPORTED} (all 2 GPUs)",
        "gpus": [{"index": i, "supported": False, "reason": NOT_SUPPORTED} for i in range(2)],
    }
    assert sources.status["nvml"]["available"] is True  # the other GPU columns are unaffected
    sources.close()
    assert nvml.allocated == []  # nothing allocated for a GPU that is not supported
    single = TrackingNvml([FakeGpu(gpm_supported=False)])
    with pytest.raises(GpmUnavailable) as refused:
        _source(single)
    assert str(refused.value) == NOT_SUPPORTED and refused.value.gpus == [
        {"index": 0, "supported": False, "reason": NOT_SUPPORTED}
    ]
    assert single.shut_down


def test_no_nvml_at_all_is_the_same_reason_as_the_nvml_source(tmp_path: Path) -> None:
    def no_module() -> object:
        raise ImportError("no pynvml")

    sources = build_sources(Hardware(sys_root=tmp_path, load_nvml=no_module), follow_command=False)
    assert (
        sources.status["gpm"]
        == sources.status["nvml"]
        == {
            "available": False,
            "reason": "nvidia-ml-py (pynvml) is not installed: no pynvml",
        }
    )
    sources.close()


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda gpu: setattr(gpu, "mig_mode", 1), MIG_MODE),
        (lambda gpu: gpu.failing.update(nvmlGpmQueryDeviceSupport=4), REFUSED),  # NVML_ERROR_NO_PERMISSION
        (lambda gpu: gpu.failing.update(nvmlGpmSampleGet=4), REFUSED),
        (lambda gpu: gpu.failing.update(nvmlGpmSampleGet=19), HELD),  # NVML_ERROR_IN_USE on the first sample
        (lambda gpu: gpu.failing.update(nvmlGpmQueryDeviceSupport=13), OLD_DRIVER),  # FUNCTION_NOT_FOUND
        (lambda gpu: gpu.failing.update(nvmlGpmQueryDeviceSupport=3), NOT_SUPPORTED),
        (
            lambda gpu: gpu.failing.update(nvmlGpmSampleGet=999),
            "the first GPM sample failed (Unknown Error); another profiler (DCGM or Nsight?) may hold them",
        ),
    ],
)
def test_each_refusal_has_its_own_reason_and_costs_only_that_gpu(setup: Any, reason: str) -> None:
    nvml = _two()
    setup(nvml.gpus[0])
    source = _source(nvml)
    assert source.gpus == [
        {"index": 0, "supported": False, "reason": reason},
        {"index": 1, "supported": True},
    ]
    assert source.columns() == GPU1
    assert source.sample(1.0)["gpu1_sm_active_pct"] == 62.0
    assert nvml.gpus[0].gpm_snapshots == 0
    assert all(sample.freed for sample in nvml.allocated[:-2])  # a GPU refused at its first sample frees both
    source.close()
    assert all(sample.freed for sample in nvml.allocated)


def test_a_binding_that_answers_oddly_costs_that_gpu_not_the_collector() -> None:
    class Odd(TrackingNvml):
        def nvmlGpmQueryDeviceSupport(self, h: FakeGpu) -> object:
            if h is self.gpus[0]:
                return object()  # no isSupportedDevice
            return super().nvmlGpmQueryDeviceSupport(h)

    source = _source(Odd(two_fake_gpus().gpus))
    assert source.gpus[0]["supported"] is False and source.gpus[0]["reason"].startswith("GPM probe failed (")
    assert source.columns() == GPU1


def test_mig_off_or_unknown_does_not_stop_gpm() -> None:
    nvml = TrackingNvml([FakeGpu(unsupported={"nvmlDeviceGetMigMode"})])
    assert _source(nvml).gpus == [{"index": 0, "supported": True}]


def test_a_binding_without_the_gpm_api_is_a_reason_per_gpu(tmp_path: Path) -> None:
    nvml = two_fake_gpus()
    sources = _build(OldBinding(nvml.gpus), tmp_path)
    assert sources.status["gpm"] == {
        "available": False,
        "reason": f"{OLD_BINDING} (all 2 GPUs)",
        "gpus": [{"index": i, "supported": False, "reason": OLD_BINDING} for i in range(2)],
    }
    sources.close()


def test_different_reasons_are_summed_up_per_gpu() -> None:
    nvml = _two()
    nvml.gpus[0].gpm_supported = False
    nvml.gpus[1].failing["nvmlGpmSampleGet"] = 19
    with pytest.raises(GpmUnavailable) as refused:
        _source(nvml)
    assert str(refused.value) == f"no GPU has GPM: gpu0: {NOT_SUPPORTED}; gpu1: {HELD}"
    assert nvml.allocated and all(sample.freed for sample in nvml.allocated)


def test_a_metric_nvml_refuses_is_an_empty_cell_noted_once() -> None:
    nvml = _two()
    nvml.gpus[0].gpm_metric_errors = {61: 3}  # NVLink TX: not supported on a PCIe board
    source = _source(nvml)
    for tick in range(3):
        reading = source.sample(float(tick))
        assert reading["gpu0_nvlink_tx_bytes_per_s"] is None
        assert reading["gpu1_nvlink_tx_bytes_per_s"] == 0
        assert reading["gpu0_sm_active_pct"] == 62.0
    assert source.notes() == ["gpu0_nvlink_tx_bytes_per_s: not supported (NVML error 3); its cells are empty"]


@pytest.mark.parametrize(
    ("metric_id", "raw", "cell"),
    [
        (2, 100.0 + PCT_SLACK, 100.0),  # the counters' jitter, clamped
        (2, 100.0 + PCT_SLACK + 0.01, None),
        (2, -PCT_SLACK, 0.0),
        (2, -PCT_SLACK - 0.01, None),
        (2, 99.994, 99.99),
        (2, math.nan, None),
        (2, math.inf, None),
        (20, -1.0, None),  # PCIe TX, MiB/s
        (20, 0.0, 0),
    ],
)
def test_values_out_of_range_are_empty_cells_noted_once(
    metric_id: int, raw: float, cell: float | None
) -> None:
    gpu = FakeGpu()
    gpu.gpm_values[metric_id] = raw
    source = _source(TrackingNvml([gpu]))
    column = "gpu0_" + next(m.suffix for m in GPM_METRICS if m.nvml_id == metric_id)
    assert source.sample(1.0)[column] == cell
    assert source.sample(2.0)[column] == cell
    if cell is None:
        (note,) = source.notes()
        assert note.startswith(f"{column}: NVML gave {raw!r}, out of range")
    else:
        assert source.notes() == []


def test_a_failed_snapshot_empties_the_row_and_the_next_value_does_not_span_the_gap() -> None:
    nvml = _two()
    gpu0 = nvml.gpus[0]
    source = _source(nvml)
    assert source.sample(1.0)["gpu0_sm_active_pct"] == 62.0  # spans snapshots 1-2
    gpu0.failing["nvmlGpmSampleGet"] = 999
    failed = source.sample(2.0)
    assert all(failed[c] is None for c in GPU0) and failed["gpu1_sm_active_pct"] == 62.0
    del gpu0.failing["nvmlGpmSampleGet"]
    rebased = source.sample(3.0)  # a new base (snapshot 3): nothing to span yet
    assert all(rebased[c] is None for c in GPU0)
    assert source.sample(4.0)["gpu0_sm_active_pct"] == 62.0
    assert [span[1:] for span in nvml.spans if span[0] == gpu0.uuid] == [(1, 2), (3, 4)]
    assert source.notes() == ["gpu0 GPM read failed (Unknown Error); that row's cells are empty"]


def test_a_failed_metrics_call_empties_the_row_and_its_snapshot_is_the_next_base() -> None:
    nvml = _two()
    gpu0 = nvml.gpus[0]
    source = _source(nvml)
    gpu0.failing["nvmlGpmMetricsGet"] = 999
    failed = source.sample(1.0)
    assert all(failed[c] is None for c in GPU0)
    del gpu0.failing["nvmlGpmMetricsGet"]
    assert source.sample(2.0)["gpu0_sm_active_pct"] == 62.0
    assert [span[1:] for span in nvml.spans if span[0] == gpu0.uuid] == [(2, 3)]


def test_a_gpu_lost_mid_run_is_not_read_again() -> None:
    nvml = _two()
    source = _source(nvml)
    assert source.sample(1.0)["gpu0_sm_active_pct"] == 62.0
    nvml.gpus[0].lost = True
    calls = nvml.gpus[0].calls
    for tick in range(2, 5):
        reading = source.sample(float(tick))
        assert all(reading[c] is None for c in GPU0)
        assert reading["gpu1_dram_active_pct"] == 44.0
    assert nvml.gpus[0].calls == calls + 1  # the one snapshot that found it lost
    assert source.notes() == ["gpu0 was lost during the run (GPU is lost); its GPM cells are empty"]
    source.prime(5.0)
    assert nvml.gpus[0].calls == calls + 1


def test_cuda_visible_devices_picks_the_second_gpu_numbered_zero() -> None:
    nvml = _two()
    nvml.gpus[1].gpm_values[2] = 12.5
    source = _source(nvml, {"CUDA_VISIBLE_DEVICES": "1"})
    assert source.columns() == GPU0
    assert source.sample(1.0)["gpu0_sm_active_pct"] == 12.5
    assert nvml.gpus[0].gpm_snapshots == 0 and nvml.gpus[0].calls == 1  # only its UUID, to number the GPUs


class ThreadNamingNvml(TrackingNvml):
    """The fake, also naming the thread that took each GPM snapshot."""

    def __init__(self, gpus: list[FakeGpu]) -> None:
        super().__init__(gpus)
        self.snapshot_threads: list[str] = []

    def nvmlGpmSampleGet(self, h: FakeGpu, sample: FakeGpmSample) -> FakeGpmSample:
        self.snapshot_threads.append(threading.current_thread().name)
        return super().nvmlGpmSampleGet(h, sample)


def _until(condition: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_held_at_100_ms_it_is_read_off_the_tick_and_anew_on_the_last_row() -> None:
    """Held (read less often than every tick), GPM is read on a thread of its own once a period, the ticks
    taking its last reading; empty before its first window ends; the last row reads it on the tick."""
    nvml = ThreadNamingNvml([gpu := FakeGpu()])
    source = _source(nvml)
    sources = SourceSet([source], {"gpm": {}}, process=None)  # type: ignore[arg-type]
    sources.pace(0.1)
    assert sources.held_columns() == GPU0
    (held,) = sources._held
    assert held.off_tick is not None
    held.off_tick.period_s = 0.05  # the test's own period: a second of GPM_PERIOD_S would only slow it
    gpu.gpm_values[2] = 40.0
    sources.prime(0.0)
    first: dict = {}
    sources.sample_into(first, 0.0)
    assert first["gpu0_sm_active_pct"] is None or held.off_tick.reads > 0  # unless a window has ended
    _until(lambda: held.off_tick.reads >= 2)
    row: dict = {}
    sources.sample_into(row, 10.0)
    assert row["gpu0_sm_active_pct"] == 40.0
    gpu.gpm_values[2] = 50.0
    reads = held.off_tick.reads
    _until(lambda: held.off_tick.reads >= reads + 2)
    soon: dict = {}
    sources.sample_into(soon, 10.01)  # the next tick takes a new reading, whatever the hold
    assert soon["gpu0_sm_active_pct"] == 50.0
    assert set(nvml.snapshot_threads[1:]) == {"collect-gpm"}  # after the probe's, none on the tick thread
    gpu.gpm_values[2] = 29.0
    last: dict = {}
    sources.sample_into(last, time.monotonic() + 1.0, fresh=True)  # the reader's clock, as in a session
    assert last["gpu0_sm_active_pct"] == 29.0 and nvml.snapshot_threads[-1] == threading.current_thread().name
    assert held.off_tick is None  # stopped: the last row's source is the tick's alone
    sources.pace(0.66)
    assert sources.held_columns() == GPU0  # two ticks a read
    sources.pace(0.67)
    assert sources.held_columns() == [] and sources._held == []  # from 0.67 s, every tick, on the tick
    sources.close()
    assert not any(thread.name == "collect-gpm" for thread in threading.enumerate())


def test_a_read_that_fails_off_the_tick_is_noted_and_the_next_one_tries_again() -> None:
    from collect.sources.offtick import OffTickReader

    class Flaky(GpmSource):
        calls = 0

        def sample(self, now: float) -> dict:
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise RuntimeError("driver hiccup")
            return {"gpu0_sm_active_pct": 1.0}

    source = Flaky(lambda: FakeNvml([FakeGpu()]))
    reader = OffTickReader(source)
    reader.period_s = 0.02
    reader.start()
    _until(lambda: reader.reads >= 1)
    reader.stop()
    assert reader.latest() == {"gpu0_sm_active_pct": 1.0}
    assert source.notes() == ["gpm read failed off the tick (RuntimeError: driver hiccup)"]
    source.close()


def test_samples_are_freed_and_nvml_shut_down_on_close() -> None:
    nvml = _two()
    source = _source(nvml)
    assert len(nvml.allocated) == 4 and not any(sample.freed for sample in nvml.allocated)
    source.close()
    assert all(sample.freed for sample in nvml.allocated) and nvml.shut_down
    source.close()  # twice is harmless


def test_a_session_records_the_counters_and_why_per_gpu(tmp_path: Path) -> None:
    nvml = _two()
    nvml.gpus[1].mig_mode = 1
    hardware = Hardware(load_nvml=lambda: nvml, environ={})
    result = run_session(  # 1.4 s: one GPM window of a second, read off the tick
        SessionOptions(data_dir=tmp_path, interval_s=0.05, duration_s=1.4, hardware=hardware)
    )
    record = read_json(result.run_dir / "run.json")
    assert record["sources"]["gpm"] == {
        "available": True,
        "period_s": 1.0,
        "gpus": [{"index": 0, "supported": True}, {"index": 1, "supported": False, "reason": MIG_MODE}],
    }
    with open(result.run_dir / "telemetry.csv", newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = list(reader.fieldnames or []), list(reader)
    assert header[-len(GPU0) :] == GPU0 and not set(GPU1) & set(header)
    assert header.index("gpu0_sm_active_pct") > header.index("gpu1_energy_j")
    cells = [r["gpu0_sm_active_pct"] for r in rows]
    assert cells[0] == "" and cells[-1] == "62.0" and set(cells) == {"", "62.0"}  # empty until a window ends
    assert rows[-1]["gpu0_pcie_tx_bytes_per_s"] == str(850 * MIB)
    assert nvml.gpus[0].gpm_snapshots == 2  # the probe's, then one a second, off the tick
    assert all(sample.freed for sample in nvml.allocated) and nvml.shut_down


def test_nvml_cost_times_a_gpm_read_on_the_collectors_grid() -> None:
    """bench/nvml_cost.py: one read of every GPU's counters every GPM_PERIOD_S on 10 ms ticks (a sanity
    figure with the fake: the real cost is measured on a GPU)."""
    bench = load_bench("nvml_cost")
    nvml = _two()
    source = _source(nvml)
    ms = bench.gpm_read_ms(source, GPM_PERIOD_S + 0.05)
    assert 0 < ms < 50
    assert [g.gpm_snapshots for g in nvml.gpus] == [3, 3]  # the probe's, then at 0 and at 1 s
    ((what, read),) = source.calls()[:1]
    assert what == "gpu0 gpm" and read()["gpu0_sm_active_pct"] == 62.0
    nvml.gpus[0].failing["nvmlGpmSampleGet"] = 999
    with pytest.raises(Exception, match="Unknown Error"):
        read()  # what the bench times raises, so a refused call shows as nan


def test_a_window_shorter_than_the_minimum_repeats_the_last_reading() -> None:
    gpu = FakeGpu()
    source = GpmSource(lambda: FakeNvml([gpu]))
    source.prime(0.0)
    first = source.sample(1.0)
    snapshots = gpu.gpm_snapshots
    assert source.sample(1.0 + GPM_MIN_WINDOW_S - 0.001) == first and gpu.gpm_snapshots == snapshots
    source.sample(1.0 + GPM_MIN_WINDOW_S)
    assert gpu.gpm_snapshots == snapshots + 1
    source.close()
