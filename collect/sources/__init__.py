"""Telemetry sources, one module per kind of hardware, built by `build_sources`.

A source that cannot work on this machine is left out with a one-line reason; nothing else notices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collect.sources.base import AbsentSource, Hardware, Reading, Source, SourceUnavailable
from collect.sources.cpu import CpuSource
from collect.sources.cpu_throttle import CpuThrottleSource
from collect.sources.disk import DiskSource
from collect.sources.gpm import GpmSource, GpmUnavailable
from collect.sources.memory import MemorySource
from collect.sources.network import NetworkSource
from collect.sources.nvml import NvmlSource
from collect.sources.offtick import OffTickReader
from collect.sources.process import ProcessTreeSource
from collect.sources.rapl import RaplSource
from collect.sources.thermal import ThermalSource

# Column order of telemetry.csv follows this order (docs/run-format.md).
SOURCE_ORDER = (
    "cpu",
    "thermal",
    "cpu_throttle",
    "memory",
    "disk",
    "network",
    "process",
    "rapl",
    "nvml",
    "gpm",
)
# Columns the contract keeps even without the hardware: `cpu_temp_c` is empty when there is no sensor.
KEPT_WHEN_ABSENT = {"thermal": ["cpu_temp_c"]}


@dataclass
class SourceSet:
    sources: list[Source]
    status: dict[str, dict[str, Any]]
    process: ProcessTreeSource
    nvml: NvmlSource | None = None
    _columns: list[str] = field(default_factory=list)
    _maintained: list[Source] | None = None
    _held: list[_Held] = field(default_factory=list)
    _every_tick: list[Source] = field(default_factory=list)
    _held_reading: Reading = field(default_factory=dict)  # every held source's last reading, merged
    _next_read_at: float = float("-inf")  # when the first held source is due again
    held_reads: int = 0  # grows whenever a held source is read: the held columns' values may have changed

    def columns(self) -> list[str]:
        if not self._columns:
            self._columns = [column for source in self.sources for column in source.columns()]
        return self._columns

    def prime(self, now: float) -> None:
        for source in self.sources:
            source.prime(now)
        for held in self._held:
            if held.off_tick is not None:
                held.off_tick.start()

    def pace(self, interval_s: float) -> None:
        """Sample at this interval: a source whose `min_period_s` spans several ticks is read every that many
        ticks (rounded), and its last reading repeated on the ticks in between; one that says
        `read_off_tick` is then read on a thread of its own (collect/sources/offtick.py), from `prime`."""
        self._stop_off_tick()
        held = [_Held(source, _hold_s(source.min_period_s, interval_s)) for source in self.sources]
        for entry in held:
            if entry.hold_s and entry.source.read_off_tick:
                entry.off_tick = OffTickReader(entry.source)
        self._held = [entry for entry in held if entry.hold_s]
        self._every_tick = [entry.source for entry in held if not entry.hold_s]
        self._held_reading = {}
        self._next_read_at = float("-inf")

    def __post_init__(self) -> None:
        self.pace(0.0)

    def held_columns(self) -> list[str]:
        """The columns that, at this pace, repeat a source's last reading between its reads."""
        return [column for held in self._held for column in held.source.columns()]

    def sample_into(self, row: Reading, now: float, fresh: bool = False) -> None:
        """One row's readings; `fresh` reads every source, held or not (the row after the command ended)."""
        if fresh:
            self._stop_off_tick()  # the last row reads every source itself, on this thread
            for source in self.sources:
                source.expire()
        if fresh or now >= self._next_read_at or self._off_tick_read():
            self._read_held(now, fresh)
        row.update(self._held_reading)
        for source in self._every_tick:
            row.update(source.sample(now))

    def _off_tick_read(self) -> bool:
        """True when a source read off the tick has a reading this set has not taken yet."""
        return any(h.off_tick is not None and h.off_tick.reads != h.off_tick_taken for h in self._held)

    def _read_held(self, now: float, fresh: bool) -> None:
        """Read the held sources that are due (all of them if `fresh`), take the new readings of those read
        off the tick, and note when the next read is due."""
        for held in self._held:
            off_tick = None if fresh else held.off_tick
            if off_tick is not None:
                if off_tick.reads != held.off_tick_taken:
                    held.off_tick_taken = off_tick.reads
                    held.reading = off_tick.latest()
                    self.held_reads += 1
            elif fresh or now >= held.read_at + held.hold_s:
                held.read_at = now
                held.reading = held.source.sample(now)
                self.held_reads += 1
        # Rebuilt, not updated: a column a source no longer reports is empty, not its last value.
        self._held_reading = {name: value for held in self._held for name, value in held.reading.items()}
        due = [held.read_at + held.hold_s for held in self._held if held.off_tick is None]
        self._next_read_at = min(due, default=float("inf"))

    def maintain(self, now: float) -> None:
        if self._maintained is None:  # only the sources that have housekeeping to do, on every tick
            self._maintained = [s for s in self.sources if type(s).maintain is not Source.maintain]
        for source in self._maintained:
            source.maintain(now)

    def final_status(self) -> dict[str, dict[str, Any]]:
        """`status` with what the sources noticed while sampling."""
        merged = {name: dict(entry) for name, entry in self.status.items()}
        for source in self.sources:
            notes = source.notes()
            if notes:
                merged[source.name]["notes"] = notes
        return merged

    def _stop_off_tick(self) -> None:
        for held in self._held:
            if held.off_tick is not None:
                held.off_tick.stop()
                held.off_tick = None

    def close(self) -> None:
        self._stop_off_tick()
        for source in self.sources:
            source.close()


@dataclass
class _Held:
    source: Source
    hold_s: float  # 0: read every tick
    read_at: float = float("-inf")
    reading: Reading = field(default_factory=dict)
    off_tick: OffTickReader | None = None  # reads the source on its own thread; the tick takes its latest
    off_tick_taken: int = -1  # the reader's count of reads when its reading was last taken


def _hold_s(min_period_s: float, interval_s: float) -> float:
    """How long after a read its reading is repeated: the period rounded to whole ticks, less half a tick, so
    that the source is read every that many ticks whatever the lateness of each (up to half a tick)."""
    ticks = round(min_period_s / interval_s) if interval_s > 0 else 0
    return 0.0 if ticks <= 1 else (ticks - 0.5) * interval_s


def _factories(hardware: Hardware) -> dict[str, Callable[[], Source]]:
    return {
        "cpu": lambda: CpuSource(hardware.proc_root, hardware.sys_root),
        "thermal": lambda: ThermalSource(hardware.sys_root),
        "cpu_throttle": lambda: CpuThrottleSource(hardware.sys_root),
        "memory": lambda: MemorySource(hardware.proc_root),
        "disk": lambda: DiskSource(hardware.proc_root, hardware.sys_root),
        "network": lambda: NetworkSource(hardware.proc_root),
        "process": lambda: ProcessTreeSource(hardware.proc_root),
        "rapl": lambda: RaplSource(hardware.sys_root),
        "nvml": lambda: NvmlSource(hardware.load_nvml, hardware.environ),
        "gpm": lambda: GpmSource(hardware.load_nvml, hardware.environ),
    }


def build_sources(hardware: Hardware, follow_command: bool) -> SourceSet:
    """Every source that works here, in column order, and why the others are absent."""
    sources: list[Source] = []
    status: dict[str, dict[str, Any]] = {}
    factories = _factories(hardware)
    for name in SOURCE_ORDER:
        try:
            source = factories[name]()
        except SourceUnavailable as exc:
            status[name] = {"available": False, "reason": str(exc)}
            if isinstance(exc, GpmUnavailable):
                status[name]["gpus"] = exc.gpus
            if name in KEPT_WHEN_ABSENT:
                sources.append(AbsentSource(name, KEPT_WHEN_ABSENT[name]))
            continue
        sources.append(source)
        status[name] = {"available": True}
    process = next(s for s in sources if isinstance(s, ProcessTreeSource))
    if not follow_command:
        # Its columns stay (empty) so every run has the same header shape.
        status["process"] = {"available": False, "reason": "sampling only: no command to follow"}
    thermal = next((s for s in sources if isinstance(s, ThermalSource)), None)  # None: absent or empty
    if thermal is not None:
        status["thermal"]["sensor"] = thermal.chosen
    gpm = next((s for s in sources if isinstance(s, GpmSource)), None)
    if gpm is not None:
        status["gpm"].update(gpm.status())
    nvml = next((s for s in sources if isinstance(s, NvmlSource)), None)
    return SourceSet(sources, status, process, nvml)


__all__ = ["SOURCE_ORDER", "Hardware", "Reading", "Source", "SourceSet", "SourceUnavailable", "build_sources"]
