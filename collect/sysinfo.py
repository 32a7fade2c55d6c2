"""What machine a run was recorded on, as PerfZero records it (never imports TensorFlow)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
from pathlib import Path
from typing import Any

from collect import slurm
from collect.cgroup import cpu_quota

KEY_PACKAGES = (
    "psutil",
    "nvidia-ml-py",
    "tensorflow",
    "tf-models-official",
    "tf-keras",
    "keras",
    "numpy",
    "torch",
)


def package_versions(names: tuple[str, ...] = KEY_PACKAGES) -> dict[str, str | None]:
    """Installed versions from package metadata; None for a package that is not installed."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_model_and_sockets(proc_root: Path) -> tuple[str | None, int | None]:
    try:
        text = (proc_root / "cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or None, None
    model = None
    packages = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "Hardware") and model is None:
            model = value.strip()
        elif key == "physical id":
            packages.add(value.strip())
    return model or platform.processor() or None, (len(packages) or 1)


def virtual_machine(proc_root: Path) -> bool | None:
    """True when /proc/cpuinfo's flags include `hypervisor` (x86 guests), False without it, None when the
    CPU lists no flags (other architectures) or cpuinfo is unreadable."""
    try:
        text = (proc_root / "cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    flags = [line.partition(":")[2].split() for line in text.splitlines() if line.startswith("flags")]
    if not flags:
        return None
    return "hypervisor" in flags[0]


SIMD_FLAGS = ("avx512f", "avx512_bf16", "amx_bf16", "avx2", "fma", "neon", "asimd")
MODEL_CLOCK = re.compile(r"@\s*(\d+(?:\.\d+)?)\s*GHz", re.IGNORECASE)


def cpu_simd(proc_root: Path) -> list[str] | None:
    """The vector-math flags of the first CPU in /proc/cpuinfo (x86 `flags`, ARM `Features`) among
    SIMD_FLAGS, in that order; None when cpuinfo lists neither (unknown, not none)."""
    try:
        text = (proc_root / "cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            present = set(value.split())
            return [flag for flag in SIMD_FLAGS if flag in present]
    return None


def cpu_max_mhz(sys_root: Path, model: str | None) -> tuple[float | None, str | None]:
    """The CPU's highest clock and where it came from: cpufreq's cpuinfo_max_freq (the most of any CPU),
    else the model name's "@ 2.10GHz" (a base clock), else (None, None)."""
    found = []
    for path in sorted((sys_root / "devices/system/cpu").glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq")):
        try:
            khz = float(path.read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            continue
        if khz > 0:
            found.append(khz / 1000.0)
    if found:
        return max(found), "cpufreq cpuinfo_max_freq"
    match = MODEL_CLOCK.search(model or "")
    if match and float(match.group(1)) > 0:
        return float(match.group(1)) * 1000.0, "model name"
    return None, None


def os_name(etc_root: Path = Path("/etc")) -> str:
    try:
        for line in (etc_root / "os-release").read_text(encoding="utf-8").splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}"


def system_info(
    proc_root: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
    gpus: list[dict[str, Any]] | None = None,
    gpu_driver_version: str | None = None,
    cuda_version: str | None = None,
    psutil_module: Any = None,
) -> dict[str, Any]:
    """The `system` object of run.json."""
    if psutil_module is None:
        import psutil as psutil_module
    model, sockets = cpu_model_and_sockets(proc_root)
    max_mhz, max_mhz_source = cpu_max_mhz(sys_root, model)
    gpus = gpus or []
    return {
        "cpu_model": model,
        "cpu_cores_physical": psutil_module.cpu_count(logical=False),
        "cpu_cores_logical": psutil_module.cpu_count(logical=True) or os.cpu_count(),
        "cpu_sockets": sockets,
        "cpu_max_mhz": max_mhz,
        "cpu_max_mhz_source": max_mhz_source,
        "cpu_simd": cpu_simd(proc_root),
        "virtual_machine": virtual_machine(proc_root),
        **cpu_quota(proc_root, sys_root),
        "mem_total_bytes": int(psutil_module.virtual_memory().total),
        "swap_total_bytes": int(psutil_module.swap_memory().total),
        "gpu_count": len(gpus),
        "gpus": gpus,
        "gpu_driver_version": gpu_driver_version,
        "cuda_version": cuda_version,
        "os": os_name(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "slurm": slurm.allocation(os.environ),
    }
