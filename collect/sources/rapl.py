"""CPU package energy from Intel/AMD RAPL counters in /sys/class/powercap (usually readable by root only)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from collect.procfs import KernelFile, read_text
from collect.sources.base import Reading, Source, SourceUnavailable


def describe_os_error(path: Path, exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return f"{path}: permission denied (needs root)"
    return f"{path}: {exc.strerror or exc}"


@dataclass
class _Domain:
    zone: Path
    counter: KernelFile
    wrap_uj: int
    last_uj: int = 0


def package_domains(sys_root: Path) -> list[Path]:
    """Top-level package zones (intel-rapl:0, intel-rapl:1, ...), not their core/uncore/dram subzones."""
    zones = []
    for zone in sorted((sys_root / "class/powercap").glob("intel-rapl:*")):
        if zone.name.count(":") != 1:
            continue
        try:
            if read_text(zone / "name").startswith("package"):
                zones.append(zone)
        except OSError:
            continue
    return zones


class RaplSource(Source):
    name = "rapl"

    def __init__(self, sys_root: Path) -> None:
        super().__init__()
        zones = package_domains(sys_root)
        if not zones:
            raise SourceUnavailable(f"no RAPL package domain in {sys_root}/class/powercap")
        self._domains: list[_Domain] = []
        for zone in zones:
            energy_path = zone / "energy_uj"
            try:
                counter = KernelFile(energy_path, 64)
                int(counter.read())
                wrap_uj = int(read_text(zone / "max_energy_range_uj")) + 1
            except OSError as exc:
                raise SourceUnavailable(describe_os_error(energy_path, exc)) from exc
            except ValueError as exc:
                raise SourceUnavailable(f"{energy_path}: unreadable counter ({exc})") from exc
            self._domains.append(_Domain(zone, counter, wrap_uj))
        self._total_uj: int | None = None

    def columns(self) -> list[str]:
        return ["cpu_energy_j"]

    @property
    def zones(self) -> list[Path]:
        """The package zones, in the order of last_raw (their energy_uj counters, µJ)."""
        return [domain.zone for domain in self._domains]

    def prime(self, now: float) -> None:
        for domain in self._domains:
            domain.last_uj = int(domain.counter.read())
        self.last_raw = tuple(domain.last_uj for domain in self._domains)

    def sample(self, now: float) -> Reading:
        step_uj = 0
        try:
            for domain in self._domains:
                current = int(domain.counter.read())
                step_uj += (current - domain.last_uj) % domain.wrap_uj
                domain.last_uj = current
        except (OSError, ValueError) as exc:
            self.note_once(f"RAPL read failed: {exc}")
            return {"cpu_energy_j": None}
        self.last_raw = tuple(domain.last_uj for domain in self._domains)
        # The contract counts from the first row: the first row holds 0.
        self._total_uj = 0 if self._total_uj is None else self._total_uj + step_uj
        return {"cpu_energy_j": round(self._total_uj / 1e6, 3)}

    def close(self) -> None:
        for domain in self._domains:
            domain.counter.close()
