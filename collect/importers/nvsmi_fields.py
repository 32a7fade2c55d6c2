"""nvidia-smi's field names and cells, turned into the run format's columns and units.

`--query-gpu` names (`nvidia-smi --help-query-gpu`; older and newer spellings of one field map to one
column) and `nvidia-smi dmon`'s short column names; docs/run-format.md ("Imported runs") has the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from runformat.gpm import BY_NVML_ID

MIB = 1024 * 1024
# Which GPU a line is about.
ID_FIELDS = {
    "index": "index",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "pci.bus_id": "pci_bus_id",
    "gpu_bus_id": "pci_bus_id",
}
# Facts per GPU that go to run.json, not to telemetry.csv.
DESCRIPTION_FIELDS = {
    "name": "name",
    "gpu_name": "name",
    "driver_version": "driver_version",
    "serial": "serial",
}
TIME_FIELDS = ("timestamp",)


@dataclass(frozen=True)
class Field:
    suffix: str  # the column is gpu<N>_<suffix>
    scale: float = 1.0  # to the column's unit (MiB -> bytes)


QUERY_FIELDS: dict[str, Field] = {
    "utilization.gpu": Field("util_pct"),
    "utilization.memory": Field("mem_util_pct"),
    "temperature.gpu": Field("temp_c"),
    "temperature.memory": Field("mem_temp_c"),
    "power.draw.average": Field("power_w"),
    "power.draw": Field("power_w"),  # the same NVML reading as .average where both exist
    "power.draw.instant": Field("power_instant_w"),
    "enforced.power.limit": Field("power_limit_w"),
    "power.limit": Field("power_limit_w"),  # the limit set; the enforced one wins where both exist
    "clocks.sm": Field("sm_clock_mhz"),
    "clocks.current.sm": Field("sm_clock_mhz"),
    "clocks.mem": Field("mem_clock_mhz"),
    "clocks.current.memory": Field("mem_clock_mhz"),
    "clocks.gr": Field("graphics_clock_mhz"),
    "clocks.current.graphics": Field("graphics_clock_mhz"),
    "clocks.max.sm": Field("sm_clock_max_mhz"),
    "clocks.max.memory": Field("mem_clock_max_mhz"),
    "clocks.max.mem": Field("mem_clock_max_mhz"),
    "clocks.max.graphics": Field("graphics_clock_max_mhz"),
    "clocks.max.gr": Field("graphics_clock_max_mhz"),
    "memory.used": Field("mem_used_bytes", MIB),
    "memory.total": Field("mem_total_bytes", MIB),
    "memory.free": Field("mem_free_bytes", MIB),
    "fan.speed": Field("fan_pct"),
    "pstate": Field("pstate"),
}
# A field that fills the same column as a preferred one is kept apart under its own name when both appear.
PREFERRED = {"power.draw": "power.draw.average", "power.limit": "enforced.power.limit"}
# clocks_event_reasons.<name> (clocks_throttle_reasons.<name> before driver 535): NVML's bits.
REASON_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}
REASON_PREFIXES = ("clocks_event_reasons.", "clocks_throttle_reasons.")
# `nvidia-smi dmon` columns (-s pucvmet); fb and bar1 are MB (MiB) there.
DMON_FIELDS: dict[str, Field] = {
    "pwr": Field("power_w"),
    "gtemp": Field("temp_c"),
    "mtemp": Field("mem_temp_c"),
    "sm": Field("util_pct"),
    "mem": Field("mem_util_pct"),
    "mclk": Field("mem_clock_mhz"),
    "pclk": Field("sm_clock_mhz"),  # the processor (graphics/SM) clock
    "fb": Field("mem_used_bytes", MIB),
}
# `nvidia-smi dmon --gpm-metrics ID,...` columns (units line `GPM:%`, `GPM:MiB/s`) by NVML GPM metric id, as
# nvidia-smi prints them (seen in its output for ids 1-5, 10-13, 20, 21, 60, 61). The tensor-op columns
# (ids 6, 7, 9) and `intutil` (4, no column in the run format) are kept under their own names.
DMON_GPM_IDS = {
    "gract": 1,
    "smutil": 2,
    "smocc": 3,
    "mmaact": 5,
    "dram": 10,
    "fp64": 11,
    "fp32": 12,
    "fp16": 13,
    "pcitx": 20,
    "pcirx": 21,
    "nvlrx": 60,
    "nvltx": 61,
}
DMON_GPM_FIELDS: dict[str, Field] = {
    name: Field(BY_NVML_ID[nvml_id].suffix, BY_NVML_ID[nvml_id].nvml_scale)
    for name, nvml_id in DMON_GPM_IDS.items()
}
DMON_GPM_UNIT = "GPM:"
UNAVAILABLE = re.compile(r"^\[.*\]$|^(N/A|-)$")
_NUMBER = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%]*)$")
_PSTATE = re.compile(r"^P(\d+)$")
_HEADER_UNIT = re.compile(r"^(.*?)\s*\[([^\]]*)\]$")


def split_header_name(raw: str) -> tuple[str, str]:
    """`power.draw [W]` -> (`power.draw`, `W`); a name without a unit -> (name, '')."""
    text = raw.strip()
    if match := _HEADER_UNIT.match(text):
        return match.group(1).strip(), match.group(2).strip()
    return text, ""


def reason_name(field_name: str) -> str | None:
    """`clocks_event_reasons.sw_power_cap` -> `sw_power_cap`, `...active` -> `active`; None otherwise."""
    for prefix in REASON_PREFIXES:
        if field_name.startswith(prefix):
            return field_name.removeprefix(prefix)
    return None


def kept_column_suffix(field_name: str) -> str:
    """An unknown field's own name as a column suffix: `pcie.link.gen.current` -> `pcie_link_gen_current`."""
    return re.sub(r"[^0-9A-Za-z]+", "_", field_name).strip("_").lower() or "field"


def is_unavailable(text: str) -> bool:
    return bool(UNAVAILABLE.match(text.strip()))


def parse_value(text: str, field: Field | None) -> float | str | None:
    """A cell as its column's number (None for [N/A] and the like); text when it is not a number."""
    stripped = text.strip()
    if not stripped or is_unavailable(stripped):
        return None
    if stripped.lower().startswith("0x"):
        try:
            return int(stripped, 16)
        except ValueError:
            return stripped
    if match := _PSTATE.match(stripped):
        return int(match.group(1))
    if match := _NUMBER.match(stripped):
        value = float(match.group(1)) * (field.scale if field else 1.0)
        return int(value) if value.is_integer() else value
    return stripped.replace(",", ";")


def reason_active(text: str) -> bool | None:
    """`Active` / `Not Active` of a named clocks-event reason; None when not readable."""
    stripped = text.strip().lower()
    if stripped == "active":
        return True
    if stripped == "not active":
        return False
    return None


# ------------------------------------------------------------------------------- what a log holds

Value = float | int | str | None


class NvsmiImportError(Exception):
    """The log cannot be imported; the message is one line for the user."""


@dataclass
class Line:
    number: int
    moment: datetime
    gpu_id: str | None
    values: dict[str, Value]  # column suffix -> value
    description: dict[str, str]


MOST_LEFT_OUT = 0.5  # a log at least half of whose lines are not readings is refused, not imported


@dataclass
class GpuLog:
    """What an nvidia-smi log holds, one entry per sample, each with one reading per GPU."""

    format: str
    fields: list[str]
    samples: list[tuple[datetime, dict[str, dict[str, Value]]]] = field(default_factory=list)
    gpu_keys: list[str] = field(default_factory=list)
    identified_by: str = "one GPU (one line per sample)"
    descriptions: dict[str, dict[str, str]] = field(default_factory=dict)
    suffixes: list[str] = field(default_factory=list)  # every column suffix the log fills, in field order
    kept: dict[str, str] = field(default_factory=dict)  # unknown field -> its column suffix
    notes: list[str] = field(default_factory=list)
    truncated_tail: str | None = None
    left_out: list[tuple[int, str, str]] = field(default_factory=list)  # line number, problem, its text

    def leave_out(self, number: int, problem: str, text: str, lines: int) -> None:
        """A line that is not a reading (nvidia-smi's own message, "GPU is lost", a torn write) mid-log:
        left out and said, unless such lines are half its `lines` or more (then it is not such a log)."""
        self.left_out.append((number, problem, text))
        if len(self.left_out) >= MOST_LEFT_OUT * lines:
            raise NvsmiImportError(f"line {self.left_out[0][0]}: {self.left_out[0][1]}")

    @property
    def left_out_text(self) -> str | None:
        """'2 lines that are not readings left out (line 302: 'Unable to …': 1 fields, …)'; None if none."""
        if not self.left_out:
            return None
        number, problem, text = self.left_out[0]
        shown = text.strip() if len(text.strip()) <= 100 else text.strip()[:99] + "…"
        count = len(self.left_out)
        return (
            f"{count} line{'s that are not readings' if count != 1 else ' that is not a reading'} left out "
            f"(line {number}: {shown!r}: {problem})"
        )
