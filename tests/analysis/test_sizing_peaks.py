"""The peak table (analysis.peaks): each listed GPU by the name NVML gives it, unknown names and dtypes as
unknown, a CPU's peak from cores × clock × vector width, and docs/sizing.md's copy of the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from sizing.analysis import peaks

# NVML device names as nvidia-smi / nvmlDeviceGetName print them, and the dense TF32 TFLOP/s expected
LISTED = {
    "NVIDIA H100 80GB HBM3": ("H100 SXM5", 494.7, 700.0),
    "NVIDIA H100 SXM5 80GB": ("H100 SXM5", 494.7, 700.0),
    "NVIDIA H100 PCIe": ("H100 PCIe", 378.0, 300.0),
    "NVIDIA H100 NVL": ("H100 NVL", 417.5, 350.0),
    "NVIDIA H200": ("H200 SXM", 494.7, 700.0),
    "NVIDIA H200 NVL": ("H200 NVL", 417.5, None),
    "NVIDIA A100-SXM4-40GB": ("A100 SXM4", 156.0, 400.0),
    "NVIDIA A100-SXM4-80GB": ("A100 SXM4", 156.0, 400.0),
    "NVIDIA A100-PCIE-40GB": ("A100 PCIe 40GB", 156.0, 250.0),
    "NVIDIA A100 80GB PCIe": ("A100 PCIe 80GB", 156.0, 300.0),
    "NVIDIA A800-SXM4-80GB": ("A800 SXM4", 156.0, 400.0),
    "NVIDIA GH200 480GB": ("GH200", 494.7, None),
    "NVIDIA A30": ("A30", 82.0, 165.0),
    "NVIDIA A40": ("A40", 74.8, 300.0),
    "NVIDIA L40": ("L40", 90.5, 300.0),
    "NVIDIA L40S": ("L40S", 183.0, 350.0),
    "NVIDIA L4": ("L4", 60.0, 72.0),
    "NVIDIA A10": ("A10", 62.5, 150.0),
    "Tesla V100-SXM2-16GB": ("V100 SXM2", None, 300.0),
    "Tesla V100-SXM2-32GB": ("V100 SXM2", None, 300.0),
    "Tesla V100-PCIE-32GB": ("V100 PCIe", None, 250.0),
    "Tesla T4": ("T4", None, 70.0),
    "NVIDIA GeForce RTX 4090": ("GeForce RTX 4090", 82.6, 450.0),
    "NVIDIA B200": ("B200", 1100.0, 1000.0),
}


@pytest.mark.parametrize("name", sorted(LISTED))
def test_each_listed_gpu_is_found_by_its_nvml_name(name: str) -> None:
    model, tf32, watts = LISTED[name]
    entry = peaks.gpu_peaks(name)
    assert entry is not None and entry.model == model and entry.board_power_w == watts
    assert entry.source  # every figure says where it comes from
    peak = peaks.gpu_peak(name, "tf32")
    if tf32 is None:
        assert not peak.known and peak.source == f"no dense TF32 peak known for {name}"
    else:
        assert peak.flops_per_s == pytest.approx(tf32 * 1e12) and entry.model in peak.source
    assert peaks.gpu_peak(name.lower(), "fp32").known  # case aside
    assert peaks.gpu_peak(f" {name}  ", "fp32").known  # as are stray spaces


def test_the_note_figures_for_the_h100_and_what_a_v100_lacks() -> None:
    h100 = peaks.gpu_peaks("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    assert h100.tflops == {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}
    v100 = peaks.gpu_peaks("Tesla V100-SXM2-16GB")
    assert v100 is not None and set(v100.tflops) == {"fp32", "fp16"}
    assert not peaks.gpu_peak("Tesla V100-SXM2-16GB", "bf16").known
    assert peaks.gpu_peak("Tesla V100-SXM2-16GB", "fp16").flops_per_s == pytest.approx(125e12)
    assert peaks.gpu_peak("Tesla T4", "fp16").flops_per_s == pytest.approx(65e12)


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA A10G",  # AWS's variant: other tensor figures, not in the table
        "NVIDIA A100X",
        "NVIDIA GeForce RTX 3090",
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA H100 80GB HBM3 MIG 1g.10gb",  # a MIG slice has a share of the SMs
        "NVIDIA RTX A6000",  # its datasheet gives one tensor figure, with sparsity: not which dtype's
        "Tesla V100-SXM3-32GB",
        "Crafted H100",
    ],
)
def test_an_unknown_name_has_no_peak_never_a_guess(name: str) -> None:
    assert peaks.gpu_peaks(name) is None
    peak = peaks.gpu_peak(name, "tf32")
    assert (
        peak.flops_per_s is None
        and peak.source == f"{name} is not in the table of GPU peaks (sizing/analysis/peaks.py)"
    )


@pytest.mark.parametrize("name", ["", "  ", None, 42])
def test_a_name_not_recorded_has_no_peak(name: object) -> None:
    assert peaks.gpu_peaks(name) is None
    peak = peaks.gpu_peak(name, "tf32")
    assert peak.flops_per_s is None and peak.source == "the GPU's name is not recorded (run.json system.gpus)"


def system(**changes: object) -> dict:
    base = {
        "cpu_model": "Crafted Xeon",
        "cpu_cores_physical": 4,
        "cpu_max_mhz": 3000.0,
        "cpu_max_mhz_source": "cpufreq cpuinfo_max_freq",
        "cpu_simd": ["avx2", "fma"],
    }
    return {k: v for k, v in {**base, **changes}.items() if v is not None}


def test_a_cpu_peak_is_cores_times_clock_times_vector_flops() -> None:
    avx2 = peaks.cpu_peak(system(), "fp32")
    assert avx2.flops_per_s == pytest.approx(4 * 3.0e9 * 8 * 2 * 2)  # 384 GFLOP/s
    assert avx2.lower_bound_mfu  # cpufreq's max clock: the peak is an upper bound
    assert "4 cores × 3,000 MHz" in avx2.source and "2 FMA units (assumed)" in avx2.source
    avx512 = peaks.cpu_peak(system(cpu_simd=["avx512f", "avx2", "fma"]), "fp32")
    assert avx512.flops_per_s == pytest.approx(4 * 3.0e9 * 16 * 2 * 2)
    quota = peaks.cpu_peak(system(cgroup_cpu_limit_cpus=1.5), "fp32")
    assert quota.flops_per_s == pytest.approx(1.5 * 3.0e9 * 8 * 2 * 2) and "cgroup quota 1.5" in quota.source
    base_clock = peaks.cpu_peak(system(cpu_max_mhz_source="model name"), "fp32")
    assert base_clock.known and not base_clock.lower_bound_mfu  # a base clock bounds nothing


@pytest.mark.parametrize(
    ("changes", "dtype", "why"),
    [
        ({"cpu_simd": None}, "fp32", "vector flags are not recorded"),
        ({"cpu_simd": ["avx2"]}, "fp32", "no AVX2+FMA or AVX-512"),  # AVX2 without FMA
        ({"cpu_simd": []}, "fp32", "no AVX2+FMA or AVX-512"),
        ({"cpu_simd": ["asimd"]}, "fp32", "ARM vector units"),
        ({"cpu_simd": "avx2 fma"}, "fp32", "vector flags are not recorded"),  # wrong type: unknown
        ({"cpu_max_mhz": None}, "fp32", "max clock is not recorded"),
        ({"cpu_max_mhz": 0}, "fp32", "max clock is not recorded"),
        ({"cpu_cores_physical": None}, "fp32", "physical cores are not recorded"),
        ({}, "bf16", "no BF16 peak modelled for a CPU"),
    ],
)
def test_a_cpu_peak_is_unknown_without_what_it_needs(changes: dict, dtype: str, why: str) -> None:
    peak = peaks.cpu_peak(system(**changes), dtype)
    assert peak.flops_per_s is None and why in peak.source


def test_docs_list_every_peak_of_the_table() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "sizing.md").read_text(encoding="utf-8")
    for g in peaks.GPU_PEAKS:
        cells = [
            f"{g.tflops[k]:,g}" if k in g.tflops else "–" for k in ("fp32", "tf32", "fp16", "bf16", "fp8")
        ]
        pattern = g.pattern.replace("|", "\\|")
        watts = "configurable" if g.board_power_w is None else f"{g.board_power_w:,.0f}"
        row = f"| {g.model} | `{pattern}` | " + " | ".join(cells) + f" | {watts} | {g.source} |"
        assert row in doc, row
