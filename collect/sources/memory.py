"""Memory and swap in use from /proc/meminfo, computed the way psutil does (used = total - available)."""

from __future__ import annotations

from pathlib import Path

from collect.procfs import KernelFile
from collect.sources.base import HELD_PERIOD_S, Reading, Source, SourceUnavailable

_KEYS = (b"MemTotal:", b"MemFree:", b"MemAvailable:", b"SwapTotal:", b"SwapFree:")


def parse_meminfo(data: bytes) -> dict[bytes, int]:
    """The fields we need, in bytes."""
    values = {}
    for line in data.split(b"\n"):
        key, _, rest = line.partition(b" ")
        if key in _KEYS:
            values[key] = int(rest.split()[0]) * 1024
    return values


def key_positions(tokens: list[bytes]) -> list[tuple[bytes, int]]:
    """Where each of our keys sits among meminfo's whitespace-separated tokens."""
    return [(token, index) for index, token in enumerate(tokens) if token in _KEYS]


class MemorySource(Source):
    name = "memory"
    min_period_s = HELD_PERIOD_S

    def __init__(self, proc_root: Path) -> None:
        super().__init__()
        try:
            self._meminfo = KernelFile(proc_root / "meminfo", 8192)
            data = self._meminfo.read()
        except OSError as exc:
            raise SourceUnavailable(f"cannot read {proc_root}/meminfo: {exc.strerror or exc}") from exc
        values = parse_meminfo(data)
        if b"MemTotal:" not in values:
            raise SourceUnavailable(f"{proc_root}/meminfo has no MemTotal")
        if b"MemAvailable:" not in values:
            self.note_once("no MemAvailable in meminfo (kernel < 3.14): used = total - free")
        # meminfo's layout is fixed while the kernel runs: each read is the head up to the last line we use
        # (with room for its numbers to grow), one split and a few lookups.
        self._learn(data)

    def columns(self) -> list[str]:
        return ["mem_used_bytes", "mem_util_pct", "swap_used_bytes"]

    def _read(self) -> dict[bytes, int]:
        tokens = self._meminfo.read_head(self._head_size).split()
        if len(tokens) > self._tokens_needed:  # the unit after the last value we use: that value is whole
            values: dict[bytes, int] = {}
            for key, index in self._positions:
                if tokens[index] != key:
                    break
                values[key] = int(tokens[index + 1]) << 10
            else:
                return values
        # The layout moved after all (a field appeared, a value grew past the head): relearn it.
        data = self._meminfo.read()
        self._learn(data)
        return parse_meminfo(data)

    def _learn(self, data: bytes) -> None:
        self._positions = key_positions(data.split())
        last_index = max((index for _, index in self._positions), default=-2)
        self._tokens_needed = last_index + 2
        last_key = self._positions[-1][0] if self._positions else b""
        self._head_size = data.index(last_key) + 128 if last_key else len(data) + 4096

    def sample(self, now: float) -> Reading:
        values = self._read()
        self.last_raw = values
        total = values[b"MemTotal:"]
        available = values.get(b"MemAvailable:") or values.get(b"MemFree:", 0)
        available = min(max(available, 0), total)
        used = total - available
        swap_total, swap_free = values.get(b"SwapTotal:"), values.get(b"SwapFree:")
        return {
            "mem_used_bytes": used,
            "mem_util_pct": round(100.0 * used / total, 2) if total else None,
            "swap_used_bytes": swap_total - swap_free
            if swap_total is not None and swap_free is not None
            else None,
        }

    def close(self) -> None:
        self._meminfo.close()
