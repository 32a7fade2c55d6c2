"""What 100 % means: dense peak FLOP/s per math dtype and board power, by NVML device name; a CPU's peak
from its cores, clock and vector flags (run.json `system`).

Every figure carries its source. A name that matches no entry has no peak: unknown, never a guess. Dtypes
are "fp32" (non-tensor FP32), "tf32", "fp16" and "bf16" (tensor, FP32 accumulate) and "fp8"; a dtype the
GPU has no tensor path for (TF32 and BF16 on a V100 or T4) is absent, so its peak is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sizing.model import number

TERA = 1e12
DTYPE_NAMES = {"fp32": "FP32", "tf32": "TF32", "fp16": "FP16", "bf16": "BF16", "fp8": "FP8"}

GLENN = "NVIDIA datasheet as collected at glennklockwood.com/garden/processors/"
H100_DATASHEET = "NVIDIA H100 Tensor Core GPU datasheet"
A100_DATASHEET = "NVIDIA A100 Tensor Core GPU datasheet"
SPARSE_HALVED = "(sparsity figures halved)"


@dataclass(frozen=True)
class GpuPeaks:
    model: str  # what the table calls it
    pattern: str  # a regular expression over NVML's device name (case aside, whole name)
    tflops: dict[str, float]  # dense TFLOP/s by dtype
    board_power_w: float | None  # the lowest default board power of the model's SKUs; None: configurable
    source: str


def _gpu(model: str, pattern: str, tflops: dict[str, float], watts: float | None, source: str) -> GpuPeaks:
    return GpuPeaks(model, pattern, tflops, watts, source)


HOPPER_SXM = {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}
HOPPER_NVL = {"fp32": 60.0, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5, "fp8": 1670.5}
A100 = {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}

GPU_PEAKS: tuple[GpuPeaks, ...] = (
    _gpu("H100 SXM5", r"NVIDIA H100 80GB HBM3|NVIDIA H100 SXM5?\b.*", HOPPER_SXM, 700.0, GLENN + "h100"),
    _gpu("H100 PCIe", r"NVIDIA H100 PCIe|NVIDIA H100 80GB PCIe",
         {"fp32": 51.0, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0, "fp8": 1513.0}, 300.0,
         H100_DATASHEET + " (H100 PCIe: TDP 300-350 W)"),
    _gpu("H100 NVL", r"NVIDIA H100 NVL", HOPPER_NVL, 350.0,
         H100_DATASHEET + " (H100 NVL column; TDP 350-400 W) " + SPARSE_HALVED),
    _gpu("H200 SXM", r"NVIDIA H200(?! NVL)\b.*", HOPPER_SXM, 700.0,
         GLENN + "h100 (H200: the H100 SXM5 with more, faster HBM)"),
    _gpu("GH200", r"NVIDIA GH200\b.*", HOPPER_SXM, None,
         GLENN + "h100 (GH200: the H100 SXM5's GPU beside a Grace CPU; module power configurable)"),
    _gpu("H200 NVL", r"NVIDIA H200 NVL", HOPPER_NVL, None,
         "NVIDIA H200 datasheet (H200 NVL column; TDP up to 600 W) " + SPARSE_HALVED),
    _gpu("A100 SXM4", r"NVIDIA A100[- ]SXM4?[- ](40|80)GB", A100, 400.0, GLENN + "A100; " + A100_DATASHEET),
    _gpu("A800 SXM4", r"NVIDIA A800[- ]SXM4?[- ](40|80)GB", A100, 400.0,
         A100_DATASHEET + " (A800: the A100 SXM4 with a slower NVLink)"),
    _gpu("A100 PCIe 40GB", r"NVIDIA A100[- ]PCIE[- ]40GB", A100, 250.0, A100_DATASHEET + " (A100 40GB PCIe)"),
    _gpu("A100 PCIe 80GB", r"NVIDIA A100 80GB PCIe|NVIDIA A100[- ]PCIE[- ]80GB", A100, 300.0,
         A100_DATASHEET + " (A100 80GB PCIe)"),
    _gpu("L40S", r"NVIDIA L40S", {"fp32": 91.6, "tf32": 183.0, "fp16": 362.05, "bf16": 362.05, "fp8": 733.0},
         350.0, "NVIDIA L40S datasheet " + SPARSE_HALVED),
    _gpu("L4", r"NVIDIA L4", {"fp32": 30.3, "tf32": 60.0, "fp16": 121.0, "bf16": 121.0, "fp8": 242.5}, 72.0,
         "NVIDIA L4 datasheet " + SPARSE_HALVED),
    _gpu("A10", r"NVIDIA A10", {"fp32": 31.2, "tf32": 62.5, "fp16": 125.0, "bf16": 125.0}, 150.0,
         "NVIDIA A10 datasheet"),
    _gpu("A30", r"NVIDIA A30", {"fp32": 10.3, "tf32": 82.0, "fp16": 165.0, "bf16": 165.0}, 165.0,
         "NVIDIA A30 datasheet " + SPARSE_HALVED),
    _gpu("A40", r"NVIDIA A40", {"fp32": 37.4, "tf32": 74.8, "fp16": 149.7, "bf16": 149.7}, 300.0,
         "NVIDIA A40 datasheet " + SPARSE_HALVED),
    _gpu("L40", r"NVIDIA L40", {"fp32": 90.5, "tf32": 90.5, "fp16": 181.05, "bf16": 181.05, "fp8": 362.0},
         300.0, "NVIDIA L40 datasheet " + SPARSE_HALVED),
    _gpu("V100 SXM2", r"Tesla V100-SXM2-(16|32)GB", {"fp32": 15.7, "fp16": 125.0}, 300.0,
         "NVIDIA Tesla V100 datasheet (V100 SXM2; no TF32 or BF16 tensor path)"),
    _gpu("V100 PCIe", r"Tesla V100-PCIE-(16|32)GB", {"fp32": 14.0, "fp16": 112.0}, 250.0,
         "NVIDIA Tesla V100 datasheet (V100 PCIe; no TF32 or BF16 tensor path)"),
    _gpu("V100S PCIe", r"Tesla V100S-PCIE-32GB", {"fp32": 16.4, "fp16": 130.0}, 250.0,
         "NVIDIA Tesla V100S datasheet (no TF32 or BF16 tensor path)"),
    _gpu("T4", r"(Tesla|NVIDIA) T4", {"fp32": 8.1, "fp16": 65.0}, 70.0,
         "NVIDIA T4 datasheet (mixed FP16/FP32 tensor; no TF32 or BF16 tensor path)"),
    _gpu("GeForce RTX 4090", r"NVIDIA GeForce RTX 4090",
         {"fp32": 82.6, "tf32": 82.6, "fp16": 165.2, "bf16": 165.2}, 450.0,
         "NVIDIA Ada Lovelace architecture whitepaper, appendix (RTX 4090, FP32 accumulate, dense)"),
    _gpu("B200", r"NVIDIA B200",
         {"fp32": 80.0, "tf32": 1100.0, "fp16": 2250.0, "bf16": 2250.0, "fp8": 4500.0}, 1000.0,
         GLENN + "B200 (HGX B200, per GPU)"),
)  # fmt: skip


def gpu_peaks(name: object) -> GpuPeaks | None:
    """The table entry whose pattern is NVML's whole device name (case and repeated spaces aside)."""
    if not isinstance(name, str):
        return None
    plain = " ".join(name.split())
    return next((p for p in GPU_PEAKS if re.fullmatch(p.pattern, plain, re.IGNORECASE)), None)


@dataclass(frozen=True)
class Peak:
    """One device's dense peak for one dtype, or why it is not known."""

    flops_per_s: float | None
    dtype: str
    device: str  # the name it was looked up by
    source: str  # where the figure comes from, or why there is none
    lower_bound_mfu: bool = False  # the peak is an upper bound, so an MFU against it is a lower bound

    @property
    def known(self) -> bool:
        return self.flops_per_s is not None


def gpu_peak(name: object, dtype: str) -> Peak:
    if not isinstance(name, str) or not name.strip():
        return Peak(None, dtype, "GPU", "the GPU's name is not recorded (run.json system.gpus)")
    device = name
    entry = gpu_peaks(name)
    if entry is None:
        why = f"{device} is not in the table of GPU peaks (sizing/analysis/peaks.py)"
        return Peak(None, dtype, device, why)
    tflops = entry.tflops.get(dtype)
    if tflops is None:
        return Peak(None, dtype, device, f"no dense {DTYPE_NAMES.get(dtype, dtype)} peak known for {device}")
    return Peak(tflops * TERA, dtype, device, f"{entry.model}: {entry.source}")


# A CPU's peak: physical cores × max clock × FLOP per cycle per core, FLOP per cycle = fp32 lanes × 2 (a
# fused multiply-add) × FMA_UNITS. x86 server cores issue at most two vector FMAs a cycle, and the
# all-core vector clock is at most the max (turbo) clock, so with cpufreq's max clock this is an upper
# bound on the peak and the MFU against it a lower bound. ARM cores have 2 to 4 FMA pipes: not modelled.
FMA_UNITS = 2
FLOPS_PER_FMA = 2
FP32_LANES = (("avx512f", 16), ("avx2+fma", 8))


def cpu_fp32_lanes(simd: object) -> tuple[int | None, str]:
    """fp32 lanes per vector FMA from run.json `cpu_simd`, and which ISA; None where not modelled."""
    if not isinstance(simd, list) or not all(isinstance(f, str) for f in simd):
        return None, "the CPU's vector flags are not recorded (run.json system.cpu_simd)"
    if "avx512f" in simd:
        return 16, "avx512f"
    if "avx2" in simd and "fma" in simd:
        return 8, "avx2+fma"
    if "asimd" in simd or "neon" in simd:
        return None, "ARM vector units (2 to 4 FMA pipes a core) are not modelled"
    return None, "no AVX2+FMA or AVX-512 in the CPU's flags"


def cpu_peak(system: dict, dtype: str) -> Peak:
    """The host's fp32 peak from run.json `system` (cores limited by a cgroup quota); other dtypes unknown."""
    device = str(system.get("cpu_model") or "CPU")
    if dtype != "fp32":
        return Peak(None, dtype, device, f"no {DTYPE_NAMES.get(dtype, dtype)} peak modelled for a CPU")
    lanes, isa = cpu_fp32_lanes(system.get("cpu_simd"))
    mhz = number(system.get("cpu_max_mhz"))
    cores = number(system.get("cpu_cores_physical"))
    quota = number(system.get("cgroup_cpu_limit_cpus"))
    if lanes is None:
        return Peak(None, dtype, device, isa)
    if mhz is None or mhz <= 0:
        return Peak(None, dtype, device, "the CPU's max clock is not recorded (run.json system.cpu_max_mhz)")
    if cores is None or cores < 1:
        return Peak(None, dtype, device, "the CPU's physical cores are not recorded")
    used = min(cores, quota) if quota is not None and quota > 0 else cores
    flops = used * mhz * 1e6 * lanes * FLOPS_PER_FMA * FMA_UNITS
    clock_from = str(system.get("cpu_max_mhz_source") or "")
    from_cpufreq = clock_from.startswith("cpufreq")
    quota_note = f" (cgroup quota {quota:g} CPUs)" if used != cores else ""
    source = (
        f"{used:g} cores{quota_note} × {mhz:,.0f} MHz ({clock_from or 'clock source not recorded'}) × "
        f"{lanes} fp32 lanes ({isa}) × {FLOPS_PER_FMA} (FMA) × {FMA_UNITS} FMA units (assumed)"
    )
    return Peak(flops, dtype, device, source, lower_bound_mfu=from_cpufreq)
