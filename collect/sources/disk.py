"""Disk throughput and busy time of the physical disks, from /proc/diskstats (like iostat -x)."""

from __future__ import annotations

from pathlib import Path

from collect.procfs import KernelFile
from collect.sources.base import HELD_PERIOD_S, Reading, Source, SourceUnavailable
from runformat.columns import DISK_BUSIEST_BPS

SECTOR_BYTES = 512  # /proc/diskstats always counts 512-byte sectors
# Fields after "major minor name": reads, reads merged, sectors read, ms reading, writes, writes merged,
# sectors written, ms writing, in flight, io_ticks (ms the device was busy), ...
_SECTORS_READ, _SECTORS_WRITTEN, _IO_TICKS = 5, 9, 12


def physical_disks(sys_root: Path) -> list[str]:
    """Whole disks backed by a device (vda, sda, nvme0n1), not loop, ram, zram, dm-* or md* layers."""
    block = sys_root / "block"
    try:
        names = sorted(entry.name for entry in block.iterdir())
    except OSError:
        return []
    return [name for name in names if (block / name / "device").exists()]


class DiskSource(Source):
    name = "disk"
    min_period_s = HELD_PERIOD_S

    def __init__(self, proc_root: Path, sys_root: Path) -> None:
        super().__init__()
        self._disks = {name.encode() for name in physical_disks(sys_root)}
        if not self._disks:
            raise SourceUnavailable(f"no physical disk in {sys_root}/block")
        try:
            self._diskstats = KernelFile(proc_root / "diskstats", 8192)
            # diskstats' layout only changes when a device comes or goes: each read is then one split.
            self._positions = self._disk_positions(self._diskstats.read())
        except OSError as exc:
            raise SourceUnavailable(f"cannot read {proc_root}/diskstats: {exc.strerror or exc}") from exc
        self._last: dict[bytes, tuple[int, int, int]] = {}
        self._last_time = 0.0

    def columns(self) -> list[str]:
        return ["disk_read_bps", "disk_write_bps", "disk_util_pct", DISK_BUSIEST_BPS]

    def _read_counters(self) -> dict[bytes, tuple[int, int, int]]:
        data = self._diskstats.read()
        tokens = data.split()
        counters = {}
        for disk, at in self._positions:
            if at + _IO_TICKS - 2 >= len(tokens) or tokens[at] != disk:  # a device came or went: relearn
                self._positions = self._disk_positions(data)
                return self._counters_at(tokens)
            counters[disk] = (int(tokens[at + 3]), int(tokens[at + 7]), int(tokens[at + 10]))
        return counters

    def _counters_at(self, tokens: list[bytes]) -> dict[bytes, tuple[int, int, int]]:
        return {
            disk: (int(tokens[at + 3]), int(tokens[at + 7]), int(tokens[at + 10]))
            for disk, at in self._positions
        }

    def _disk_positions(self, data: bytes) -> list[tuple[bytes, int]]:
        """Where each physical disk's name sits among diskstats' whitespace-separated tokens."""
        positions = []
        offset = 0
        for line in data.split(b"\n"):
            fields = line.split()
            if len(fields) > _IO_TICKS and fields[2] in self._disks:
                positions.append((fields[2], offset + 2))
            offset += len(fields)
        return positions

    def prime(self, now: float) -> None:
        self._last, self._last_time = self._read_counters(), now
        self.last_raw = self._last

    def sample(self, now: float) -> Reading:
        current = self._read_counters()
        elapsed = now - self._last_time
        read_sectors = written_sectors = busiest_sectors = 0
        busiest_ms = -1
        for disk, (reads, writes, ticks) in current.items():
            before = self._last.get(disk)
            if before is None:
                continue
            read, written = max(0, reads - before[0]), max(0, writes - before[1])
            read_sectors += read
            written_sectors += written
            if ticks - before[2] > busiest_ms:
                busiest_ms, busiest_sectors = ticks - before[2], read + written
        busiest_ms = max(0, busiest_ms)
        self._last, self._last_time = current, now
        self.last_raw = current
        if elapsed <= 0:
            return dict.fromkeys(self.columns())
        return {
            "disk_read_bps": round(read_sectors * SECTOR_BYTES / elapsed, 1),
            "disk_write_bps": round(written_sectors * SECTOR_BYTES / elapsed, 1),
            "disk_util_pct": round(min(100.0, max(0.0, busiest_ms / (elapsed * 1000.0) * 100.0)), 2),
            DISK_BUSIEST_BPS: round(busiest_sectors * SECTOR_BYTES / elapsed, 1),
        }

    def close(self) -> None:
        self._diskstats.close()
