"""The one interface every telemetry source implements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Reading = dict[str, float | int | None]

# The kernel counts CPU time in USER_HZ (100 per second on Linux): a 10 ms tick of /proc/stat or of a
# process's stat moves by one count or none, which says nothing finer than a 100 ms read would. Those sources,
# and the slow-moving ones (memory, disk, network, temperatures), are read about this often (rounded to whole
# ticks); rows in between repeat their last reading. RAPL counters are read every tick, NVML twice as often
# as its values change (collect/sources/nvml.py: GPU_HELD_PERIOD_S, ENERGY_MIN_PERIOD_S).
HELD_PERIOD_S = 0.1


class SourceUnavailable(Exception):
    """Raised by a source's constructor: the hardware or permission is missing (message = one-line reason)."""


class Source:
    """A group of telemetry columns, fixed at construction.

    `prime(now)` reads counters so the first `sample(now)` can report rates; `sample(now)` returns a value
    (or None for an empty cell) for each of `columns()`. `now` is time.monotonic() of the tick.
    `maintain(now)` runs after the row is written, for slow housekeeping (e.g. rescanning a process tree).
    """

    name = "source"
    # Read about once per this many seconds (whole ticks), the last reading repeated between; 0: every tick.
    min_period_s = 0.0
    # A read that costs milliseconds: when held, read on a thread of its own (collect/sources/offtick.py).
    read_off_tick = False
    # The raw kernel counters behind the last reading, replaced (never mutated) each time the source reads
    # them, for exporters that publish counters as counters (collect/exposition.py); None if not kept.
    last_raw: Any = None

    def __init__(self) -> None:
        self._notes: list[str] = []

    def columns(self) -> list[str]:
        raise NotImplementedError

    def prime(self, now: float) -> None:
        """Read counters so the next sample can compute rates (default: nothing to prime)."""

    def sample(self, now: float) -> Reading:
        raise NotImplementedError

    def maintain(self, now: float) -> None:
        """Slow housekeeping between ticks (default: none)."""

    def expire(self) -> None:
        """Forget what the source keeps between its own reads, so the next sample reads everything anew
        (the run's last row); default: it keeps nothing."""

    def notes(self) -> list[str]:
        """Things noticed once while sampling (a field unsupported, a GPU lost), for run.json."""
        return list(self._notes)

    def note_once(self, text: str) -> None:
        if text not in self._notes:
            self._notes.append(text)

    def close(self) -> None:
        """Release file descriptors and libraries."""


class AbsentSource(Source):
    """A source missing on this machine whose columns every run keeps anyway, as empty cells."""

    min_period_s = HELD_PERIOD_S  # its cells never change

    def __init__(self, name: str, columns: list[str]) -> None:
        super().__init__()
        self.name = name
        self._columns = list(columns)
        self._empty: Reading = dict.fromkeys(self._columns)

    def columns(self) -> list[str]:
        return list(self._columns)

    def sample(self, now: float) -> Reading:
        return self._empty


def import_pynvml() -> Any:
    """The real NVML binding, imported only when a collector actually starts."""
    import pynvml

    return pynvml


@dataclass
class Hardware:
    """Where the sources find the machine: real roots by default, temp dirs and fakes in tests."""

    proc_root: Path = Path("/proc")
    sys_root: Path = Path("/sys")
    load_nvml: Callable[[], Any] = import_pynvml
    environ: dict[str, str] | None = None  # None: os.environ (CUDA_VISIBLE_DEVICES)


def ratio_pct(part: float, whole: float) -> float | None:
    """part/whole as a percentage rounded to 0.01, clamped to 0..100; None when whole is zero."""
    if whole <= 0:
        return None
    return round(min(100.0, max(0.0, 100.0 * part / whole)), 2)
