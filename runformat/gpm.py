"""The GPU's profiling counters (NVML GPM, Hopper and newer) as the run directory names them.

One table for every side: the collector reads `nvml_id` and writes `gpu<i>_<suffix>`; the Prometheus
exposition serves `dcgm_field` in DCGM's unit (a ratio 0-1 for a percentage, bytes/s for bytes/s); the
importers map DCGM's names and nvidia-smi's `dmon --gpm-metrics` columns back; sizing and the dashboard read
the columns by suffix. Percentages are 0-100 (NVML's GPM unit); PCIe and NVLink traffic is bytes per second
(NVML gives MiB/s, DCGM bytes/s).
"""

from __future__ import annotations

from dataclasses import dataclass

from runformat.columns import gpu_column, gpu_suffix_column

MIB = 1024 * 1024


@dataclass(frozen=True)
class GpmMetric:
    suffix: str  # the column is gpu<i>_<suffix>
    nvml_id: int  # NVML_GPM_METRIC_* (nvml.h)
    dcgm_field: str  # its DCGM twin (DCGM_FI_PROF_*), as dcgm-exporter names it
    dcgm_id: int
    nvml_scale: float  # column value = NVML's value × this
    dcgm_scale: float  # DCGM's value = column value × this
    meaning: str

    @property
    def is_pct(self) -> bool:
        return self.suffix.endswith("_pct")


def _pct(suffix: str, nvml_id: int, dcgm_field: str, dcgm_id: int, meaning: str) -> GpmMetric:
    return GpmMetric(suffix, nvml_id, dcgm_field, dcgm_id, 1.0, 0.01, meaning)


def _bytes(suffix: str, nvml_id: int, dcgm_field: str, dcgm_id: int, meaning: str) -> GpmMetric:
    return GpmMetric(suffix, nvml_id, dcgm_field, dcgm_id, float(MIB), 1.0, meaning)


GPM_METRICS: tuple[GpmMetric, ...] = (
    _pct(
        "gr_engine_active_pct",
        1,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        1001,
        "time any graphics/compute context was active",
    ),
    _pct(
        "sm_active_pct",
        2,
        "DCGM_FI_PROF_SM_ACTIVE",
        1002,
        "share of SMs with at least one warp resident, over time",
    ),
    _pct("sm_occupancy_pct", 3, "DCGM_FI_PROF_SM_OCCUPANCY", 1003, "resident warps against the SMs' maximum"),
    _pct("tensor_active_pct", 5, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1004, "any tensor pipe active"),
    _pct(
        "tensor_hmma_active_pct",
        7,
        "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE",
        1014,
        "half-precision tensor (HMMA) pipe active",
    ),
    _pct(
        "tensor_imma_active_pct",
        9,
        "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE",
        1013,
        "integer tensor (IMMA) pipe active",
    ),
    _pct(
        "tensor_dfma_active_pct",
        6,
        "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE",
        1015,
        "double-precision tensor (DFMA) pipe active",
    ),
    _pct("dram_active_pct", 10, "DCGM_FI_PROF_DRAM_ACTIVE", 1005, "DRAM bandwidth used against its maximum"),
    _pct("fp64_active_pct", 11, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", 1006, "FP64 (non-tensor) pipe active"),
    _pct("fp32_active_pct", 12, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", 1007, "FP32 (non-tensor) pipe active"),
    _pct("fp16_active_pct", 13, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", 1008, "FP16 (non-tensor) pipe active"),
    _bytes(
        "pcie_tx_bytes_per_s",
        20,
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        1009,
        "PCIe bytes sent by the GPU, per second",
    ),
    _bytes(
        "pcie_rx_bytes_per_s",
        21,
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        1010,
        "PCIe bytes received by the GPU, per second",
    ),
    _bytes(
        "nvlink_tx_bytes_per_s", 61, "DCGM_FI_PROF_NVLINK_TX_BYTES", 1011, "NVLink bytes sent, per second"
    ),
    _bytes(
        "nvlink_rx_bytes_per_s", 60, "DCGM_FI_PROF_NVLINK_RX_BYTES", 1012, "NVLink bytes received, per second"
    ),
)

GPM_SUFFIXES: tuple[str, ...] = tuple(m.suffix for m in GPM_METRICS)
BY_SUFFIX: dict[str, GpmMetric] = {m.suffix: m for m in GPM_METRICS}
BY_DCGM_FIELD: dict[str, GpmMetric] = {m.dcgm_field: m for m in GPM_METRICS}
BY_NVML_ID: dict[int, GpmMetric] = {m.nvml_id: m for m in GPM_METRICS}
GPM_COLUMN = gpu_suffix_column(GPM_SUFFIXES)


def gpm_column(index: int, suffix: str) -> str:
    """gpu<index>_<suffix>, for a suffix of GPM_SUFFIXES."""
    if suffix not in BY_SUFFIX:
        raise KeyError(f"not a GPM column suffix: {suffix}")
    return gpu_column(index, suffix)
