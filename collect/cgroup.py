"""The CPU quota of the collector's cgroup (what a container or systemd slice lets its processes use).

cgroup v2: `cpu.max` ("QUOTA PERIOD" or "max PERIOD") of the process's cgroup and of every ancestor (the
tightest wins); cgroup v1: `cpu.cfs_quota_us` / `cpu.cfs_period_us` (quota −1 = none) the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

NO_QUOTA: dict[str, Any] = {
    "cgroup_cpu_quota_us": None,
    "cgroup_cpu_period_us": None,
    "cgroup_cpu_limit_cpus": None,
    "cgroup_cpu_quota_file": None,
}


def _cgroup_paths(proc_root: Path) -> tuple[str | None, dict[str, str]]:
    """The v2 cgroup path (line `0::PATH`) and the v1 paths by controller, from /proc/self/cgroup."""
    v2, v1 = None, {}
    try:
        text = (proc_root / "self/cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, {}
    for line in text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            v2 = path
        for controller in controllers.split(","):
            if controller:
                v1[controller] = path
    return v2, v1


def _ancestors(root: Path, path: str) -> list[Path]:
    """The cgroup's directory under root and its parents up to (not including) root, deepest first."""
    parts = [p for p in path.strip("/").split("/") if p and p != ".."]
    return [root.joinpath(*parts[:n]) for n in range(len(parts), 0, -1)]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _v2_limits(cgroup_root: Path, path: str) -> list[tuple[int, int, Path]]:
    found = []
    for directory in _ancestors(cgroup_root, path):
        text = _read(directory / "cpu.max")
        fields = text.split() if text else []
        if len(fields) == 2 and fields[0] != "max" and fields[0].isdigit() and fields[1].isdigit():
            found.append((int(fields[0]), int(fields[1]), directory / "cpu.max"))
    return found


def _v1_limits(cgroup_root: Path, controllers: dict[str, str]) -> list[tuple[int, int, Path]]:
    path = controllers.get("cpu")
    if path is None:
        return []
    mounts = [m for m in cgroup_root.glob("cpu*") if "cpu" in m.name.split(",")]
    found = []
    for mount in mounts:
        for directory in [*_ancestors(mount, path), mount]:
            quota, period = _read(directory / "cpu.cfs_quota_us"), _read(directory / "cpu.cfs_period_us")
            try:
                quota_us, period_us = int(quota or ""), int(period or "")
            except ValueError:
                continue
            if quota_us > 0 and period_us > 0:
                found.append((quota_us, period_us, directory / "cpu.cfs_quota_us"))
    return found


def cpu_quota(proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys")) -> dict[str, Any]:
    """run.json's cgroup fields: the tightest quota and period (µs), the CPUs it allows, and its file;
    all None when no quota applies or none is readable."""
    cgroup_root = sys_root / "fs/cgroup"
    v2, v1 = _cgroup_paths(proc_root)
    limits = _v2_limits(cgroup_root, v2) if v2 is not None else []
    unified_root = cgroup_root / "unified"
    if v2 is not None and not limits and unified_root.is_dir():
        limits = _v2_limits(unified_root, v2)
    limits += _v1_limits(cgroup_root, v1)
    if not limits:
        return dict(NO_QUOTA)
    quota_us, period_us, where = min(limits, key=lambda q: q[0] / q[1])
    return {
        "cgroup_cpu_quota_us": quota_us,
        "cgroup_cpu_period_us": period_us,
        "cgroup_cpu_limit_cpus": round(quota_us / period_us, 3),
        "cgroup_cpu_quota_file": str(where.relative_to(sys_root)),
    }
