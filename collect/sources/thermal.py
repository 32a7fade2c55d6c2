"""CPU temperature from /sys/class/hwmon or /sys/class/thermal: the package sensor, else the hottest core."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from collect.procfs import KernelFile, read_text
from collect.sources.base import HELD_PERIOD_S, Reading, Source, SourceUnavailable

_PACKAGE_CHIPS = ("k10temp", "zenpower")  # AMD: Tdie (or Tctl) is the package temperature
_SOC_CHIPS = ("cpu_thermal", "soc_thermal", "cpu-thermal")


@dataclass(frozen=True)
class Sensor:
    chip: str
    label: str
    path: Path


def hwmon_sensors(sys_root: Path) -> list[Sensor]:
    sensors = []
    for chip_dir in sorted((sys_root / "class/hwmon").glob("hwmon*")):
        try:
            chip = read_text(chip_dir / "name")
        except OSError:
            continue
        for temp_input in sorted(chip_dir.glob("temp*_input")):
            label_path = temp_input.with_name(temp_input.name.replace("_input", "_label"))
            try:
                label = read_text(label_path)
            except OSError:
                label = temp_input.name.replace("_input", "")
            sensors.append(Sensor(chip, label, temp_input))
    return sensors


def thermal_zone_sensors(sys_root: Path) -> list[Sensor]:
    sensors = []
    for zone in sorted((sys_root / "class/thermal").glob("thermal_zone*")):
        try:
            zone_type = read_text(zone / "type")
        except OSError:
            continue
        sensors.append(Sensor(zone_type, zone.name, zone / "temp"))
    return sensors


def choose_cpu_sensors(hwmon: list[Sensor], zones: list[Sensor]) -> tuple[list[Sensor], str]:
    """The sensors whose maximum is the CPU temperature, and how they were chosen (for run.json)."""
    packages = [s for s in hwmon if s.chip == "coretemp" and s.label.startswith("Package id")]
    if packages:
        return packages, "coretemp package sensor(s)"
    for chip in _PACKAGE_CHIPS:
        chip_sensors = [s for s in hwmon if s.chip == chip]
        for preferred in ("Tdie", "Tctl"):
            chosen = [s for s in chip_sensors if s.label == preferred]
            if chosen:
                return chosen, f"{chip} {preferred}"
        if chip_sensors:
            return chip_sensors, f"{chip} (hottest)"
    pkg_zones = [s for s in zones if s.chip == "x86_pkg_temp"]
    if pkg_zones:
        return pkg_zones, "thermal zone x86_pkg_temp"
    cores = [s for s in hwmon if s.chip == "coretemp"]
    if cores:
        return cores, "coretemp (hottest core)"
    soc = [s for s in hwmon if s.chip in _SOC_CHIPS] or [s for s in zones if s.chip in _SOC_CHIPS]
    if soc:
        return soc, f"{soc[0].chip}"
    return [], ""


class ThermalSource(Source):
    name = "thermal"
    min_period_s = HELD_PERIOD_S

    def __init__(self, sys_root: Path) -> None:
        super().__init__()
        sensors, how = choose_cpu_sensors(hwmon_sensors(sys_root), thermal_zone_sensors(sys_root))
        self._files: list[KernelFile] = []
        self.sensors: list[Sensor] = []  # the ones read, in the order of last_raw
        for sensor in sensors:
            try:
                kernel_file = KernelFile(sensor.path, 64)
                int(kernel_file.read())
            except (OSError, ValueError):
                continue
            self._files.append(kernel_file)
            self.sensors.append(sensor)
        if not self._files:
            raise SourceUnavailable(
                f"no readable CPU temperature sensor in {sys_root}/class/hwmon or {sys_root}/class/thermal"
            )
        self.chosen = how

    def columns(self) -> list[str]:
        return ["cpu_temp_c"]

    def sample(self, now: float) -> Reading:
        hottest = None
        readings: list[int | None] = []
        for kernel_file in self._files:
            try:
                millidegrees = int(kernel_file.read())
            except (OSError, ValueError):
                readings.append(None)
                continue
            readings.append(millidegrees)
            hottest = millidegrees if hottest is None else max(hottest, millidegrees)
        self.last_raw = readings
        return {"cpu_temp_c": None if hottest is None else round(hottest / 1000.0, 1)}

    def close(self) -> None:
        for kernel_file in self._files:
            kernel_file.close()
