"""telemetry.csv: header fixed at the first row, every row handed to the kernel as it is written.

Each row is one write(2) on the file's descriptor (no user-space buffer to flush): once `write` returns,
the row survives the collector being killed, even by kill -9. `close` fsyncs.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from collect.sources.base import Reading


class TelemetryWriteError(Exception):
    """Writing telemetry.csv failed (disk full, I/O error); the message is one line for the user."""


def format_cell(value: float | int | None) -> str:
    return "" if value is None else str(value)


class TelemetryWriter:
    def __init__(self, path: Path, columns: list[str]) -> None:
        self.path = path
        self.columns = list(columns)
        self.rows = 0
        self._fd: int | None = None
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            self._emit(",".join(self.columns) + "\n")
        except OSError as exc:
            self.close()
            raise TelemetryWriteError(f"cannot write {path}: {exc.strerror or exc}") from exc

    def _emit(self, line: str) -> None:
        assert self._fd is not None
        data = line.encode("ascii")
        written = os.write(self._fd, data)
        while 0 < written < len(data):  # a short write (the disk filling up): the rest, or the error
            data = data[written:]
            written = os.write(self._fd, data)
        if written <= 0:
            raise OSError(errno.EIO, "nothing written")

    def write(self, row: Reading) -> None:
        # Cells are numbers or None: "None" is the only text to blank, and no number's text contains it.
        # map() keeps the loop over the columns in C, which matters at 100 rows a second.
        line = ",".join(map(str, map(row.get, self.columns))).replace("None", "")
        try:
            self._emit(line + "\n")
        except OSError as exc:
            raise TelemetryWriteError(f"cannot write {self.path}: {exc.strerror or exc}") from exc
        self.rows += 1

    def close(self) -> None:
        """fsync and close; after a write error the unwritten rest is dropped without a second error."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.fsync(fd)
        with contextlib.suppress(OSError):
            os.close(fd)
