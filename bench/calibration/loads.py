"""The loads of bench/gpu_calibrate.py, run on one CUDA device through the `torch` handed in, and what 100 %
means for them: the device's dense bf16 peak and its HBM bandwidth."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

GEMM_N = 8192
COPY_BYTES = 2 * 1024**3
TINY_SYNC_EVERY = 5000
GRAPH_KERNELS = 1000

# From /work/shared/notes/gpu-headroom-facts.md (NVIDIA datasheets as collected at
# glennklockwood.com/garden/processors/h100). HBM bytes/s by sizing/analysis/peaks.py's model; where sizing
# does not import, by NVML name: (dense bf16 FLOP/s, HBM bytes/s, model).
NOTE = "the issue's note"
HBM_BYTES_PER_S = {"H100 SXM5": 3.35e12, "H100 PCIe": 2.0e12, "H200 SXM": 4.8e12}
FALLBACK_PEAKS: dict[str, tuple[float, float, str]] = {
    "NVIDIA H100 80GB HBM3": (989.4e12, 3.35e12, "H100 SXM5"),
    "NVIDIA H100 PCIe": (756e12, 2.0e12, "H100 PCIe"),
    "NVIDIA H200": (989.4e12, 4.8e12, "H200 SXM"),
}


def peaks(name: str) -> tuple[float | None, float | None, str]:
    """(dense bf16 FLOP/s, HBM bytes/s, where each is from) for an NVML device name; None where unknown."""
    try:
        from sizing.analysis.peaks import gpu_peak, gpu_peaks
    except ImportError as exc:  # sizing needs pandas and numpy
        flops, hbm, model = FALLBACK_PEAKS.get(name, (None, None, name))
        where = f"{model}, {NOTE}: sizing/analysis/peaks.py does not import ({exc})" if flops else "unknown"
    else:
        entry, peak = gpu_peaks(name), gpu_peak(name, "bf16")
        model = entry.model if entry else name
        flops, hbm = peak.flops_per_s, HBM_BYTES_PER_S.get(model)
        where = f"from sizing/analysis/peaks.py: {peak.source}"
    hbm_source = f"HBM {hbm / 1e12:g} TB/s ({model}, {NOTE})" if hbm else "HBM bandwidth unknown"
    return flops, hbm, f"bf16 {where}; {hbm_source}"


def pct(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else 100.0 * part / whole


def gemm_figures(
    n: int, iterations: int, seconds: float, peak_flops: float | None
) -> dict[str, float | None]:
    flops = 2.0 * n**3 * iterations / seconds
    return {"tflops": flops / 1e12, "mfu_pct": pct(flops, peak_flops)}


def copy_figures(nbytes: int, iterations: int, seconds: float, peak_bytes: float | None) -> dict:
    rate = 2.0 * nbytes * iterations / seconds  # each copy reads and writes nbytes
    return {"bytes_per_s": rate, "bandwidth_pct": pct(rate, peak_bytes)}


def _timed(torch, device, seconds: float, step: Callable[[], object], burst: int, warmup: int = 3) -> dict:
    """Run `step` in bursts of `burst` for at least `seconds`, synchronising after each burst."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize(device)
    iterations, started = 0, time.time()
    while time.time() - started < seconds:
        for _ in range(burst):
            step()
        iterations += burst
        torch.cuda.synchronize(device)
    return {"start_unix": started, "end_unix": time.time(), "iterations": iterations}


def run_load(
    name: str, torch, device, seconds: float, peak_flops: float | None, peak_bytes: float | None
) -> dict:
    if name == "gemm":
        a, b = (torch.randn(GEMM_N, GEMM_N, device=device, dtype=torch.bfloat16) for _ in range(2))
        c = torch.empty_like(a)
        load = _timed(torch, device, seconds, lambda: torch.matmul(a, b, out=c), burst=10)
        load["figures"] = gemm_figures(
            GEMM_N, load["iterations"], load["end_unix"] - load["start_unix"], peak_flops
        )
        return {
            **load,
            "what": f"bf16 matmul N={GEMM_N}, {load['iterations']} iterations, "
            f"{load['figures']['tflops']:.1f} TFLOP/s",
        }
    if name == "copy":
        source = torch.ones(COPY_BYTES // 4, dtype=torch.float32, device=device)
        target = torch.empty_like(source)
        load = _timed(torch, device, seconds, lambda: target.copy_(source), burst=20)
        load["figures"] = copy_figures(
            COPY_BYTES, load["iterations"], load["end_unix"] - load["start_unix"], peak_bytes
        )
        return {
            **load,
            "what": f"copy_ of {COPY_BYTES / 1024**3:g} GiB, {load['iterations']} copies, "
            f"{load['figures']['bytes_per_s'] / 1e12:.2f} TB/s read + write",
        }
    x = torch.zeros(1, dtype=torch.int64, device=device)
    if name == "tiny":
        load = _timed(torch, device, seconds, lambda: x.add_(1), burst=TINY_SYNC_EVERY)
        kernels = load["iterations"]
    else:
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            x.add_(1)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(GRAPH_KERNELS):
                x.add_(1)
        load = _timed(torch, device, seconds, graph.replay, burst=20)
        kernels = load["iterations"] * GRAPH_KERNELS
    seconds_run = load["end_unix"] - load["start_unix"]
    load["figures"] = {"kernels_per_s": kernels / seconds_run}
    return {
        **load,
        "what": f"1-element adds, {kernels} kernels, {kernels / seconds_run:,.0f} per s, "
        f"counter {int(x.item())}",
    }


def find_cuda(gpu: int) -> tuple[object, str] | str:
    """(torch, the device's name), or why not."""
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # CUDA's numbering = NVML's
    try:
        import torch
    except ImportError as exc:
        return f"PyTorch is not installed ({exc})"
    if not torch.cuda.is_available():
        return f"PyTorch {torch.__version__} sees none"
    if gpu >= torch.cuda.device_count():
        return f"no device {gpu} ({torch.cuda.device_count()} visible)"
    return torch, torch.cuda.get_device_name(gpu)
