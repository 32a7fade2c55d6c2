"""--prometheus: the GPM columns (runformat/gpm.py) served under dcgm-exporter's DCGM_FI_PROF_* names and
units (a ratio 0-1 for a percentage, bytes/s as they are), with its labels; a missing cell is left out."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from collect.exposition_families import dcgm_families
from runformat.gpm import GPM_METRICS

MIB = 1024 * 1024
GPUS = [
    {"index": 0, "uuid": "GPU-aaaa", "pci_bus_id": "00000000:19:00.0", "name": "NVIDIA H100 80GB HBM3",
     "mem_total_bytes": 80 * 1024**3},
    {"index": 1, "uuid": "GPU-bbbb", "pci_bus_id": "00000000:3B:00.0", "name": "NVIDIA H100 80GB HBM3",
     "mem_total_bytes": 80 * 1024**3},
]  # fmt: skip
ROW: dict[str, Any] = {
    "gpu0_util_pct": 97.0,
    "gpu0_sm_active_pct": 62.0,
    "gpu0_sm_occupancy_pct": 28.5,
    "gpu0_tensor_active_pct": 31.0,
    "gpu0_dram_active_pct": 44.0,
    "gpu0_fp32_active_pct": 0.0,  # a real zero: served as 0
    "gpu0_pcie_tx_bytes_per_s": 850 * MIB,
    "gpu0_nvlink_rx_bytes_per_s": 0,
    "gpu1_util_pct": 40.0,
    "gpu1_sm_active_pct": 100.0,
    "gpu1_tensor_active_pct": None,  # not read this tick: no sample, never 0
}


class _Collector:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def _families(row: dict[str, Any]) -> dict[str, Metric]:
    return {family.name: family for family in dcgm_families(row, GPUS, [None, None], "gpu-box-1")}


def _value(family: Metric, gpu: str) -> float:
    values = [sample.value for sample in family.samples if sample.labels["gpu"] == gpu]
    assert len(values) == 1, (family.name, gpu, family.samples)
    return values[0]


def test_gpm_columns_are_served_in_dcgm_units() -> None:
    families = _families(ROW)
    assert _value(families["DCGM_FI_PROF_SM_ACTIVE"], "0") == 0.62
    assert _value(families["DCGM_FI_PROF_SM_ACTIVE"], "1") == 1.0
    assert _value(families["DCGM_FI_PROF_SM_OCCUPANCY"], "0") == 0.285
    assert _value(families["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"], "0") == 0.31
    assert _value(families["DCGM_FI_PROF_DRAM_ACTIVE"], "0") == 0.44
    assert _value(families["DCGM_FI_PROF_PIPE_FP32_ACTIVE"], "0") == 0.0
    assert _value(families["DCGM_FI_PROF_PCIE_TX_BYTES"], "0") == 850 * MIB  # bytes/s, not scaled
    assert _value(families["DCGM_FI_PROF_NVLINK_RX_BYTES"], "0") == 0
    assert {family.type for name, family in families.items() if name.startswith("DCGM_FI_PROF_")} == {"gauge"}


def test_missing_cells_are_left_out_never_zero() -> None:
    families = _families(ROW)
    tensor = families["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]
    assert [sample.labels["gpu"] for sample in tensor.samples] == ["0"]  # gpu1's cell was None
    assert "DCGM_FI_PROF_PIPE_FP64_ACTIVE" not in families  # in no cell: no family at all
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" not in families
    no_gpm = _families({"gpu0_util_pct": 10.0, "gpu1_util_pct": 20.0})
    assert not [name for name in no_gpm if name.startswith("DCGM_FI_PROF_")]
    assert "DCGM_FI_DEV_GPU_UTIL" in no_gpm


def test_labels_are_those_of_the_dev_families() -> None:
    families = _families(ROW)
    util = next(s.labels for s in families["DCGM_FI_DEV_GPU_UTIL"].samples if s.labels["gpu"] == "1")
    active = next(s.labels for s in families["DCGM_FI_PROF_SM_ACTIVE"].samples if s.labels["gpu"] == "1")
    assert active == util
    assert util == {
        "gpu": "1",
        "UUID": "GPU-bbbb",
        "pci_bus_id": "00000000:3B:00.0",
        "device": "nvidia1",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "gpu-box-1",
    }


@pytest.mark.parametrize("exposition", ["text", "openmetrics"])
def test_every_dcgm_name_parses_back(exposition: str) -> None:
    """Every GPM metric, served in both formats Prometheus may ask for, parses back to its name and value."""
    row = {f"gpu0_{metric.suffix}": 50.0 if metric.is_pct else 2.5 * MIB for metric in GPM_METRICS}
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(list(dcgm_families(row, GPUS[:1], [None], "h"))))  # type: ignore[arg-type]
    if exposition == "text":
        parsed = text_string_to_metric_families(generate_latest(registry).decode())
    else:
        parsed = parse_openmetrics(generate_openmetrics(registry).decode())
    served = {family.name: (family.type, family.samples[0].value) for family in parsed}
    for metric in GPM_METRICS:
        expected = 0.5 if metric.is_pct else 2.5 * MIB
        assert served[metric.dcgm_field] == ("gauge", expected), metric.dcgm_field
    assert len([name for name in served if name.startswith("DCGM_FI_PROF_")]) == len(GPM_METRICS) == 15
