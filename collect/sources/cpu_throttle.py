"""The kernel's CPU thermal-throttle event counters (x86 `thermal_throttle/*_throttle_count` in sysfs).

They count how often a core (or its package) crossed its thermal limit since boot: the only direct evidence
that a CPU frequency drop was heat. Absent in most VMs and on non-x86 machines (then the source is absent).
"""

from __future__ import annotations

from pathlib import Path

from collect.procfs import KernelFile, read_text
from collect.sources.base import HELD_PERIOD_S, Reading, Source, SourceUnavailable

CORE_COLUMN = "cpu_core_throttle_count"
PACKAGE_COLUMN = "cpu_package_throttle_count"


def throttle_dirs(sys_root: Path) -> list[Path]:
    return sorted((sys_root / "devices/system/cpu").glob("cpu[0-9]*/thermal_throttle"))


def package_id(throttle_dir: Path) -> str:
    """The CPU's physical package (its package counter is the same file content on every core of it)."""
    try:
        return read_text(throttle_dir.parent / "topology/physical_package_id")
    except OSError:
        return throttle_dir.parent.name


def _open(path: Path) -> KernelFile | None:
    try:
        counter = KernelFile(path, 64)
        int(counter.read())
    except (OSError, ValueError):
        return None
    return counter


class CpuThrottleSource(Source):
    """`cpu_core_throttle_count`: the sum over logical CPUs of core_throttle_count;
    `cpu_package_throttle_count`: the sum over physical packages of package_throttle_count (one core's file
    per package). Both count since boot."""

    name = "cpu_throttle"
    min_period_s = HELD_PERIOD_S

    def __init__(self, sys_root: Path) -> None:
        super().__init__()
        self._cores: list[KernelFile] = []
        self._packages: dict[str, KernelFile] = {}
        for directory in throttle_dirs(sys_root):
            core = _open(directory / "core_throttle_count")
            if core is not None:
                self._cores.append(core)
            package = package_id(directory)
            if package not in self._packages:
                counter = _open(directory / "package_throttle_count")
                if counter is not None:
                    self._packages[package] = counter
        if not self._cores and not self._packages:
            raise SourceUnavailable(
                f"no readable thermal_throttle counters in {sys_root}/devices/system/cpu (a VM, or not x86)"
            )

    def columns(self) -> list[str]:
        return [CORE_COLUMN, PACKAGE_COLUMN]

    def sample(self, now: float) -> Reading:
        return {CORE_COLUMN: _sum(self._cores), PACKAGE_COLUMN: _sum(list(self._packages.values()))}

    def close(self) -> None:
        for counter in [*self._cores, *self._packages.values()]:
            counter.close()


def _sum(counters: list[KernelFile]) -> int | None:
    """The sum of the counters, None when any is unreadable (a partial sum would look like a reset)."""
    total = 0
    for counter in counters:
        try:
            total += int(counter.read())
        except (OSError, ValueError):
            return None
    return total if counters else None
