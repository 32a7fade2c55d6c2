"""telemetry.csv: header fixed at the first row, every row handed to the kernel as it is written.

Each row is one write(2) on the file's descriptor (no user-space buffer to flush): once `write` returns,
the row survives the collector being killed, even by kill -9. `close` fsyncs.

Held columns (a held source's, repeated between its reads: collect/sources) are formatted once per reading:
the caller says, with `held_version`, when their values are those of the previous row.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Collection
from pathlib import Path

from collect.sources.base import Reading
from runformat.diskfull import DiskFull, disk_full_in


class TelemetryWriteError(Exception):
    """Writing telemetry.csv failed (disk full, I/O error); the message is one line for the user.
    `disk_full` says which file and how much was free when the disk (or the quota) was full."""

    def __init__(self, message: str, disk_full: DiskFull | None = None) -> None:
        super().__init__(message)
        self.disk_full = disk_full


def _write_error(path: Path, exc: OSError) -> TelemetryWriteError:
    full = disk_full_in(exc, path)
    if full is not None:
        return TelemetryWriteError(full.line(), full)
    return TelemetryWriteError(f"cannot write {path}: {exc.strerror or exc}")


def format_cell(value: float | int | None) -> str:
    return "" if value is None else str(value)


class TelemetryWriter:
    def __init__(self, path: Path, columns: list[str], held_columns: Collection[str] = ()) -> None:
        self.path = path
        self.columns = list(columns)
        self.rows = 0
        self._runs = _column_runs(self.columns, set(held_columns))
        self._held_version: object = None
        self._held_texts: dict[int, str] = {}  # a held run's index in _runs: its cells, formatted
        self._fd: int | None = None
        self._size_bytes = 0  # the end of the last whole row
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            self._emit(",".join(self.columns) + "\n")
        except OSError as exc:
            self.close()
            raise _write_error(path, exc) from exc

    def _emit(self, line: str) -> None:
        assert self._fd is not None
        data = line.encode("ascii")
        try:
            written = os.write(self._fd, data)
            while 0 < written < len(data):  # a short write (the disk filling up): the rest, or the error
                data = data[written:]
                written = os.write(self._fd, data)
            if written <= 0:
                raise OSError(errno.EIO, "nothing written")
        except OSError:
            with contextlib.suppress(OSError):  # no half row: the file ends with the last whole one
                os.ftruncate(self._fd, self._size_bytes)
                os.lseek(self._fd, self._size_bytes, os.SEEK_SET)
            raise
        self._size_bytes += len(line)

    def write(self, row: Reading, held_version: object = None) -> None:
        """One row. With `held_version` (not None) equal to the previous row's, the held columns' cells are
        the previous row's text, not formatted again."""
        if held_version is None:
            line = _cells(row, self.columns)
        else:
            if held_version != self._held_version:
                self._held_texts = {i: _cells(row, run) for i, held, run in self._runs if held}
                self._held_version = held_version
            texts = self._held_texts
            line = ",".join([texts[i] if held else _cells(row, run) for i, held, run in self._runs])
        try:
            self._emit(line + "\n")
        except OSError as exc:
            raise _write_error(self.path, exc) from exc
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


def _cells(row: Reading, columns: list[str]) -> str:
    # Cells are numbers or None: "None" is the only text to blank, and no number's text contains it.
    # map() keeps the loop over the columns in C, which matters at 100 rows a second.
    return ",".join(map(str, map(row.get, columns))).replace("None", "")


def _column_runs(columns: list[str], held: set[str]) -> list[tuple[int, bool, list[str]]]:
    """The columns in order, cut into runs of held and not held ones: [(index, held, columns), ...]."""
    runs: list[tuple[int, bool, list[str]]] = []
    for column in columns:
        is_held = column in held
        if runs and runs[-1][1] == is_held:
            runs[-1][2].append(column)
        else:
            runs.append((len(runs), is_held, [column]))
    return runs
