"""Network throughput of all interfaces but loopback, from /proc/net/dev."""

from __future__ import annotations

from pathlib import Path

from collect.procfs import KernelFile
from collect.sources.base import HELD_PERIOD_S, Reading, Source, SourceUnavailable

_RX_BYTES, _TX_BYTES = 0, 8  # columns after "iface:"


def parse_net_dev(data: bytes) -> dict[bytes, tuple[int, int]]:
    counters = {}
    for line in data.split(b"\n")[2:]:
        name, sep, rest = line.partition(b":")
        if not sep:
            continue
        name = name.strip()
        if name == b"lo":
            continue
        fields = rest.split()
        counters[name] = (int(fields[_RX_BYTES]), int(fields[_TX_BYTES]))
    return counters


class NetworkSource(Source):
    name = "network"
    min_period_s = HELD_PERIOD_S

    def __init__(self, proc_root: Path) -> None:
        super().__init__()
        try:
            self._net_dev = KernelFile(proc_root / "net/dev", 8192)
            parse_net_dev(self._net_dev.read())
        except (OSError, ValueError, IndexError) as exc:
            raise SourceUnavailable(f"cannot read {proc_root}/net/dev: {exc}") from exc
        self._last: dict[bytes, tuple[int, int]] = {}
        self._last_time = 0.0

    def columns(self) -> list[str]:
        return ["net_rx_bps", "net_tx_bps"]

    def prime(self, now: float) -> None:
        self._last, self._last_time = parse_net_dev(self._net_dev.read()), now
        self.last_raw = self._last

    def sample(self, now: float) -> Reading:
        current = parse_net_dev(self._net_dev.read())
        elapsed = now - self._last_time
        received = sent = 0
        for name, (rx, tx) in current.items():
            before = self._last.get(name)
            if before is not None:  # a counter that went backwards was reset: count nothing for it
                received += max(0, rx - before[0])
                sent += max(0, tx - before[1])
        self._last, self._last_time = current, now
        self.last_raw = current
        if elapsed <= 0:
            return dict.fromkeys(self.columns())
        return {"net_rx_bps": round(received / elapsed, 1), "net_tx_bps": round(sent / elapsed, 1)}

    def close(self) -> None:
        self._net_dev.close()
