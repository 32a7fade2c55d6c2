"""What machine a run was recorded on, as PerfZero records it (never imports TensorFlow)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import re
from collections.abc import Callable
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


def _cpuinfo(proc_root: Path) -> list[tuple[str, str]] | None:
    """(key, value) of each /proc/cpuinfo line, both stripped; None when it cannot be read."""
    try:
        text = (proc_root / "cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return [
        (key.strip(), value.strip()) for key, _, value in (line.partition(":") for line in text.splitlines())
    ]


def cpu_model_and_sockets(proc_root: Path) -> tuple[str | None, int | None]:
    fields = _cpuinfo(proc_root)
    if fields is None:
        return platform.processor() or None, None
    model = next((value for key, value in fields if key in ("model name", "Model", "Hardware")), None)
    packages = {value for key, value in fields if key == "physical id"}
    return model or platform.processor() or None, (len(packages) or 1)


def virtual_machine(proc_root: Path) -> bool | None:
    """True when /proc/cpuinfo's flags include `hypervisor` (x86 guests), False without it, None when the
    CPU lists no flags (other architectures) or cpuinfo is unreadable."""
    flags = next((value.split() for key, value in _cpuinfo(proc_root) or [] if key == "flags"), None)
    return None if flags is None else "hypervisor" in flags


SIMD_FLAGS = ("avx512f", "avx512_bf16", "amx_bf16", "avx2", "fma", "neon", "asimd")
MODEL_CLOCK = re.compile(r"@\s*(\d+(?:\.\d+)?)\s*GHz", re.IGNORECASE)


def cpu_simd(proc_root: Path) -> list[str] | None:
    """The vector-math flags of the first CPU in /proc/cpuinfo (x86 `flags`, ARM `Features`) among
    SIMD_FLAGS, in that order; None when cpuinfo lists neither (unknown, not none)."""
    for key, value in _cpuinfo(proc_root) or []:
        if key in ("flags", "Features"):
            present = set(value.split())
            return [flag for flag in SIMD_FLAGS if flag in present]
    return None


def cpu_max_mhz(
    sys_root: Path, model: str | None, proc_root: Path | None = None
) -> tuple[float | None, str | None]:
    """The CPU's highest clock and where it came from: cpufreq's cpuinfo_max_freq (the most of any CPU),
    else the model name's "@ 2.10GHz" (a base clock), else /proc/cpuinfo's highest `cpu MHz` (a VM without
    cpufreq reports its host's nominal clock there), else (None, None)."""
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
    reported = _cpuinfo_mhz(proc_root) if proc_root is not None else []
    return (max(reported), "cpuinfo cpu MHz") if reported else (None, None)


def _cpuinfo_mhz(proc_root: Path) -> list[float]:
    found = []
    for key, value in _cpuinfo(proc_root) or []:
        if key == "cpu MHz":
            try:
                mhz = float(value)
            except ValueError:
                continue
            if 0 < mhz < 1e5:
                found.append(mhz)
    return found


IDENTITY_KEY = "gpu-workbench host identity:"  # so the hashes match no other tool's hash of the same id
UNSET_IDS = {"", "uninitialized", "none", "not specified", "not settable", "not present", "default string",
             "to be filled by o.e.m.", "system serial number", "0", "00000000-0000-0000-0000-000000000000",
             "ffffffff-ffff-ffff-ffff-ffffffffffff", "03000200-0400-0500-0006-000700080009"}  # fmt: skip
AWS_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


def identity_hash(raw: str) -> str:
    """The first 16 hex digits of SHA-256 over a fixed prefix and the id: runs compare equal, the run
    directory does not carry the raw id."""
    return hashlib.sha256((IDENTITY_KEY + raw).encode("utf-8")).hexdigest()[:16]


def _read_id(path: Path) -> str | None:
    """A file's id, stripped; None when unreadable (not root, absent) or a placeholder."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return None if text.lower() in UNSET_IDS else text


def host_identity(etc_root: Path, var_root: Path, proc_root: Path, sys_root: Path) -> dict[str, str | None]:
    """What tells one machine or VM from another, hashed (identity_hash); None for what is unreadable.

    machine-id: the OS installation (a VM cloned from an image may share it); boot_id: this boot;
    instance id: the cloud instance (AWS Nitro's `board_asset_tag`), else the firmware's system UUID
    (`product_uuid`, root only; a VM's is its own), else Xen's `/sys/hypervisor/uuid`."""
    machine = _read_id(etc_root / "machine-id") or _read_id(var_root / "lib/dbus/machine-id")
    boot = _read_id(proc_root / "sys/kernel/random/boot_id")
    instance, instance_from = None, None
    tag = _read_id(sys_root / "class/dmi/id/board_asset_tag")
    candidates = [("class/dmi/id/board_asset_tag", tag if tag and AWS_INSTANCE_ID.match(tag) else None)]
    candidates += [
        (name, _read_id(sys_root / name)) for name in ("class/dmi/id/product_uuid", "hypervisor/uuid")
    ]
    for name, found in candidates:
        if found:
            instance, instance_from = found.lower(), f"/sys/{name}"
            break
    return {
        "machine_id_hash": identity_hash(machine) if machine else None,
        "boot_id_hash": identity_hash(boot) if boot else None,
        "instance_id_hash": identity_hash(instance) if instance else None,
        "instance_id_from": instance_from,
    }


def os_name(etc_root: Path = Path("/etc")) -> str:
    try:
        for line in (etc_root / "os-release").read_text(encoding="utf-8").splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}"


SCHED_GETAFFINITY = getattr(os, "sched_getaffinity", None)  # Linux; absent on macOS


def system_info(
    proc_root: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
    gpus: list[dict[str, Any]] | None = None,
    gpu_driver_version: str | None = None,
    cuda_version: str | None = None,
    psutil_module: Any = None,
    etc_root: Path = Path("/etc"),
    var_root: Path = Path("/var"),
    affinity: Callable[[int], set[int]] | None = SCHED_GETAFFINITY,
) -> dict[str, Any]:
    """The `system` object of run.json. `affinity`: os.sched_getaffinity (the CPUs this process, and the
    training it starts, may run on), None where the OS has none."""
    if psutil_module is None:
        import psutil as psutil_module
    model, sockets = cpu_model_and_sockets(proc_root)
    max_mhz, max_mhz_source = cpu_max_mhz(sys_root, model, proc_root)
    gpus = gpus or []
    return {
        "cpu_model": model,
        "cpu_cores_physical": psutil_module.cpu_count(logical=False),
        "cpu_cores_logical": psutil_module.cpu_count(logical=True) or os.cpu_count(),
        "cpu_affinity_cpus": len(affinity(0)) if affinity is not None else None,
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
        **host_identity(etc_root, var_root, proc_root, sys_root),
        "os": os_name(etc_root),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "slurm": slurm.allocation(os.environ),
    }
