"""A costly source read on a thread of its own, so the sampling tick never waits for it.

GPM's read (a snapshot and every metric of each GPU) costs milliseconds of CPU (docs/measurements.md): on
the tick thread at a 10 ms interval it made one tick a second late by a third of the interval. A source
that says `read_off_tick` and is read less often than every tick is read here instead, once per its
`min_period_s` on the monotonic clock; the tick takes the last completed reading, which is up to one
period old. Before the first read completes the source's cells are empty (no window has ended yet).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from collect.sources.base import Reading, Source

STOP_WAIT_S = 5.0  # at most this long for a read in progress to end when the reader is stopped


class OffTickReader:
    def __init__(self, source: Source, clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.period_s = source.min_period_s
        self._clock = clock
        self._lock = threading.Lock()
        self._latest: Reading = dict.fromkeys(source.columns())  # empty cells until the first read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reads = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"collect-{self.source.name}", daemon=True)
            self._thread.start()

    def latest(self) -> Reading:
        with self._lock:
            return self._latest

    def stop(self) -> None:
        """No read after this returns (one in progress is waited for), so the source is the caller's again."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_S)

    def _run(self) -> None:
        next_at = self._clock() + self.period_s  # the first window is one period long
        while not self._stop.wait(max(0.0, next_at - self._clock())):
            try:
                reading = self.source.sample(self._clock())
            except Exception as exc:  # a read that fails leaves the last reading; the next one tries again
                self.source.note_once(
                    f"{self.source.name} read failed off the tick ({type(exc).__name__}: {exc})"
                )
                reading = None
            if reading is not None:
                with self._lock:
                    self._latest = reading
                    self.reads += 1
            next_at = max(next_at + self.period_s, self._clock())
