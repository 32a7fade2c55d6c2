"""Which GPU the training used, by UUID, in CUDA's order (PCI bus order under
CUDA_DEVICE_ORDER=PCI_BUS_ID)."""

from __future__ import annotations

from training.device import cuda_order_uuids

GPUS = [("0000:81:00.0", "GPU-bbb"), ("0000:01:00.0", "GPU-aaa"), ("0000:41:00.0", "GPU-ccc")]


def test_uuids_follow_pci_bus_order() -> None:
    assert cuda_order_uuids(GPUS, None) == ["GPU-aaa", "GPU-ccc", "GPU-bbb"]


def test_cuda_visible_devices_by_index_and_by_uuid_prefix() -> None:
    assert cuda_order_uuids(GPUS, "2,0") == ["GPU-bbb", "GPU-aaa"]
    assert cuda_order_uuids(GPUS, "GPU-c") == ["GPU-ccc"]


def test_an_invalid_entry_ends_the_list_as_cuda_does() -> None:
    assert cuda_order_uuids(GPUS, "1,7,0") == ["GPU-ccc"]
    assert cuda_order_uuids(GPUS, "-1") == []
    assert cuda_order_uuids([], "0") == []


def test_nvml_gpus_reads_bus_ids_and_uuids_through_pynvml(monkeypatch) -> None:
    """The NVML calls, against the collector's fake pynvml at the library boundary (no GPU here)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collect"))
    from collectfakes import FakeGpu, FakeNvml

    from training.device import nvml_gpus

    fake = FakeNvml([FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b")])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert nvml_gpus() == [("00000000:19:00.0", "GPU-a"), ("00000000:19:00.0", "GPU-b")]
    assert fake.shut_down
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([], init_error=9))
    assert nvml_gpus() == []  # no NVML: the UUIDs stay unknown, training goes on
